package monitor

import (
	"context"
	"math"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cfsprobe/cfsprobe/internal/cgroup"
	"github.com/cfsprobe/cfsprobe/internal/trace"
)

// UnderQuotaRatio is the line below which a throttled period counts as
// throttled under quota: the line cfsprobe check judges by.
const UnderQuotaRatio = 0.5

// PeriodStat is one enforcement period of a group as the sampler saw it.
type PeriodStat struct {
	EndNs       int64 // the boundary that ended it, on the samples' clock
	UsageNs     int64 // CPU time the group used in it
	Throttled   bool
	ThrottledNs int64 // the kernel's throttled time of the period, summed over CPUs
	// StallNs is how long the group's tasks stood still (throttled
	// periods only): ThrottledNs divided by RunningCPUs, at most the
	// period.
	StallNs int64
	// RunningCPUs is the number of CPUs whose run queues stood still:
	// ThrottledNs divided by the time from when the group stopped
	// running (to a reading interval) to the period's end, rounded, at
	// least 1 and at most the node's CPUs. Throttled periods only.
	RunningCPUs int
	// UsageMaxNs bounds the usage from above: the most the readings
	// around the period's two ends allow, given where the boundaries can
	// be and that the group runs on at most as many CPUs as the node
	// has. UnderQuota judges by it, so that a period the readings blur
	// is not taken for one throttled under quota.
	UsageMaxNs int64

	// DebtNs is the CPU time the group had used beyond its quota in
	// earlier periods and not yet paid back when the period began (a
	// tick's worth at most, unless the quota is smaller than a tick).
	DebtNs int64

	skip   bool  // not seen closely enough to count
	stopNs int64 // when the group stopped running in the period
}

// UsageRatio is the period's usage as a fraction of quota.
func (p PeriodStat) UsageRatio(quota time.Duration) float64 {
	if quota <= 0 {
		return 0
	}
	return float64(p.UsageNs) / float64(quota)
}

// UnderQuota reports whether the group was throttled in the period while
// using less than UnderQuotaRatio of its quota, what a correct kernel
// never does: even by UsageMaxNs, the most the readings allow, and
// counting the overrun of earlier periods it was paying back (DebtNs).
func (p PeriodStat) UnderQuota(quota time.Duration) bool {
	return p.Throttled && quota > 0 && float64(p.UsageMaxNs+p.DebtNs) < UnderQuotaRatio*float64(quota)
}

// Periods splits the counter samples (T in ns, ascending) of a group with
// the given limits into enforcement periods, as a PeriodTracker fed with
// them one by one does. cpus bounds the CPUs a group runs on (0: no
// bound).
func Periods(samples []trace.CounterSample, lim Limits, cpus int) []PeriodStat {
	t := NewPeriodTracker(lim, cpus)
	t.ring = make([]trace.CounterSample, max(len(samples), 2)) // keep them all
	out := []PeriodStat{}
	emit := func(p PeriodStat) { out = append(out, p) }
	for _, s := range samples {
		t.Add(s, emit)
	}
	t.Flush(emit)
	return out
}

// PeriodTracker turns a group's counter samples, as they come, into its
// enforcement periods, the way trace.BuildTimeline builds a trace's
// timeline from a whole run:
//
//   - A period ends where nr_periods moves; the boundary lies on the grid
//     of the kernel's period timer, whose phase is learnt from the
//     sampling intervals that saw exactly one boundary (each says the
//     grid passes through it; their intersection narrows it down).
//   - Usage is interpolated at the period's ends.
//   - nr_throttled's increase over an interval marks as many of the
//     periods that ended in it throttled (those that used the most CPU),
//     and the throttled time's increase is shared among them. Counts that
//     arrive a reading late (cpu.stat is read without the kernel's lock)
//     go to the latest period.
//
// A period is handed out once the next boundary is seen (its counts can
// no longer change), or when the group falls idle. Periods whose ends
// fall in readings more than half a period apart (the sampler was
// starved, the group woke up from idle) or before the first reading are
// not handed out: the sampler did not see them.
type PeriodTracker struct {
	period int64
	quota  int64 // < 0: none
	cpus   int
	debt   int64                 // overrun of the periods handed out, not yet paid back
	ring   []trace.CounterSample // the latest samples, oldest first from head
	head   int
	n      int

	phase     arc // where the grid is, modulo the period
	havePhase bool
	misses    int // consecutive intervals that disagreed with phase
	confirms  int // intervals that agreed with phase since it was learnt afresh

	pending              []PeriodStat
	carryThr, carryStall int64
	scratch              []PeriodStat

	// The last boundary and the usage taken there: the next period
	// starts with it.
	lastEnd, lastEndUsage int64
	haveEnd               bool
}

