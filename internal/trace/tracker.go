package trace

import (
	"cmp"
	"math"
	"slices"
	"time"

	"github.com/cfsprobe/cfsprobe/internal/cgroup"
)

// CounterSample is one reading of a group's counters, T in ns on the
// reader's monotonic clock (the lab: since the start of the run),
// durations in ns.
type CounterSample struct {
	T           int64 `json:"t"`
	UsageNs     int64 `json:"usage_ns"`
	NrPeriods   int64 `json:"nr_periods"`
	NrThrottled int64 `json:"nr_throttled"`
	ThrottledNs int64 `json:"throttled_ns"`
	NrBursts    int64 `json:"nr_bursts"`
	BurstNs     int64 `json:"burst_ns"`
}

// SampleOf is the reading st of a group's counters taken at t.
func SampleOf(t int64, st cgroup.Stat) CounterSample {
	return CounterSample{
		T: t, UsageNs: st.UsageNs, NrPeriods: st.NrPeriods, NrThrottled: st.NrThrottled,
		ThrottledNs: st.ThrottledNs, NrBursts: st.NrBursts, BurstNs: st.BurstNs,
	}
}

// TrackerConfig says what a Tracker needs to know of a group.
type TrackerConfig struct {
	Period time.Duration // the enforcement period (> 0)
	Quota  time.Duration // CPU time per period; 0: unlimited (no debt is kept)
	// CPUs bounds the CPUs the group runs on (the node's online CPUs);
	// 0: no bound.
	CPUs int
	// FromStart: the group ran nothing before the first sample (the lab
	// made it and started the workload after reading it), so a period
	// that began before the first sample is seen in full.
	FromStart bool
	// Keep is how many samples the tracker keeps (at least trackerRing):
	// a streaming tracker needs two periods and a half of them; one fed a
	// whole run at once (BuildTimeline) may keep them all.
	Keep int
}

// Tracker turns a group's counter samples, as they come, into its
// enforcement periods. It is cfsprobe's one definition of a period (the
// lab's timeline, the monitor's per-period figures, record and the
// simulator all go through it; docs/trace.md):
//
//   - A period ends where nr_periods moves; the boundary lies on the grid
//     of the kernel's period timer, whose phase is learnt from the
//     sampling intervals that saw exactly one boundary (each says the
//     grid passes through it; their intersection narrows it down). Before
//     the grid is known, the boundary is taken at the sample that saw it.
//   - Usage is the usage counter at the period's end less that at its
//     start (the previous period's end), interpolated between readings,
//     except at the end of a throttled period that the throttled time
//     says stood still since before the last reading: there it is that
//     reading's (also when the throttled time comes a reading late:
//     lateStill; a usage flat over the two readings before the boundary
//     says so only when no throttled time came to say otherwise).
//   - A stall booked at a refill one or more periods after the one it
//     began in (the group stayed throttled through refills its debt ate)
//     is shared out over those periods, which wait for it (splitStall).
//   - nr_throttled's increase over an interval marks as many of the
//     periods that ended in it throttled (those that used the most CPU),
//     and the throttled time's and burst time's increases go to them.
//     Counts that arrive a reading late (cpu.stat is read without the
//     kernel's lock) go to the latest period.
//   - A throttled period's stall and stopped CPUs, and every period's
//     debt, are worked out when it is handed out (see finish).
//
// A period is handed out once the next boundary is seen (its counts can
// no longer change; a throttled one whose throttled time has not come
// once the stall's is booked, at most maxStillPeriods later), when the
// group falls idle, or at Flush. Every period
// the kernel counted between the first and the last sample is handed out;
// those the readings did not see closely (an end in an interval longer
// than half a period, a start before the first sample) are Blurred.
type Tracker struct {
	period int64
	quota  int64 // 0: none
	cpus   int
	start  bool // FromStart
	debt   int64
	ring   []CounterSample // the latest samples, oldest first from head
	head   int
	n      int

	phase     arc // where the grid is, modulo the period
	havePhase bool
	misses    int   // intervals in a row that disagreed with phase
	confirms  int   // intervals that agree with phase
	arcs      []arc // the latest intervals that saw one boundary (learn)
	arcNext   int
	edges     []edge
	stretches []stretch

	pending                          []Period
	carryThr, carryStall, carryBurst int64
	scratch                          []Period

	// The last boundary and the usage taken there: the next period
	// starts with it.
	lastEnd, lastEndUsage int64
	haveEnd               bool
	lastEndPlaced         bool // the last boundary was placed to within endFine
	awaitThr              bool // the last boundary's throttled period has no throttled time yet
}

