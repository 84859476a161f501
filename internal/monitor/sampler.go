package monitor

import (
	"context"
	"math"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cfsprobe/cfsprobe/internal/alarm"
	"github.com/cfsprobe/cfsprobe/internal/cgroup"
	"github.com/cfsprobe/cfsprobe/internal/trace"
)

// GroupPeriods are a followed group's per-period figures.
type GroupPeriods struct {
	Path string
	PeriodHistograms
}

// SamplerOptions configure a Sampler.
type SamplerOptions struct {
	MaxGroups      int       // most groups followed, the first ones Follow is given; 0 or less: none
	CPUs           int       // online CPUs: bounds the CPUs a group runs on (0: no bound)
	UsageBuckets   []float64 // upper bounds of the usage ratio histogram's buckets
	DemandBuckets  []float64 // upper bounds of the demand histogram's buckets, in CPUs
	StallBuckets   []float64 // upper bounds of the stall histogram's buckets, in seconds
	StoppedBuckets []float64 // upper bounds of the stopped CPUs histogram's buckets
	Errors         *ReadErrors
	// Clock is the samples' clock, monotonic ns (default: since the
	// program started); Periods, when set, is given every period handed
	// out, with the group's path, on the sampler's thread (it must not
	// block). Together they let a caller compare the sampler's periods
	// with another reader's.
	Clock   func() int64
	Periods func(path string, p trace.Period)
}

// Sampler follows groups with a quota at period resolution: it reads
// their counters at period resolution (see Run) and feeds each group's
// periods (trace.Tracker) into its histograms. A group for which the
// kernel counted no period for more than a period, and whose usage did
// not grow since the last reading, is quiet: once its
// period boundaries are pinned down it is still read around each
// boundary, one file each time, so that a burst's periods are seen as
// closely as a running group's; before that, its cpu.stat alone is read,
// once per period for sparseWatch after it last ran (so that a burst
// wakes it within a period, and the burst's boundaries pin its grid),
// then less and less often down to once a second, until a
// period is counted again, and the periods until then are not seen
// closely. Run does the reading; Follow says which groups to follow;
// Snapshot copies the histograms.
type Sampler struct {
	opts SamplerOptions

	mu     sync.Mutex
	groups []*sampled
	byPath map[string]*sampled
	alarm  *alarm.Alarm // while Run runs

	overruns atomic.Uint64
	buf      [statBufSize]byte // the loop's
}

type sampled struct {
	target    Target
	files     counters
	tracker   *trace.Tracker
	hist      PeriodHistograms
	due       int64 // the next reading (not focused), ns on the sampler's clock
	last      cgroup.Stat
	haveLast  bool
	changed   int64 // when nr_periods last moved
	ran       bool  // nr_periods moved since the first reading: changed is when the group last ran
	idle      bool  // quiet: no period counted lately
	idleWait  int64 // between readings while quiet and not pinned
	throttled int64 // when nr_throttled last moved

	// Focus (see Run): the grid is pinned, the next boundary is b give
	// or take half, and the next reading is stage's; reading is the
	// stage of the reading under way (-1: not a focused one); settled:
	// the last reading of cpu.stat was the one after the last boundary.
	pinned  bool
	b, half int64
	stage   int
	reading int
	settled bool
}

// NewSampler returns a Sampler that follows nothing yet.
func NewSampler(opts SamplerOptions) *Sampler {
	if opts.Errors == nil {
		opts.Errors = NewReadErrors()
	}
	return &Sampler{opts: opts, byPath: map[string]*sampled{}}
}

// Follow makes the Sampler follow the first MaxGroups of the targets
// that have a quota and whose usage can be read, in their order; others
// are let go. A group whose usage is unknown (Group.UsageUnknown) is not
// followed: a period's usage and its stall are worked out from the usage
// counter (its throttled periods are in its counters all the same). A
// group already followed keeps its histograms (the tracker starts afresh
// if its period or quota changed). Files that cannot be opened are
// counted as read errors.
func (s *Sampler) Follow(targets []Target) {
	s.mu.Lock()
	defer s.mu.Unlock()
	groups := make([]*sampled, 0, min(len(targets), max(s.opts.MaxGroups, 0)))
	byPath := make(map[string]*sampled, cap(groups))
	for _, t := range targets {
		if len(groups) >= s.opts.MaxGroups {
			break
		}
		if t.Limits.Unlimited() || t.Limits.Period <= 0 || t.Group.UsageUnknown() != "" {
			continue
		}
		if g := s.byPath[t.Group.Path]; g != nil && sameDirs(g.target.Group, t.Group) {
			if g.target.Limits != t.Limits {
				g.tracker, g.pinned = s.newTracker(t.Limits), false
			}
			g.target = t
			delete(s.byPath, t.Group.Path)
			groups = append(groups, g)
			byPath[t.Group.Path] = g
			continue
		}
		files, err := openCounters(t.Group)
		if err != nil {
			if !IsGone(err) {
				s.opts.Errors.Add(fileOf(err))
			}
			continue
		}
		g := &sampled{
			target: t, files: files,
			tracker: s.newTracker(t.Limits),
			hist:    NewPeriodHistograms(s.opts.UsageBuckets, s.opts.DemandBuckets, s.opts.StallBuckets, s.opts.StoppedBuckets),
		}
		groups = append(groups, g)
		byPath[t.Group.Path] = g
	}
	for _, g := range s.byPath {
		g.files.close()
	}
	s.groups, s.byPath = groups, byPath
	s.ring() // read the new groups now
}