// trackerRing is how many samples a tracker keeps: two periods and a
// half at ten samples per period, the span a pending period needs.
const trackerRing = 40

// maxGap is the longest interval, in periods, that is split into periods
// (which are skipped anyway): more only costs.
const maxGap = 4

// NewPeriodTracker returns a tracker for a group with the given limits;
// cpus bounds the CPUs it runs on (0: no bound).
func NewPeriodTracker(lim Limits, cpus int) *PeriodTracker {
	return &PeriodTracker{period: max(int64(lim.Period), 1), quota: int64(lim.Quota), cpus: cpus, ring: make([]trace.CounterSample, trackerRing)}
}

// Reset forgets the samples and the grid (the group was recreated, or
// its period changed); pending periods are handed out first.
func (t *PeriodTracker) Reset(emit func(PeriodStat)) {
	t.Flush(emit)
	t.n, t.head, t.havePhase, t.misses, t.confirms, t.haveEnd, t.debt = 0, 0, false, 0, 0, false, 0
}

// Flush hands out the pending periods.
func (t *PeriodTracker) Flush(emit func(PeriodStat)) {
	t.emitPending(emit)
	t.pending = t.pending[:0]
	t.carryThr, t.carryStall = 0, 0
}

func (t *PeriodTracker) emitPending(emit func(PeriodStat)) {
	for _, p := range t.pending {
		p = t.finish(p)
		if !p.skip {
			emit(p)
		}
	}
}