// endFine is how closely a boundary must be placed for its periods to be
// seen closely: on a grid known to within it either way, or between
// readings that close. Before the grid is learnt, a boundary is placed at
// the reading that saw it, which may be a sampling interval late.
const endFine = int64(time.Millisecond)

// trackerRing is how many samples a streaming tracker keeps: two periods
// and a half at ten samples per period, the span a pending period needs.
const trackerRing = 40

// NewTracker returns a tracker for a group configured as c.
func NewTracker(c TrackerConfig) *Tracker {
	return &Tracker{
		period: max(int64(c.Period), 1), quota: max(int64(c.Quota), 0), cpus: c.CPUs, start: c.FromStart,
		ring: make([]CounterSample, max(c.Keep, trackerRing)),
	}
}

// Reset forgets the samples and the grid (the group was recreated, or its
// period changed); pending periods are handed out first.
func (t *Tracker) Reset(emit func(Period)) {
	t.Flush(emit)
	t.n, t.head, t.havePhase, t.misses, t.confirms, t.haveEnd, t.debt, t.start = 0, 0, false, 0, 0, false, 0, false
	t.awaitThr = false
	t.arcs, t.arcNext, t.edges = t.arcs[:0], 0, t.edges[:0]
	t.carryThr, t.carryStall, t.carryBurst = 0, 0, 0
}

// Flush hands out the pending periods. Counts that came for no period
// yet are kept for the next one.
func (t *Tracker) Flush(emit func(Period)) {
	t.emit(t.pending, emit)
	t.pending = t.pending[:0]
}

// emit hands out ps, each finished.
func (t *Tracker) emit(ps []Period, emit func(Period)) {
	for _, p := range ps {
		emit(t.finish(p))
	}
}