// ring makes Run's next pass start at once (s.mu held).
func (s *Sampler) ring() {
	if s.alarm != nil {
		s.alarm.Set(0)
	}
}

// newTracker is the period tracker of a group with the given limits.
func (s *Sampler) newTracker(l cgroup.Limits) *trace.Tracker {
	return trace.NewTracker(trace.TrackerConfig{Period: l.Period, Quota: l.Quota, CPUs: s.opts.CPUs})
}

// Groups is the number of groups followed.
func (s *Sampler) Groups() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.groups)
}

// Overruns counts the passes that started more than one interval late.
func (s *Sampler) Overruns() uint64 { return s.overruns.Load() }

// Snapshot appends a copy of every followed group's histograms to dst.
// The copies reuse the counts of what dst's array held beyond its length
// (a snapshot passed back as last[:0]), so that taking one at every
// scrape allocates nothing: the caller is done with that one.
func (s *Sampler) Snapshot(dst []GroupPeriods) []GroupPeriods {
	s.mu.Lock()
	defer s.mu.Unlock()
	old := dst[len(dst):cap(dst)]
	for i, g := range s.groups {
		var into PeriodHistograms
		if i < len(old) {
			into = old[i].PeriodHistograms
		}
		dst = append(dst, GroupPeriods{Path: g.target.Group.Path, PeriodHistograms: g.hist.copyInto(into)})
	}
	return dst
}

// Run reads the followed groups until ctx is done, then closes their
// files. It wakes every tenth of the shortest period of the groups that
// are not quiet (1 ms to 100 ms; a fifth when all are pinned, below),
// give or take a fifth at random so that the readings do not lock onto
// the kernel's period timers, whose phase is learnt finer than one
// interval that way. Each pass reads:
//
//   - a group whose period boundaries are not pinned down yet: every
//     pass;
//   - a group whose boundaries are pinned (trace.Tracker.Grid): in the
//     last pass before each boundary and the first after it (postDelay
//     or more after it), and, when the group was throttled lately, in
//     the first pass after half-way: two or three readings per period
//     instead of ten (focus), of which on v1 only the one after the
//     boundary reads cpu.stat (usageOnly);
//   - a quiet group (no period counted lately) whose boundaries are
//     pinned: in the last pass before each boundary (its usage alone)
//     and the first after it (its cpu.stat alone, and everything when
//     the kernel counted a period): the grid of the kernel's period
//     timer survives the group's idleness (the timer is started again
//     whole periods after its last expiry, hrtimer_forward_now in
//     start_cfs_bandwidth), so the periods of a burst that wakes it are
//     seen between readings that close;
//   - a quiet group whose boundaries are not pinned: once a period for
//     sparseWatch after it last ran, then less and less often, down to
//     once a second; in the first pass
//     after it is due while other groups run, in a pass of its own only
//     when all are quiet.
//
// Waking up costs more than a read, so all groups share the passes, and
// Run waits for the next one on an alarm that costs the least to wake
// from (internal/alarm).
func (s *Sampler) Run(ctx context.Context) {
	if !s.startAlarm(ctx) {
		return
	}
	defer s.close()
	stop := context.AfterFunc(ctx, func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.ring()
	})
	defer stop()
	gap := int64(100 * time.Millisecond)
	for {
		s.mu.Lock()
		started := s.now()
		w := s.pass(started, gap)
		var planned int64
		planned, gap = w.schedule(started, gap, rand.Float64())
		// Set under the lock: Follow (ring) comes before the pass or
		// after this.
		s.alarm.Set(time.Duration(planned - s.now()))
		s.mu.Unlock()
		if err := s.alarm.Wait(); err != nil || ctx.Err() != nil {
			return // (a timerfd's read does not fail)
		}
		if w.interval > 0 && s.now()-planned > w.interval {
			s.overruns.Add(1)
		}
	}
}