// Add takes the next sample and hands the periods it completes to emit.
func (t *PeriodTracker) Add(b trace.CounterSample, emit func(PeriodStat)) {
	if t.n == 0 {
		t.push(b)
		return
	}
	a := t.at(t.n - 1)
	if b.T <= a.T {
		return
	}
	if b.NrPeriods < a.NrPeriods || b.NrThrottled < a.NrThrottled || b.UsageNs < a.UsageNs || b.ThrottledNs < a.ThrottledNs {
		// Counters went back: another group under the same path.
		t.Reset(emit)
		t.push(b)
		return
	}
	t.push(b)
	dp := b.NrPeriods - a.NrPeriods
	dthr := b.NrThrottled - a.NrThrottled + t.carryThr
	dtt := b.ThrottledNs - a.ThrottledNs + t.carryStall
	t.carryThr, t.carryStall = 0, 0

	if dp == 1 && b.T-a.T < t.period/2 {
		t.learn(a.T, b.T)
	}
	if dp == 0 {
		if len(t.pending) == 0 {
			t.carryThr, t.carryStall = dthr, dtt
			return
		}
		t.carryThr = markLatest(t.pending, dthr)
		t.pending[len(t.pending)-1].ThrottledNs += dtt
		if b.T-t.pending[len(t.pending)-1].EndNs > 2*t.period {
			t.Flush(emit) // idle: nothing more will come for them
		}
		return
	}
	if b.T-a.T > maxGap*t.period {
		t.Flush(emit)
		return
	}

	// The boundary: on the grid, within (a, b] where the counters say it
	// is; b without a grid yet.
	end, onGrid := b.T, false
	if t.havePhase {
		ph := mod(t.phase.lo+t.phase.w/2, t.period)
		g := ph + int64(math.Floor(float64(b.T-ph)/float64(t.period)))*t.period
		end = min(max(g, a.T+1), b.T)
		onGrid = end == g
	}
	fineAB := b.T-a.T <= t.period/2
	// Usage at the last boundary: interpolated, unless the group was
	// throttled there and already stood still before a: then it stood
	// still from a to the boundary, and all it used in (a, b] came after.
	uEnd := t.usageAt(end)
	if dp == 1 && dthr > 0 && fineAB && t.n >= 3 {
		if ap := t.at(t.n - 3); ap.UsageNs == a.UsageNs && a.T-ap.T <= t.period/2 {
			uEnd = a.UsageNs
		}
	}
	n := int(dp)
	ps := t.scratch[:0]
	for j := 0; j < n; j++ {
		e := end - int64(n-1-j)*t.period
		s := e - t.period
		ue, us := t.usageAt(e), t.usageAt(s)
		if j == n-1 {
			ue = uEnd
		}
		if t.haveEnd && s == t.lastEnd {
			us = t.lastEndUsage // the previous period's end, as it was taken
		}
		// The true end is in (a, b], and within the grid's arc of
		// uncertainty around e; the true start a period before.
		hi := b.T - int64(n-1-j)*t.period
		lo := a.T - int64(n-j)*t.period
		if onGrid {
			hw := t.phase.w/2 + 1
			hi, lo = min(hi, e+hw), max(lo, s-hw)
		}
		_, uHi := t.usageBounds(hi)
		uLo, _ := t.usageBounds(lo)
		p := PeriodStat{EndNs: e, UsageNs: max(ue-us, 0), UsageMaxNs: max(uHi-uLo, 0), stopNs: t.stopped(s, e)}
		// Only periods seen closely at both ends count; those whose
		// start came before the readings, or that fell in a long gap
		// (the sampler starved, the group woke up), are skipped.
		p.skip = !fineAB || lo < t.at(0).T || !t.fine(s)
		ps = append(ps, p)
	}
	t.lastEnd, t.lastEndUsage, t.haveEnd = end, uEnd, true
	dt := int(min(dthr, dp))
	if dt > 0 {
		// Mark the dt periods that used the most CPU (the latest of equals).
		first := -1
		for k := 0; k < dt; k++ {
			best := -1
			for j := n - 1; j >= 0; j-- {
				if !ps[j].Throttled && (best < 0 || ps[j].UsageNs > ps[best].UsageNs) {
					best = j
				}
			}
			ps[best].Throttled = true
			ps[best].ThrottledNs = dtt / int64(dt)
			if first < 0 {
				first = best
			}
		}
		ps[first].ThrottledNs += dtt - dtt/int64(dt)*int64(dt)
	} else if dtt > 0 {
		ps[n-1].ThrottledNs = dtt
	}
	// More throttled periods than boundaries: the rest were earlier.
	t.carryThr = markLatest(t.pending, dthr-int64(dt))
	t.emitPending(emit)
	t.pending = append(t.pending[:0], ps...)
	t.scratch = ps
}

// finish works out a period's stall: its throttled time divided by the
// CPUs its run queues stood still on. Those are the throttled time
// divided by how long the group stood still, from when it stopped (the
// middle of the last reading interval in which its usage grew) to the
// period's end, rounded, at least 1, at most the node's CPUs. (Usage is
// accounted in scheduler ticks, so the usage rate over one interval is
// too coarse to count CPUs by; the throttled time is exact.)
func (t *PeriodTracker) finish(p PeriodStat) PeriodStat {
	// What the group overran its quota by in earlier periods, it pays
	// back first: the kernel covers a run queue's deficit from the next
	// refill, so it stays throttled without running.
	if t.quota > 0 {
		p.DebtNs = t.debt
		t.debt = max(t.debt+p.UsageNs-t.quota, 0)
	}
	if !p.Throttled {
		p.StallNs, p.RunningCPUs = 0, 0
		return p
	}
	c := 1
	if still := p.EndNs - p.stopNs; still > 0 {
		c = max(int(math.Round(float64(p.ThrottledNs)/float64(still))), 1)
	}
	if t.cpus > 0 {
		c = min(c, t.cpus)
	}
	p.RunningCPUs = c
	p.StallNs = min(p.ThrottledNs/int64(c), t.period)
	return p
}