// Add takes the next sample and hands the periods it completes to emit.
// A sample no later than the previous one is ignored; counters that went
// back (another group under the same path) start the tracker afresh.
func (t *Tracker) Add(b CounterSample, emit func(Period)) {
	if t.n == 0 {
		t.push(b)
		return
	}
	a := t.at(t.n - 1)
	if b.T <= a.T {
		if b == (CounterSample{T: b.T, UsageNs: a.UsageNs, NrPeriods: a.NrPeriods, NrThrottled: a.NrThrottled, ThrottledNs: a.ThrottledNs, NrBursts: a.NrBursts, BurstNs: a.BurstNs}) {
			return // nothing new
		}
		b.T = a.T + 1 // stamped with the same instant: keep the order
	}
	if b.NrPeriods < a.NrPeriods || b.NrThrottled < a.NrThrottled || b.UsageNs < a.UsageNs || b.ThrottledNs < a.ThrottledNs || b.BurstNs < a.BurstNs {
		t.Reset(emit)
		t.push(b)
		return
	}
	t.push(b)
	dp := b.NrPeriods - a.NrPeriods
	dthr := b.NrThrottled - a.NrThrottled + t.carryThr
	dtt := b.ThrottledNs - a.ThrottledNs + t.carryStall
	dbt := b.BurstNs - a.BurstNs + t.carryBurst
	t.carryThr, t.carryStall, t.carryBurst = 0, 0, 0

	if dp == 1 {
		t.learn(a.T, b.T)
	}
	if dp == 0 {
		if len(t.pending) == 0 {
			t.carryThr, t.carryStall, t.carryBurst = dthr, dtt, dbt
			return
		}
		last := &t.pending[len(t.pending)-1]
		t.carryThr = markLatest(t.pending, dthr)
		last.ThrottledNs += dtt
		last.BurstNs += dbt
		if t.awaitThr && dtt > 0 && !t.splitStall(t.pending) && last.Throttled && last.EndNs == t.lastEnd {
			t.lateStill(last)
		}
		// Throttled at the last boundary, as nr_throttled said a reading
		// late, and no throttled time yet: awaited as at the boundary.
		lateThr := dthr > 0 && last.Throttled && last.EndNs == t.lastEnd
		t.awaitThr = (t.awaitThr || lateThr) && last.ThrottledNs == 0
		if b.T-last.EndNs > 2*t.period {
			t.Flush(emit) // idle: nothing more will come for them
		}
		return
	}

	// The boundary: on the grid, within (a, b] where the counters say it
	// is; b without a grid yet.
	end, onGrid := b.T, false
	if t.havePhase {
		g := t.gridAtOrBefore(b.T)
		end = min(max(g, a.T+1), b.T)
		onGrid = end == g
	}
	fineAB := b.T-a.T <= t.period/2
	placed := onGrid && t.phase.w <= 2*endFine || b.T-a.T <= endFine
	// Usage at the last boundary: interpolated, unless the period that
	// ended there was throttled and stood still since before a: then
	// nothing ran from a to the boundary, and all the group used in
	// (a, b] came after it. It stood still at a when the throttled time
	// says it stood still for longer than from a to the boundary: dtt
	// divided by the CPUs it stood still on, which are about (usage +
	// dtt) / period (see finish), counted high; or, with no throttled
	// time yet to say, when its usage did not grow from the reading
	// before a (in the same period). A group that slept until after a
	// and then ran into the throttle shows the same flat usage, and its
	// short stall tells it apart.
	uEnd := t.usageAt(end)
	if dp == 1 && dthr > 0 {
		us, _ := t.startUsage(end - t.period)
		still := t.stillSince(uEnd-us, dtt, end-a.T)
		if t.n >= 3 {
			ap := t.at(t.n - 3)
			still = still || dtt == 0 && ap.UsageNs == a.UsageNs && a.T-ap.T < t.period/2 && ap.NrPeriods == a.NrPeriods
		}
		if still {
			uEnd = a.UsageNs
		}
	}
	n := int(dp)
	ps := t.scratch[:0]
	for j := 0; j < n; j++ {
		e := end - int64(n-1-j)*t.period
		s := e - t.period
		ue := t.usageAt(e)
		if j == n-1 {
			ue = uEnd
		}
		us, prevEnd := t.startUsage(s)
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
		eLo, eHi := t.usageBounds(e)
		p := Period{StartNs: s, EndNs: e, Kernel: true, UsageNs: max(ue-us, 0), UsageMaxNs: max(uHi-uLo, ue-us, 0), EndBusy: eHi > eLo, stop: t.stopped(s, e, us)}
		// Seen closely: both ends placed to within endFine (on the
		// learnt grid, or between readings that close), in readings at
		// most half a period apart (not a starved sampler, not a group
		// waking from idle), and the start after the first reading,
		// unless the group ran nothing before it.
		startPlaced := !prevEnd || t.lastEndPlaced
		before := lo < t.at(0).T && !t.start
		p.Blurred = !fineAB || !placed || !startPlaced || before || (s >= t.at(0).T && !t.fine(s))
		ps = append(ps, p)
	}
	t.lastEnd, t.lastEndUsage, t.haveEnd, t.lastEndPlaced = end, uEnd, true, placed
	// Throttled at the boundary with no throttled time yet: it comes a
	// reading late (lateStill), or at the refill that lets the group go
	// (splitStall).
	awaiting := t.awaitThr
	t.awaitThr = dp == 1 && dthr > 0 && dtt == 0
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
		// Stall time without a throttled period (the kernel accounts
		// them apart): keep it on the last period.
		ps[n-1].ThrottledNs = dtt
	}
	ps[n-1].BurstNs = dbt
	// More throttled periods than boundaries: the rest were earlier.
	t.carryThr = markLatest(t.pending, dthr-int64(dt))
	held := len(t.pending)
	t.pending = append(t.pending, ps...)
	t.scratch = ps
	if awaiting && dp == 1 {
		if t.awaitThr && held < maxStillPeriods {
			// Still throttled through this period, nothing booked yet:
			// the periods wait for the stall's throttled time.
			return
		}
		if dtt > 0 {
			t.splitStall(t.pending)
		}
	}
	t.emit(t.pending[:held], emit)
	t.pending = append(t.pending[:0], t.pending[held:]...)
}

// maxStillPeriods is how many periods a tracker holds back while a
// throttled group stays throttled through their refills with no
// throttled time booked (splitStall).
const maxStillPeriods = 8