// startAlarm makes Run's alarm, trying again every second while it
// cannot be made (the process is out of descriptors); false when ctx
// was done first.
func (s *Sampler) startAlarm(ctx context.Context) bool {
	for {
		a, err := alarm.New()
		if err == nil {
			s.mu.Lock()
			s.alarm = a
			s.mu.Unlock()
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(time.Second):
		}
	}
}

const (
	minPassGap  = 500 * time.Microsecond // between two passes
	maxIdleWait = time.Second            // between two readings of a quiet group
	sparseWatch = 10 * time.Second       // a quiet unpinned group is read every period for this long after it ran
)

// wanted is what a pass found the groups want of the passes after it:
// when the next quiet group is due (next), and the interval of the
// passes the others need (0 when all are quiet).
type wanted struct{ next, interval int64 }

// schedule is when the pass after one that started at started comes,
// and the gap to it (the gap before it was gap): every interval, give
// or take a fifth at random (jitter, from 0 to 1), so that the readings
// do not lock onto the kernel's period timers; quiet groups wait for the
// next pass, as a wake-up of their own each would cost more than the
// reading (a node's lightly used groups go quiet and wake up all the
// time); and never within minPassGap.
func (w wanted) schedule(started, gap int64, jitter float64) (planned, newGap int64) {
	planned = w.next
	if w.interval > 0 {
		gap = int64(float64(w.interval) * (0.8 + 0.4*jitter))
		planned = started + gap
	}
	return max(planned, started+int64(minPassGap)), gap
}

// pass reads the groups that want a reading at now, the next pass being
// about gap later (s.mu held), and says what they want of the passes
// after it.
func (s *Sampler) pass(now, gap int64) wanted {
	next, interval := now+int64(maxIdleWait), int64(0)
	kept := s.groups[:0]
	for _, g := range s.groups {
		if g.wants(now, gap) {
			if err := s.sample(g); err != nil && IsGone(err) {
				g.files.close()
				delete(s.byPath, g.target.Group.Path)
				continue
			}
		}
		if g.idle && !g.pinned {
			next = min(next, g.due)
		} else {
			// A pinned group needs a pass shortly before and after each
			// boundary: every fifth of its period will do.
			iv := int64(g.target.Limits.Period / 10)
			if g.pinned {
				iv *= 2
			}
			iv = max(iv, int64(time.Millisecond))
			if interval == 0 || iv < interval {
				interval = iv
			}
		}
		kept = append(kept, g)
	}
	clear(s.groups[len(kept):])
	s.groups = kept
	return wanted{next, interval}
}

// wants says whether a pass at now, with the next one about gap later
// (give or take a fifth), reads the group, and marks which reading it is.
func (g *sampled) wants(now, gap int64) bool {
	period := int64(g.target.Limits.Period)
	g.reading = -1
	switch {
	case g.idle && !g.pinned || !g.haveLast:
		return now >= g.due
	case !g.pinned:
		return now >= g.due-period/20
	}
	switch g.stage {
	case stageMid:
		if now >= g.b-period/2 && now+gap+gap/4 < g.b-g.half {
			g.reading = stageMid
			return true
		}
		fallthrough
	case stagePre:
		if now+gap+gap/4 >= g.b-g.half { // the next pass may come after it
			g.reading = stagePre
			return true
		}
	case stagePost:
		if now > g.b+max(g.half, postDelay) {
			g.reading = stagePost
			return true
		}
	}
	return false
}

// postDelay is the least time from a boundary to the reading after it:
// by then the throttled time of the run queues that other CPUs let go
// at the boundary (by IPI, kernel/sched/fair.c: unthrottle_cfs_rq_async)
// has been counted, so the reading before the next boundary need not
// read cpu.stat for it (usageOnly).
const postDelay = 2 * int64(time.Millisecond)

// The readings of a focused group around its next boundary b.
const (
	stagePost = iota // the first pass after b
	stageMid         // the first pass after half-way to b
	stagePre         // the last pass before b
)