// stopped estimates when the group stopped running in the period (s, e]:
// the middle of the last reading interval within it in which its usage
// grew; s when it grew in none.
func (t *PeriodTracker) stopped(s, e int64) int64 {
	for i := t.n - 1; i >= 1; i-- {
		a, b := t.at(i-1), t.at(i)
		if b.T > e {
			continue
		}
		if a.T < s {
			break
		}
		if b.UsageNs > a.UsageNs {
			return a.T + (b.T-a.T)/2
		}
	}
	return s
}

// arc is the stretch (lo, lo+w] of the circle of one period's length.
type arc struct{ lo, w int64 }

// phaseSlack widens each interval that saw a boundary, for the time
// between taking a sample's time and the kernel reading its counters.
const phaseSlack = 200 * int64(time.Microsecond)

// learn narrows the grid's phase with an interval (lo, hi] that saw one
// boundary. An interval that disagrees is taken for a reading stamped
// late, unless the next one disagrees too: then the grid moved (the
// period was set again) and the phase is learnt afresh.
func (t *PeriodTracker) learn(lo, hi int64) {
	a := arc{mod(lo-phaseSlack, t.period), hi - lo + 2*phaseSlack}
	if a.w >= t.period {
		return
	}
	if !t.havePhase {
		t.phase, t.havePhase, t.misses, t.confirms = a, true, 0, 0
		return
	}
	if x, ok := intersect(t.phase, a, t.period); ok {
		t.phase, t.misses = x, 0
		t.confirms++
		return
	}
	t.misses++
	if t.misses >= 2 {
		t.phase, t.misses, t.confirms = a, 0, 0
	}
}

// Grid says where the kernel's period boundaries are, once the readings
// have pinned them down (to within gridPinned, confirmed three times):
// at phase + k*period, give or take half. A miss unpins it.
func (t *PeriodTracker) Grid() (phase, half int64, ok bool) {
	if !t.havePhase || t.misses > 0 || t.confirms < 3 || t.phase.w > gridPinned {
		return 0, 0, false
	}
	return mod(t.phase.lo+t.phase.w/2, t.period), t.phase.w/2 + 1, true
}

// gridPinned is how narrowly the grid must be known for the Sampler to
// read a group around its boundaries only.
const gridPinned = 2 * int64(time.Millisecond)

// intersect intersects two arcs shorter than half the circle p.
func intersect(x, y arc, p int64) (arc, bool) {
	if d := mod(y.lo-x.lo, p); d < x.w {
		return arc{y.lo, min(x.w-d, y.w)}, true
	}
	if d := mod(x.lo-y.lo, p); d < y.w {
		return arc{x.lo, min(y.w-d, x.w)}, true
	}
	return arc{}, false
}

func (t *PeriodTracker) push(s trace.CounterSample) {
	if t.n < len(t.ring) {
		t.ring[(t.head+t.n)%len(t.ring)] = s
		t.n++
		return
	}
	t.ring[t.head] = s
	t.head = (t.head + 1) % len(t.ring)
}

// at is the i-th kept sample, oldest first.
func (t *PeriodTracker) at(i int) trace.CounterSample { return t.ring[(t.head+i)%len(t.ring)] }

// fine reports whether the readings around x are at most half a period
// apart.
func (t *PeriodTracker) fine(x int64) bool {
	for i := t.n - 1; i >= 1; i-- {
		if a := t.at(i - 1); a.T <= x {
			return x <= t.at(i).T && t.at(i).T-a.T <= t.period/2
		}
	}
	return false
}

// usageBounds bounds the usage counter at x by the readings around it
// and by the most the group can use in between: t.cpus CPUs.
func (t *PeriodTracker) usageBounds(x int64) (lo, hi int64) {
	if x <= t.at(0).T {
		return t.at(0).UsageNs, t.at(0).UsageNs
	}
	for i := t.n - 1; i >= 1; i-- {
		a := t.at(i - 1)
		if a.T > x {
			continue
		}
		b := t.at(i)
		lo, hi = a.UsageNs, b.UsageNs
		if x >= b.T {
			return hi, hi
		}
		if t.cpus > 0 {
			hi = min(hi, a.UsageNs+int64(t.cpus)*(x-a.T))
			lo = max(lo, b.UsageNs-int64(t.cpus)*(b.T-x))
		}
		return lo, hi
	}
	return t.at(0).UsageNs, t.at(0).UsageNs
}