// splitStall shares out throttled time that the last of ps got and that
// began in earlier periods of ps: those throttled with none of their own
// yet, the group stopped in the first of them and still stopped at
// their ends. The kernel books a run queue's throttled time when it is
// let go, at a refill that covers its deficit: a group that overran its
// quota into debt (a CPU-bound thread is charged at the tick) stays
// throttled through one or more refills that the debt eats, and all of
// its stall comes at once, after the period it began in was over. Each
// later period stood still all along, on the CPUs the stall was on (the
// throttled time over its span bounds them, from where the first
// period's usage last grew, or from anywhere in that period when the
// readings do not say: stoppedCPUs), and ran nothing: its throttled time
// is that much, the rest is the first period's, and the usage that the
// boundaries' readings gave the later ones ran in the first, before it
// stopped. It reports whether it moved any; without such periods, or
// when the last one can hold all the throttled time, it changes nothing.
func (t *Tracker) splitStall(ps []Period) bool {
	n := len(ps)
	first := n - 1
	for first > 0 && ps[first-1].Throttled && ps[first-1].ThrottledNs == 0 {
		first--
	}
	if first == n-1 {
		return false
	}
	p := &ps[first]
	end := ps[n-1].EndNs
	// The group stopped in (x, y]: where the first period's usage last
	// grew, or, when the readings do not say, anywhere in that period.
	x, y := p.StartNs, p.EndNs
	if p.stop.y > p.stop.x {
		x, y = p.stop.x, p.stop.y
	}
	thr := ps[n-1].ThrottledNs
	if thr <= 0 || end <= y {
		return false
	}
	var used int64
	for _, q := range ps[first:] {
		used += q.UsageNs
	}
	c := t.stoppedCPUs(float64(thr)/float64(end-x), float64(thr)/float64(end-y), float64(used+thr)/float64(end-p.StartNs))
	hold := func(q Period) int64 {
		if !q.Throttled {
			return 0
		}
		return int64(c) * int64(q.Length())
	}
	if thr <= hold(ps[n-1]) {
		return false
	}
	rem := thr
	for j := n - 1; j > first; j-- {
		q := &ps[j]
		h := hold(*q)
		q.ThrottledNs = min(rem, h)
		rem -= q.ThrottledNs
		if h > 0 && q.ThrottledNs == h {
			p.UsageNs += q.UsageNs
			q.UsageNs = 0
		}
	}
	p.ThrottledNs += rem
	p.UsageMaxNs = max(p.UsageMaxNs, p.UsageNs)
	return true
}

// stillSince says whether a throttled period that used usage and has
// the throttled time thr (summed over CPUs) stood still for longer than
// d before its end: thr divided by the CPUs it stood still on, which are
// about (usage + thr) / period, counted high (at least 1, at most the
// node's).
func (t *Tracker) stillSince(usage, thr, d int64) bool {
	c := max(math.Round(float64(usage+thr)/float64(t.period)), 1)
	if t.cpus > 0 {
		c = min(c, float64(t.cpus))
	}
	return thr > 0 && float64(thr)/c > float64(d)
}

// lateStill revisits the usage at the last boundary, that of p, when p's
// throttled time came in the first reading after the boundary that had
// any (the boundary's reading counted p throttled and had none; cpu.stat is read
// without the kernel's lock; a throttled run queue on another CPU adds
// its throttled time when it is let go, a moment after the period timer
// counted the period): if p stood still since before the last reading
// before its end, nothing ran from that reading to the boundary, and the
// usage interpolated there belongs to the next period.
func (t *Tracker) lateStill(p *Period) {
	for i := t.n - 1; i >= 0; i-- {
		a := t.at(i)
		if a.T >= p.EndNs {
			continue
		}
		if a.T <= p.StartNs || !t.stillSince(p.UsageNs, p.ThrottledNs, p.EndNs-a.T) {
			return
		}
		if d := t.lastEndUsage - a.UsageNs; d > 0 {
			p.UsageNs = max(p.UsageNs-d, 0)
			t.lastEndUsage = a.UsageNs
		}
		return
	}
}

// startUsage is the usage counter at s, the start of a period: the
// previous period's end as it was taken, when s is that boundary (the
// grid may have been placed a little differently since, learnt more
// finely, but it is the same boundary); else interpolated.
func (t *Tracker) startUsage(s int64) (us int64, prevEnd bool) {
	if t.haveEnd && (s-t.lastEnd)*2 < t.period && (t.lastEnd-s)*2 < t.period {
		return t.lastEndUsage, true
	}
	return t.usageAt(s), false
}