// sample reads one group and feeds its tracker.
func (s *Sampler) sample(g *sampled) error {
	period := int64(g.target.Limits.Period)
	if g.idle && g.pinned {
		if done, err := s.sampleQuiet(g, period); done || err != nil {
			return err
		}
	} else if g.idle {
		// Quiet: watch nr_periods alone (cpu.stat, one read).
		t := s.now()
		b, err := g.files.stat.read(s.buf[:])
		if err == nil {
			var st cgroup.Stat
			if st, err = cgroup.ParseCPUStat(b, g.files.version); err == nil && st.NrPeriods == g.last.NrPeriods {
				g.idleFor(t, period)
				return nil
			}
		}
		if err != nil {
			if !IsGone(err) {
				s.opts.Errors.Add("cpu.stat")
			}
			return err
		}
	}
	var (
		st   cgroup.Stat
		t    int64
		file string
		err  error
	)
	if t0 := s.now(); g.usageOnly(t0) {
		// cpu.stat has nothing new: the usage alone, one read.
		st = g.last
		st.UsageNs, err = g.files.readUsage(s.buf[:])
		t1 := s.now()
		t, file = t0+(t1-t0)/2, "cpuacct.usage"
		if err == nil && g.reading == stagePre && t1 >= g.b-g.half {
			st, t, file, err = s.readStamped(g) // too late: the boundary may have come
		}
	} else {
		st, t, file, err = s.readStamped(g)
		g.settled = g.reading == stagePost
	}
	if err != nil {
		if !IsGone(err) {
			s.opts.Errors.Add(file)
		}
		return err
	}
	// The kernel counts periods only while the group's period timer
	// runs: while it uses its quota, or it is throttled. A group that
	// does not (it sleeps) has no period to attribute.
	moved := !g.haveLast || st.NrPeriods != g.last.NrPeriods
	if !g.haveLast || st.NrThrottled != g.last.NrThrottled {
		g.throttled = t
	}
	if moved {
		g.ran = g.ran || g.haveLast
		g.changed = t
	}
	grew := g.haveLast && st.UsageNs != g.last.UsageNs
	g.last, g.haveLast = st, true
	if g.idle && !moved {
		g.idleFor(t, period)
		return nil
	}
	emit := s.emitter(g)
	g.tracker.Add(trace.SampleOf(t, st), emit)
	// Quiet once no period was counted for a period and two readings,
	// and it did not run since the last (a group that does will have a
	// period counted at the next boundary).
	if t-g.changed > period+period/5 && !grew {
		g.tracker.Flush(emit)
		g.idle, g.idleWait = true, 0
		g.focus(t, period)
		if !g.pinned {
			g.idleFor(t, period)
		}
		return nil
	}
	g.idle = false
	g.due = t + period/10
	g.focus(t, period)
	return nil
}

// usageOnly says whether the reading of a running group at t can be of
// its usage alone (v1, where the usage has a file of its own), leaving
// cpu.stat out. nr_periods, nr_throttled and the burst counters move at
// boundaries (the period timer); the throttled time when a throttled run
// queue is let go (kernel/sched/fair.c: unthrottle_cfs_rq): at a boundary
// or within postDelay of it (a remote CPU's, by IPI), or when quota comes
// back mid-period (distributed from what other CPUs gave back). So the
// half-way reading leaves it out, and so does the one before a boundary
// that follows the reading after the last one, while the boundary cannot
// have come yet (its place on the grid less the grid's uncertainty and the
// longest a reading may take): what either leaves out is read after the
// boundary, and goes to the period that boundary ends.
func (g *sampled) usageOnly(t int64) bool {
	if g.files.version != 1 || !g.haveLast {
		return false
	}
	switch g.reading {
	case stageMid:
		return true
	case stagePre:
		return g.settled && t+maxReadSpan < g.b-g.half
	}
	return false
}

// emitter hands a group's periods to its histograms and to
// SamplerOptions.Periods.
func (s *Sampler) emitter(g *sampled) func(trace.Period) {
	quota := g.target.Limits.Quota
	return func(p trace.Period) {
		g.hist.Observe(p, quota, s.opts.CPUs)
		if s.opts.Periods != nil {
			s.opts.Periods(g.target.Group.Path, p)
		}
	}
}