// usageAt interpolates the usage counter at time x between the kept
// samples (the first or last one's outside them).
func (t *PeriodTracker) usageAt(x int64) int64 {
	for i := t.n - 1; i >= 1; i-- {
		a := t.at(i - 1)
		if a.T > x {
			continue
		}
		b := t.at(i)
		if x >= b.T || b.T == a.T {
			return b.UsageNs
		}
		f := float64(x-a.T) / float64(b.T-a.T)
		return a.UsageNs + int64(f*float64(b.UsageNs-a.UsageNs))
	}
	return t.at(0).UsageNs
}

// markLatest marks up to n of the latest unthrottled periods throttled and
// returns how many it could not mark.
func markLatest(ps []PeriodStat, n int64) int64 {
	for j := len(ps) - 1; j >= 0 && n > 0; j-- {
		if !ps[j].Throttled {
			ps[j].Throttled = true
			n--
		}
	}
	return n
}

// mod is x modulo m in [0, m).
func mod(x, m int64) int64 {
	r := x % m
	if r < 0 {
		r += m
	}
	return r
}

// Histogram counts observations in buckets with the upper bounds Bounds
// (the last bucket, +Inf, is implied).
type Histogram struct {
	Bounds []float64 // shared, not copied
	Counts []uint64  // per bucket, not cumulative: len(Bounds)+1
	Sum    float64
	Count  uint64
}

func newHistogram(bounds []float64) Histogram {
	return Histogram{Bounds: bounds, Counts: make([]uint64, len(bounds)+1)}
}

// Observe counts v.
func (h *Histogram) Observe(v float64) {
	i := 0
	for i < len(h.Bounds) && v > h.Bounds[i] {
		i++
	}
	h.Counts[i]++
	h.Sum += v
	h.Count++
}

func (h Histogram) clone() Histogram {
	h.Counts = append([]uint64(nil), h.Counts...)
	return h
}

// PeriodHistograms are the per-period figures of a group.
type PeriodHistograms struct {
	Usage      Histogram // usage per period as a fraction of the quota
	Stall      Histogram // stall per throttled period, in seconds
	UnderQuota uint64    // throttled periods with usage under UnderQuotaRatio of the quota
}

// Observe counts one period of a group with the given quota.
func (h *PeriodHistograms) Observe(p PeriodStat, quota time.Duration) {
	h.Usage.Observe(p.UsageRatio(quota))
	if p.Throttled {
		h.Stall.Observe(time.Duration(p.StallNs).Seconds())
		if p.UnderQuota(quota) {
			h.UnderQuota++
		}
	}
}

// GroupPeriods are a followed group's per-period figures.
type GroupPeriods struct {
	Path string
	PeriodHistograms
}

// SamplerOptions configure a Sampler.
type SamplerOptions struct {
	MaxGroups    int       // most groups followed, the first ones Follow is given; 0 or less: none
	CPUs         int       // online CPUs: bounds the CPUs a group runs on (0: no bound)
	UsageBuckets []float64 // upper bounds of the usage ratio histogram's buckets
	StallBuckets []float64 // upper bounds of the stall histogram's buckets, in seconds
	Errors       *ReadErrors
}

// Sampler follows groups with a quota at period resolution: it reads
// their counters at period resolution (see Run) and feeds each group's
// periods (PeriodTracker) into its histograms. A group for which the
// kernel counted no period for more than a period is quiet: its cpu.stat
// alone is read, once per period and less and less often down to once a
// second, until a period is counted again; the periods until then are
// not attributed. Run does the reading; Follow says which groups to
// follow; Snapshot copies the histograms.
type Sampler struct {
	opts SamplerOptions

	mu     sync.Mutex
	groups []*sampled
	byPath map[string]*sampled
	wake   chan struct{}

	overruns atomic.Uint64
	buf      [statBufSize]byte // the loop's
}