// gridAtOrBefore is the latest grid point at or before x.
func (t *Tracker) gridAtOrBefore(x int64) int64 {
	ph := mod(t.phase.lo+t.phase.w/2, t.period)
	return ph + int64(math.Floor(float64(x-ph)/float64(t.period)))*t.period
}

// finish works out what a period's neighbours decide: its debt, and, when
// it was throttled, the CPUs its run queues stood still on and its stall.
//
// Debt: what the group used beyond its quota (and beyond what it took
// from the burst allowance) in earlier periods and has not paid back: the
// kernel covers a run queue's deficit from the next refill, so a group in
// debt stays throttled without running.
//
// Stopped CPUs: the throttled time is summed over the run queues that
// stood still, each from when the group stopped running to the period's
// end. The readings place the stop within the last interval (x, y] in
// which the usage grew, so the CPUs lie between throttled/(end-x) and
// throttled/(end-y) (when the readings there are close: at most a fifth
// of a period apart); among the whole numbers there, the one nearest
// (usage + throttled) / period, which is exact for a group whose threads
// were runnable all period, is taken (at least 1, at most the node's
// CPUs). The stall is the throttled time divided by them, at most the
// period: the wall time the group stood still.
func (t *Tracker) finish(p Period) Period {
	if t.quota > 0 {
		p.DebtNs = t.debt
		t.debt = max(t.debt+p.UsageNs-p.BurstNs-t.quota, 0)
	}
	p.StallNs, p.StoppedCPUs = 0, 0
	if p.Throttled && p.ThrottledNs > 0 {
		lo, hi := 1.0, math.Inf(1) // the CPUs, as the readings bound them
		if x, y := p.stop.x, p.stop.y; y > x && y-x <= t.period/5 && p.EndNs > y {
			lo = float64(p.ThrottledNs) / float64(p.EndNs-x)
			hi = float64(p.ThrottledNs) / float64(p.EndNs-y)
		}
		p.StoppedCPUs = t.stoppedCPUs(lo, hi, float64(p.UsageNs+p.ThrottledNs)/float64(t.period))
		p.StallNs = min(p.ThrottledNs/int64(p.StoppedCPUs), t.period)
	}
	if run := t.period - p.StallNs; run > 0 {
		p.RunningCPUs = float64(p.UsageNs) / float64(run)
	}
	p.stop = stopAt{}
	return p
}

// stoppedCPUs is how many CPUs a group stood still on when the readings
// bound them between lo and hi: among the whole numbers there (at least
// 1, at most the node's), the one nearest busy, the CPUs it would have
// kept busy had it run all along, which is exact for a group whose
// threads were runnable all the time; round(lo) when there is none (the
// readings are off).
func (t *Tracker) stoppedCPUs(lo, hi, busy float64) int {
	lo = max(lo, 1)
	if t.cpus > 0 {
		hi = min(hi, float64(t.cpus))
	}
	c := math.Round(lo)
	if wlo, whi := math.Ceil(lo-1e-6), math.Floor(hi+1e-6); wlo <= whi {
		c = min(max(math.Round(busy), wlo), whi)
	}
	if t.cpus > 0 {
		c = min(c, float64(t.cpus))
	}
	return max(int(c), 1)
}

// stopAt is the reading interval (x, y] in which a group stopped running.
type stopAt struct{ x, y int64 }

// stopped places when the group stopped running in the period (s, e],
// which began at usage us: in the last reading interval within it in
// which it ran, its usage growing by more than a tenth of a CPU; when it
// ran in none of them but did from s to the first reading after s (let
// go at the refill, it ran into the throttle before that reading), in
// (s, that reading]; (s, s] when it ran in none. (A throttled group
// stands still, but not to the nanosecond: its tasks finish what they
// were doing in the kernel, as Linux 6.18 throttles a task at its return
// to user space, and ticks land late.)
func (t *Tracker) stopped(s, e, us int64) stopAt {
	for i := t.n - 1; i >= 1; i-- {
		a, b := t.at(i-1), t.at(i)
		if b.T > e {
			continue
		}
		if a.T < s {
			if b.T > s && (b.UsageNs-us)*10 > b.T-s {
				return stopAt{s, b.T}
			}
			break
		}
		if (b.UsageNs-a.UsageNs)*10 > b.T-a.T {
			return stopAt{a.T, b.T}
		}
	}
	return stopAt{s, s}
}