// sampleQuiet reads a quiet group whose grid is pinned, around its next
// boundary: before it, the usage alone (cpu.stat moves only at a
// boundary: the rest is the last reading's); after it, cpu.stat alone
// (nothing counted: the usage is the reading's before the boundary, for
// a group that ran before the boundary would have had a period counted
// at it). Each reading goes to the tracker, so that the periods of a
// burst begin and end between readings that close. A usage that grew or
// a period counted wakes the group: done is false when a reading of
// everything is to follow (the kernel counted a period).
func (s *Sampler) sampleQuiet(g *sampled, period int64) (done bool, err error) {
	t0 := s.now()
	st := g.last
	var file string
	if g.reading == stagePre && g.files.usageFile {
		st.UsageNs, err = g.files.readUsage(s.buf[:])
		file = "cpuacct.usage"
	} else if g.reading == stagePre {
		st, file, err = g.files.read(s.buf[:]) // v2: the usage is in cpu.stat
	} else {
		var b []byte
		if b, err = g.files.stat.read(s.buf[:]); err == nil {
			var c cgroup.Stat
			if c, err = cgroup.ParseCPUStat(b, g.files.version); err == nil {
				if c.NrPeriods != g.last.NrPeriods {
					return false, nil
				}
				c.UsageNs = g.last.UsageNs
				st = c
			}
		}
		file = "cpu.stat"
	}
	if err != nil {
		if !IsGone(err) {
			s.opts.Errors.Add(file)
		}
		return true, err
	}
	t := t0 + (s.now()-t0)/2
	if st.NrPeriods != g.last.NrPeriods { // v2's full reading before the boundary
		return false, nil
	}
	g.tracker.Add(trace.SampleOf(t, st), s.emitter(g))
	if st.UsageNs != g.last.UsageNs {
		// It runs: read it as a running group until it is quiet again.
		g.idle, g.changed, g.ran = false, t, true
		g.due = t + period/10
	}
	g.last = st
	g.focus(t, period)
	if !g.pinned {
		g.idleWait = 0
		g.idleFor(t, period)
	}
	return true, nil
}

// focus plans the readings of a running group after one at t: none in
// particular until the tracker has pinned its grid; then the ones around
// the boundary after t (the first more than half beyond it), half-way
// included for a group throttled lately.
func (g *sampled) focus(t, period int64) {
	ph, half, ok := g.tracker.Grid()
	if !ok || period < int64(10*time.Millisecond) {
		g.pinned = false
		return
	}
	switch {
	case !g.pinned || g.reading == stagePost || g.reading < 0 || t > g.b+half:
		g.b = ph + int64(math.Floor(float64(t-half-ph)/float64(period))+1)*period
		g.stage = stagePre
		if !g.idle && t-g.throttled < 2*period && t < g.b-period/2 {
			g.stage = stageMid
		}
	case g.reading == stageMid:
		g.stage = stagePre
	case g.reading == stagePre:
		g.stage = stagePost
	}
	g.pinned, g.half = true, half
}

// idleFor schedules the next reading of a quiet group, in which no
// period was counted at t: a period later while the group ran within
// sparseWatch (its grid is not pinned yet: a group that runs a period
// or two every few seconds is woken within a period of a burst's first
// boundary, so that the rest of the burst's boundaries are read between
// readings that close, and pin its grid); after that, a period later at
// first, twice as long each time after, up to maxIdleWait (but never
// less than a period).
func (g *sampled) idleFor(t, period int64) {
	g.idleWait = max(period, min(2*g.idleWait, int64(maxIdleWait)))
	if g.ran && t-g.changed < int64(sparseWatch) {
		g.idleWait = period
	}
	g.due = t + g.idleWait
}

// maxReadSpan is the longest a reading of a group's counters may take to
// be stamped with one time; a reading interrupted for longer (the thread
// was preempted between the files) is taken again.
const maxReadSpan = 200 * int64(time.Microsecond)

// readStamped reads a group's counters and the time they were read at:
// the middle of the reading, taken again (twice at most) when it spans
// more than maxReadSpan, so that usage and nr_periods are those of one
// instant as far as the sampling interval can tell.
func (s *Sampler) readStamped(g *sampled) (st cgroup.Stat, t int64, file string, err error) {
	for try := 0; ; try++ {
		t0 := s.now()
		st, file, err = g.files.read(s.buf[:])
		t1 := s.now()
		if err != nil || t1-t0 <= maxReadSpan || try == 2 {
			return st, t0 + (t1-t0)/2, file, err
		}
	}
}

// samplerEpoch is the origin of the samples' clock (monotonic).
var samplerEpoch = time.Now()

// now is the samples' clock: SamplerOptions.Clock, or ns since
// samplerEpoch.
func (s *Sampler) now() int64 {
	if s.opts.Clock != nil {
		return s.opts.Clock()
	}
	return int64(time.Since(samplerEpoch))
}

func (s *Sampler) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, g := range s.groups {
		g.files.close()
	}
	s.groups, s.byPath = nil, map[string]*sampled{}
	if s.alarm != nil {
		s.alarm.Close()
		s.alarm = nil
	}
}