type sampled struct {
	target    Target
	files     counters
	tracker   *PeriodTracker
	hist      PeriodHistograms
	due       int64 // the next reading (not focused), ns on the sampler's clock
	last      cgroup.Stat
	haveLast  bool
	changed   int64 // when nr_periods last moved
	idle      bool  // quiet: no period counted lately
	idleWait  int64 // between readings while quiet
	throttled int64 // when nr_throttled last moved

	// Focus (see Run): the grid is pinned, the next boundary is b give
	// or take half, and the next reading is stage's; reading is the
	// stage of the reading under way (-1: not a focused one).
	pinned  bool
	b, half int64
	stage   int
	reading int
}

// NewSampler returns a Sampler that follows nothing yet.
func NewSampler(opts SamplerOptions) *Sampler {
	if opts.Errors == nil {
		opts.Errors = NewReadErrors()
	}
	return &Sampler{opts: opts, byPath: map[string]*sampled{}, wake: make(chan struct{}, 1)}
}

// Follow makes the Sampler follow the first MaxGroups of the targets
// that have a quota, in their order; others are let go. A group already
// followed keeps its histograms (the tracker starts afresh if its period
// or quota changed). Files that cannot be opened are counted as read
// errors.
func (s *Sampler) Follow(targets []Target) {
	s.mu.Lock()
	defer s.mu.Unlock()
	groups := make([]*sampled, 0, min(len(targets), max(s.opts.MaxGroups, 0)))
	byPath := make(map[string]*sampled, cap(groups))
	for _, t := range targets {
		if len(groups) >= s.opts.MaxGroups {
			break
		}
		if t.Limits.Unlimited() || t.Limits.Period <= 0 {
			continue
		}
		if g := s.byPath[t.Group.Path]; g != nil && g.target.Group.CPUDir == t.Group.CPUDir && g.target.Group.AcctDir == t.Group.AcctDir {
			if g.target.Limits != t.Limits {
				g.tracker, g.pinned = NewPeriodTracker(t.Limits, s.opts.CPUs), false
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
			tracker: NewPeriodTracker(t.Limits, s.opts.CPUs),
			hist: PeriodHistograms{
				Usage: newHistogram(s.opts.UsageBuckets),
				Stall: newHistogram(s.opts.StallBuckets),
			},
		}
		groups = append(groups, g)
		byPath[t.Group.Path] = g
	}
	for _, g := range s.byPath {
		g.files.close()
	}
	s.groups, s.byPath = groups, byPath
	select {
	case s.wake <- struct{}{}:
	default:
	}
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
func (s *Sampler) Snapshot(dst []GroupPeriods) []GroupPeriods {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, g := range s.groups {
		dst = append(dst, GroupPeriods{Path: g.target.Group.Path, PeriodHistograms: PeriodHistograms{
			Usage: g.hist.Usage.clone(), Stall: g.hist.Stall.clone(), UnderQuota: g.hist.UnderQuota,
		}})
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
//   - a group whose boundaries are pinned (PeriodTracker.Grid): in the
//     last pass before each boundary and the first after it, and, when
//     the group was throttled lately, in the first pass after half-way:
//     two or three readings per period instead of ten (focus);
//   - a quiet group (no period counted lately): once a period, then less
//     and less often, down to once a second.
//
// Waking up costs more than a read, so all groups share the passes.
func (s *Sampler) Run(ctx context.Context) {
	// A thread of its own: the runtime then wakes that thread directly
	// instead of handing the goroutine between threads (a fifth less
	// CPU, measured).
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	defer s.close()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	gap := int64(100 * time.Millisecond)
	for {
		started := clock()
		next, interval := s.pass(started, gap)
		planned := next
		if interval > 0 {
			gap = int64(float64(interval) * (0.8 + 0.4*rand.Float64()))
			planned = min(next, started+gap)
		}
		planned = max(planned, started+int64(minPassGap))
		timer.Reset(time.Duration(planned - clock()))
		select {
		case <-ctx.Done():
			return
		case <-s.wake:
			continue // new groups: read them now
		case <-timer.C:
		}
		if interval > 0 && clock()-planned > interval {
			s.overruns.Add(1)
		}
	}
}

const (
	minPassGap  = 500 * time.Microsecond // between two passes
	maxIdleWait = time.Second            // between two readings of a quiet group
)

// pass reads the groups that want a reading at now, the next pass being
// about gap later. It returns when the next quiet group is due, and the
// interval of the passes the others need (0 when all are quiet).
func (s *Sampler) pass(now, gap int64) (next, interval int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	next = now + int64(maxIdleWait)
	kept := s.groups[:0]
	for _, g := range s.groups {
		if g.wants(now, gap) {
			if err := s.sample(g); err != nil && IsGone(err) {
				g.files.close()
				delete(s.byPath, g.target.Group.Path)
				continue
			}
		}
		if g.idle {
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
	return next, interval
}

// wants says whether a pass at now, with the next one about gap later
// (give or take a fifth), reads the group, and marks which reading it is.
func (g *sampled) wants(now, gap int64) bool {
	period := int64(g.target.Limits.Period)
	g.reading = -1
	switch {
	case g.idle || !g.haveLast:
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
		if now > g.b+g.half {
			g.reading = stagePost
			return true
		}
	}
	return false
}

// The readings of a focused group around its next boundary b.
const (
	stagePost = iota // the first pass after b
	stageMid         // the first pass after half-way to b
	stagePre         // the last pass before b
)

// sample reads one group and feeds its tracker.
func (s *Sampler) sample(g *sampled) error {
	period := int64(g.target.Limits.Period)
	if g.idle {
		// Quiet: watch nr_periods alone (cpu.stat, one read).
		t := clock()
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
	if g.reading == stageMid && g.files.version == 1 && g.haveLast {
		// Half-way between boundaries cpu.stat has nothing new: nr_periods
		// and nr_throttled move at boundaries, throttled time when the
		// group is let go at one. The usage alone, one read.
		t0 := clock()
		st = g.last
		st.UsageNs, err = g.files.readUsage(s.buf[:])
		t, file = t0+(clock()-t0)/2, "cpuacct.usage"
	} else {
		st, t, file, err = s.readStamped(g)
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
	g.last, g.haveLast = st, true
	if moved {
		g.changed = t
	}
	if g.idle && !moved {
		g.idleFor(t, period)
		return nil
	}
	quota := g.target.Limits.Quota
	emit := func(p PeriodStat) { g.hist.Observe(p, quota) }
	g.tracker.Add(trace.CounterSample{
		T: t, UsageNs: st.UsageNs, NrPeriods: st.NrPeriods, NrThrottled: st.NrThrottled,
		ThrottledNs: st.ThrottledNs, NrBursts: st.NrBursts, BurstNs: st.BurstNs,
	}, emit)
	// Quiet once no period was counted for a period and two readings.
	if t-g.changed > period+period/5 {
		g.tracker.Flush(emit)
		g.idle, g.idleWait, g.pinned = true, 0, false
		g.idleFor(t, period)
		return nil
	}
	g.idle = false
	g.due = t + period/10
	g.focus(t, period)
	return nil
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
		if t-g.throttled < 2*period && t < g.b-period/2 {
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
// period was counted at t: a period later at first, twice as long each
// time after, up to maxIdleWait (but never less than a period).
func (g *sampled) idleFor(t, period int64) {
	g.idleWait = max(period, min(2*g.idleWait, int64(maxIdleWait)))
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
		t0 := clock()
		st, file, err = g.files.read(s.buf[:])
		t1 := clock()
		if err != nil || t1-t0 <= maxReadSpan || try == 2 {
			return st, t0 + (t1-t0)/2, file, err
		}
	}
}

// samplerEpoch is the origin of the samples' clock (monotonic).
var samplerEpoch = time.Now()

// clock is the samples' clock: ns since samplerEpoch.
func clock() int64 { return int64(time.Since(samplerEpoch)) }

func (s *Sampler) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, g := range s.groups {
		g.files.close()
	}
	s.groups, s.byPath = nil, map[string]*sampled{}
}