// arc is the stretch (lo, lo+w] of the circle of one period's length.
type arc struct{ lo, w int64 }

// phaseSlack widens each interval that saw a boundary, for the time
// between taking a sample's time and the kernel reading its counters.
const phaseSlack = 200 * int64(time.Microsecond)

// learn takes an interval (lo, hi] that saw one boundary: the grid
// passes through it. The phase is where most of the last phaseWindow
// such intervals agree: the longest stretch of the circle of one
// period's length that the most of them cover, if that is more than half
// of them, narrowed by what the phase was before (the intervals the vote
// has forgotten still count). So a reading stamped late (its interval
// disagrees) does not throw the grid away, and a grid that moved (the
// period was set again, the timer restarted) is followed once two
// intervals in a row disagree with the old one: the vote then starts
// afresh.
func (t *Tracker) learn(lo, hi int64) {
	a := arc{mod(lo-phaseSlack, t.period), hi - lo + 2*phaseSlack}
	if hi-lo >= t.period/2 || a.w >= t.period {
		return
	}
	if len(t.arcs) < phaseWindow {
		t.arcs = append(t.arcs, a)
	} else {
		t.dropEdges(t.arcs[t.arcNext])
		t.arcs[t.arcNext] = a
		t.arcNext = (t.arcNext + 1) % phaseWindow
	}
	t.addEdges(a)
	if t.havePhase && 2*t.confirms > phaseWindow && t.phase.w <= phaseFine && overlaps(a, t.phase, t.period) {
		// Pinned finely, and the interval agrees: voting again would
		// change nothing that matters (and costs a vote).
		t.misses = 0
		return
	}
	prev, had := t.phase, t.havePhase
	t.phase, t.confirms, t.havePhase = t.majority()
	if x, ok := intersect(prev, t.phase, t.period); had && t.havePhase && ok {
		// The vote forgets the oldest intervals; what they narrowed the
		// grid down to stays known.
		t.phase = x
	}
	if !t.havePhase || overlaps(a, t.phase, t.period) {
		t.misses = 0
		return
	}
	t.misses++
	if t.misses >= 2 {
		// Two intervals in a row disagree: the grid moved. The vote
		// starts afresh from the intervals since.
		last := t.arcs[(t.arcNext+len(t.arcs)-2)%len(t.arcs)]
		if len(t.arcs) < phaseWindow {
			last = t.arcs[len(t.arcs)-2]
		}
		t.arcs, t.arcNext, t.edges = append(t.arcs[:0], last, a), 0, t.edges[:0]
		t.addEdges(last)
		t.addEdges(a)
		t.phase, t.confirms, t.havePhase = t.majority()
		t.misses = 0
	}
}

// phaseFine is how narrowly a grid known from most of a full window
// must be pinned for an interval that agrees with it not to be voted on.
const phaseFine = 500 * int64(time.Microsecond)

// phaseWindow is how many of the latest intervals that saw one boundary
// vote on the grid's phase.
const phaseWindow = 32

// majority finds the longest stretch of the circle covered by the most of
// t.arcs, and how many cover it; false when they are not more than half.
func (t *Tracker) majority() (arc, int, bool) {
	edges := t.edges
	cover := 0
	for _, a := range t.arcs {
		if mod(a.lo+a.w, t.period) < a.lo {
			cover++ // the arc wraps through 0
		}
	}
	// The stretches between consecutive edge positions and how many arcs
	// cover each; the last one wraps round to the first position.
	st := t.stretches[:0]
	best := 0
	for j := 0; j < len(edges); {
		x := edges[j].x
		for ; j < len(edges) && edges[j].x == x; j++ {
			cover += edges[j].d
		}
		to := edges[0].x + t.period
		if j < len(edges) {
			to = edges[j].x
		}
		st = append(st, stretch{x, to, cover})
		best = max(best, cover)
	}
	t.stretches = st
	if 2*best <= len(t.arcs) {
		return arc{}, 0, false
	}
	// The longest run of adjacent stretches with the best cover, going
	// round the circle once from a stretch that is not in such a run.
	first := 0
	for first < len(st) && st[first].cover == best {
		first++
	}
	if first == len(st) { // cannot happen: every arc is shorter than the period
		return arc{}, 0, false
	}
	var runFrom, runLen, bestFrom, bestLen int64
	for k := 1; k <= len(st); k++ {
		c := st[(first+k)%len(st)]
		if c.cover != best {
			runLen = 0
			continue
		}
		if runLen == 0 {
			runFrom = c.from
		}
		runLen += c.to - c.from
		if runLen > bestLen {
			bestFrom, bestLen = runFrom, runLen
		}
	}
	return arc{mod(bestFrom, t.period), bestLen}, best, true
}

// edge is where an arc starts or ends on the circle.
type edge struct {
	x int64 // position on the circle, in [0, period)
	d int   // +1 where an arc (x, ...] starts, -1 where one ends
}

// edges are where arc a starts and ends on the circle of length p.
func (a arc) edges(p int64) [2]edge { return [2]edge{{a.lo, +1}, {mod(a.lo+a.w, p), -1}} }

// addEdges and dropEdges keep t.edges, the edges of t.arcs in the order
// of their positions, as an arc comes and goes: the vote (majority) then
// needs no sort, and learn runs at every boundary of every group the
// sampler follows.
func (t *Tracker) addEdges(a arc) {
	for _, e := range a.edges(t.period) {
		i, _ := slices.BinarySearchFunc(t.edges, e.x, edgeAt)
		t.edges = slices.Insert(t.edges, i, e)
	}
}

func (t *Tracker) dropEdges(a arc) {
	for _, e := range a.edges(t.period) {
		i, _ := slices.BinarySearchFunc(t.edges, e.x, edgeAt)
		for t.edges[i] != e { // among the edges at e.x
			i++
		}
		t.edges = slices.Delete(t.edges, i, i+1)
	}
}

func edgeAt(e edge, x int64) int { return cmp.Compare(e.x, x) }

// stretch is a part of the circle between two arcs' edges.
type stretch struct {
	from, to int64
	cover    int
}

// overlaps reports whether arcs a and x share a stretch: an interval
// that overlaps the phase agrees with it.
func overlaps(a, x arc, p int64) bool {
	_, ok := intersect(a, x, p)
	return ok
}

// Grid says where the kernel's period boundaries are, once the readings
// have pinned them down (to within gridPinned, confirmed three times): at
// phase + k*period, give or take half. A miss unpins it.
func (t *Tracker) Grid() (phase, half int64, ok bool) {
	if phase, half, ok = t.Phase(); !ok || 2*(half-1) > gridPinned {
		return 0, 0, false
	}
	return phase, half, true
}

// Phase is Grid however widely the grid is known yet: where most of the
// latest intervals that saw a boundary agree it lies, confirmed three
// times (a reader that bisects it: the lab's).
func (t *Tracker) Phase() (phase, half int64, ok bool) {
	if !t.havePhase || t.misses > 0 || t.confirms < 3 {
		return 0, 0, false
	}
	return mod(t.phase.lo+t.phase.w/2, t.period), t.phase.w/2 + 1, true
}

// BoundaryAfter is the first period boundary after x on the grid Phase
// reports; false: no phase yet.
func (t *Tracker) BoundaryAfter(x int64) (int64, bool) {
	if _, _, ok := t.Phase(); !ok {
		return 0, false
	}
	return t.gridAtOrBefore(x) + t.period, true
}

// gridPinned is how narrowly the grid must be known for Grid to report
// it.
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

func (t *Tracker) push(s CounterSample) {
	if t.n < len(t.ring) {
		t.ring[(t.head+t.n)%len(t.ring)] = s
		t.n++
		return
	}
	t.ring[t.head] = s
	t.head = (t.head + 1) % len(t.ring)
}

// at is the i-th kept sample, oldest first.
func (t *Tracker) at(i int) CounterSample { return t.ring[(t.head+i)%len(t.ring)] }

// fine reports whether the readings around x are at most half a period
// apart.
func (t *Tracker) fine(x int64) bool {
	for i := t.n - 1; i >= 1; i-- {
		if a := t.at(i - 1); a.T <= x {
			return x <= t.at(i).T && t.at(i).T-a.T <= t.period/2
		}
	}
	return false
}

// usageBounds bounds the usage counter at x by the readings around it and
// by the most the group can use in between: t.cpus CPUs.
func (t *Tracker) usageBounds(x int64) (lo, hi int64) {
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
func (t *Tracker) usageAt(x int64) int64 {
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
func markLatest(ps []Period, n int64) int64 {
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
