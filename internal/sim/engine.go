package sim

import (
	"fmt"
	"math/bits"
	"math/rand/v2"
	"time"

	"github.com/cfsprobe/cfsprobe/internal/trace"
)

// The engine is split by job: engine.go holds the state, the event loop
// and the readings; engine_bw.go the bandwidth controller (pool, local
// runtime, throttling, the period and slack timers); engine_sched.go the
// threads and CPUs (steps, placement, timeslices, balancing).

// tstate is where a thread is.
type tstate uint8

const (
	tSleeping tstate = iota // on no CPU (asleep, or not started)
	tQueued                 // runnable on its CPU's queue (waiting, or stopped by a throttle)
	tRunning                // on its CPU
	tExited
)

type thread struct {
	beh   Behavior
	rng   *rand.Rand
	pin   int32 // -1: free
	state tstate
	cpu   int32 // current CPU, or the last one (-1: none yet)
	kind  StepKind
	need  int64 // Burn: CPU time still to burn
	polls bool  // Burn: charged as it runs (Step.Polls)
	// Spin: charged when it ends, and stopped there if that throttles it
	// (Step.ChargedAtEnd); cleared once done.
	chargeEnd bool
	until     int64 // Spin, Sleep: until when
	// The operation under way: it started at opStart with ran at opCPU;
	// opEnd marks the current step as its last.
	inOp, opEnd bool
	opStart     int64
	opCPU       int64
	ran         int64 // CPU time used so far
	vrun        int64 // vruntime on its CPU
	lag         int64 // vruntime less the CPU's min_vruntime when it left it
	stepAt      int64 // when the last step was handed out
	same        int   // steps handed out at stepAt (a program that makes no progress)
}

// cfsRq is a group's run queue on one CPU: its local runtime and
// throttle state.
type cfsRq struct {
	remaining  int64 // runtime_remaining
	throttled  bool
	clock      int64 // throttled_clock; -1 when throttled time is not being counted
	expires    int64 // runtime_expires (3.16, 4.18)
	seq        uint64
	nr         int   // threads (level 0) or group entities (level 1) queued here
	prev, next int32 // throttled list
}

type cpu struct {
	cur        int32   // running thread, -1: none
	queue      []int32 // runnable threads not running
	freeQueued int     // free threads in queue
	runStart   int64   // when cur's progress was last brought up to date
	lastCharge int64   // when cur was last charged (update_curr)
	picked     int64   // cur's ran when it was picked (its timeslice so far)
	minV       int64   // min_vruntime
	allowed    bool
	rq         [2]cfsRq // the group's, and its parent's
}

// bandwidth is a group's cfs_bandwidth.
type bandwidth struct {
	quota, period, burst int64 // quota 0: unlimited
	runtime              int64 // the pool
	snap                 int64 // runtime_snap (5.14)
	idle                 bool
	active               bool  // the period timer is armed
	next                 int64 // the period timer's expiry (kept when inactive)
	head, tail           int32 // throttled list of CPUs (-1: empty)
	slackOn              bool
	expires              int64 // runtime_expires (3.16, 4.18)
	seq                  uint64
	// cpu.stat
	nrPeriods, nrThrottled, throttledTime, nrBursts, burstTime int64
}

// Timer slots beyond the CPUs' and threads'.
const (
	slotTick = iota
	slotPeriod0
	slotPeriod1
	slotSlack0
	slotSlack1
	slotSample
	slotWakeup
	slotEnd
	nFixedSlots
)

// Ranks: at one instant the period timer runs first, the end last.
const (
	rankPeriod = iota
	rankSlack
	rankThread
	rankTick
	rankWakeup
	rankSample
	rankEnd
)

// straddle is how far before and after a period boundary the readings
// are taken.
const straddle = int64(10 * time.Microsecond)

type engine struct {
	cfg     Config
	m       model
	now     int64
	tick    int64
	slice   int64
	levels  int
	cpus    []cpu
	allowed []int32 // the group's CPUs
	threads []thread
	bw      [2]bandwidth
	h       *timers
	rng     *rand.Rand
	// wakeRng draws the other tasks' wake-ups (Config.Wakeups), apart
	// from rng so that a run without them draws as it did.
	wakeRng *rand.Rand
	fixed   int32 // first fixed slot
	running int   // CPUs running a thread
	alive   int   // threads not exited
	usage   int64 // the group's CPU time as charged (cpuacct)
	// freeQueued counts free threads waiting in queues, for balancing.
	freeQueued int
	// CFS's timeslice and wake-up preemption (scaled by the CPU count).
	latency, minGran, wakeGran int64
	// Readings.
	samples     []trace.CounterSample
	every       int64 // regular readings
	nextRegular int64
	afterAt     int64 // the reading just after a boundary
	ops         []trace.Sample
	phase       [2]int64
	err         error
	verify      func(*engine) error // tests: a check after every event
	// A run read to the close (options.toClose), and when its last
	// thread exited (never: not yet).
	toClose bool
	exitAt  int64
}

func newEngine(c Config, threads []Thread) *engine {
	n := c.CPUs
	e := &engine{
		cfg:     c,
		m:       modelOf(c.Era),
		tick:    int64(c.Tick),
		slice:   int64(c.Slice),
		levels:  1,
		cpus:    make([]cpu, n),
		threads: make([]thread, len(threads)),
		rng:     rand.New(rand.NewPCG(c.Seed, 0x5eed5eed5eed5eed)),
		alive:   len(threads),
	}
	if c.Parent != nil && !c.Parent.Unlimited() {
		e.levels = 2
	}
	allowed := allowedCPUs(c.Limits.Cpuset, n)
	for i := range e.cpus {
		cp := &e.cpus[i]
		cp.cur = -1
		cp.allowed = allowed[i]
		if cp.allowed {
			e.allowed = append(e.allowed, int32(i))
		}
		for l := range cp.rq {
			cp.rq[l].clock = -1
			cp.rq[l].prev, cp.rq[l].next = -1, -1
		}
	}
	for i, t := range threads {
		e.threads[i] = thread{
			beh:   t.Behavior,
			rng:   rand.New(rand.NewPCG(c.Seed, uint64(i)+1)),
			pin:   int32(t.Pin),
			cpu:   -1,
			state: tSleeping,
		}
	}
	// 1 + ilog2(min(CPUs, 8)): sched_tunable_scaling's default (log).
	factor := int64(bits.Len(uint(min(n, 8))))
	e.latency = 6 * int64(time.Millisecond) * factor
	e.minGran = 750 * int64(time.Microsecond) * factor
	e.wakeGran = int64(time.Millisecond) * factor

	// A thread's timer is its step's end while it runs, its wake-up
	// while it sleeps: one slot, re-armed in place as it goes from one
	// to the other.
	e.fixed = int32(len(threads))
	e.h = newTimers(int(e.fixed) + nFixedSlots)
	for i := range threads {
		e.h.rank[i] = rankThread
	}
	ranks := [nFixedSlots]uint8{rankTick, rankPeriod, rankPeriod, rankSlack, rankSlack, rankSample, rankWakeup, rankEnd}
	for i, r := range ranks {
		e.h.rank[e.fixed+int32(i)] = r
	}

	e.initBandwidth(0, c.Limits.Quota, c.Limits.Period, c.Limits.Burst)
	if e.levels == 2 {
		e.initBandwidth(1, c.Parent.Quota, c.Parent.Period, c.Parent.Burst)
	}
	period := int64(c.Limits.Period)
	e.every = int64(c.SampleEvery)
	e.nextRegular = e.every
	e.afterAt = never
	e.exitAt = never
	switch {
	case c.Samples != nil:
		e.samples = c.Samples[:0]
	case c.Duration > 0: // room for the readings of the whole run, within reason
		e.samples = make([]trace.CounterSample, 0, min(int64(c.Duration)/e.every+2*int64(c.Duration)/period+8, 1<<20))
	}
	return e
}

// initBandwidth sets level l's limits as tg_set_cfs_bandwidth does: the
// pool refilled and the period timer started, its first expiry at a
// random phase of the period (the group's own at Config.Phase when
// given). Each write of a limit refills the pool once
// (__refill_cfs_bandwidth_runtime, up to quota + burst), and a burst is
// written after the quota (as cfsprobe run, runc and systemd do: the
// quota first, which the burst may not exceed), so a group with a burst
// starts with min(2 × quota, quota + burst).
func (e *engine) initBandwidth(l int, quota, period, burst time.Duration) {
	b := &e.bw[l]
	b.quota, b.period, b.burst = int64(quota), int64(period), int64(burst)
	b.head, b.tail = -1, -1
	if b.quota == 0 {
		return
	}
	us := b.period / int64(time.Microsecond)
	e.phase[l] = (e.rng.Int64N(us) + 1) * int64(time.Microsecond)
	if l == 0 && e.cfg.Phase > 0 {
		e.phase[l] = int64(e.cfg.Phase)
	}
	b.runtime = b.quota
	if b.burst > 0 {
		b.runtime = min(2*b.quota, b.quota+b.burst)
	}
	b.snap = b.runtime
	b.active = true
	b.next = e.phase[l]
	b.expires = b.next
	b.seq = 1
	e.h.set(e.fixed+slotPeriod0+int32(l), b.next)
}

func (e *engine) run() error {
	e.samples = append(e.samples, trace.CounterSample{})
	if e.cfg.Duration > 0 {
		e.h.set(e.fixed+slotEnd, int64(e.cfg.Duration))
	}
	e.armSample()
	if e.cfg.Wakeups > 0 {
		e.wakeRng = rand.New(rand.NewPCG(e.cfg.Seed, 0x0ddba11))
		e.armWakeup()
	}
	for i := range e.threads {
		e.startThread(int32(i))
		if e.err != nil {
			return e.err
		}
	}
	for e.err == nil {
		s, t := e.h.min()
		if s < 0 {
			break
		}
		e.now = t
		if s == e.fixed+slotEnd {
			break
		}
		e.dispatch(s)
		if e.verify != nil {
			if err := e.verify(e); err != nil {
				e.failf("sim: at %v: %w", time.Duration(e.now), err)
			}
		}
	}
	if e.err != nil {
		return e.err
	}
	e.finish()
	return nil
}

func (e *engine) dispatch(s int32) {
	switch {
	case s < e.fixed: // re-armed or cleared by stepDone, wake
		if t := &e.threads[s]; t.state == tRunning {
			e.stepDone(t.cpu)
		} else {
			e.wake(s)
		}
	default:
		switch s - e.fixed {
		case slotTick:
			e.onTick()
		case slotPeriod0, slotPeriod1:
			e.periodTimer(int(s - e.fixed - slotPeriod0))
		case slotSlack0, slotSlack1:
			e.h.clear(s)
			e.slackTimer(int(s - e.fixed - slotSlack0))
		case slotSample:
			e.reading()
		case slotWakeup:
			e.otherWakeup()
		}
	}
}

// armSample arms the next reading: the regular one, the one just before
// the group's next period boundary, or the one just after the last.
func (e *engine) armSample() {
	if e.nextRegular <= e.now { // regular readings left out while quiet
		e.nextRegular = (e.now/e.every + 1) * e.every
	}
	t := e.nextRegular
	if e.afterAt != never {
		// Nothing between a boundary and the reading just after it: a
		// regular reading there would make the interval that saw the
		// boundary lopsided, and trace.BuildTimeline, which places a
		// boundary at the middle of where such intervals meet, would
		// place every one off it (692 ns early where a regular reading
		// came 8.6 µs after a boundary, 2026-12-03). It is left out.
		t = e.afterAt
	}
	if b := &e.bw[0]; e.cfg.QuietIdle && b.quota > 0 && !b.active && e.running == 0 {
		t = e.afterAt
	}
	if b := &e.bw[0]; b.quota > 0 && b.active {
		last := e.samples[len(e.samples)-1].T
		if before := b.next - straddle; before > last && before < t {
			t = before
		}
	}
	e.h.set(e.fixed+slotSample, t)
}

// counters are the group's cpu.stat and usage at now. The usage is the
// CPU time the threads used up to now: the kernel's counter lags by up
// to a tick per running CPU (it moves when a thread is charged), which
// would make a reading between two ticks see a busy group stand still;
// the model reports the time itself, so that each period gets what ran
// in it.
func (e *engine) counters() trace.CounterSample {
	b := &e.bw[0]
	usage := e.usage
	for i := range e.cpus {
		if c := &e.cpus[i]; c.cur >= 0 {
			usage += max(e.now-c.lastCharge, 0) // none while another task's wake-up holds the CPU
		}
	}
	return trace.CounterSample{
		T:           e.now,
		UsageNs:     usage,
		NrPeriods:   b.nrPeriods,
		NrThrottled: b.nrThrottled,
		ThrottledNs: b.throttledTime,
		NrBursts:    b.nrBursts,
		BurstNs:     b.burstTime,
	}
}

func (e *engine) reading() {
	if e.now > e.samples[len(e.samples)-1].T {
		e.samples = append(e.samples, e.counters())
	}
	for e.nextRegular <= e.now {
		e.nextRegular += e.every
	}
	if e.afterAt <= e.now {
		e.afterAt = never
	}
	e.armSample()
	if e.now > e.exitAt && e.closed() {
		e.h.set(e.fixed+slotEnd, e.now)
	}
}

// closed reports whether the newest reading, taken after the last thread
// exited, ends a run read to the close: it counts another period than the
// last reading at or before the exit, or it is a period after the exit.
func (e *engine) closed() bool {
	s := e.samples
	last, i := s[len(s)-1], len(s)-2
	for s[i].T > e.exitAt {
		i--
	}
	return last.NrPeriods != s[i].NrPeriods || last.T >= e.exitAt+e.bw[0].period
}

// finish charges the running threads (they exit or are stopped at the
// end) and takes the last reading.
func (e *engine) finish() {
	for i := range e.cpus {
		if e.cpus[i].cur >= 0 {
			e.progress(int32(i))
			e.charge(int32(i))
		}
	}
	s := e.counters()
	if last := &e.samples[len(e.samples)-1]; last.T == e.now {
		*last = s
	} else {
		e.samples = append(e.samples, s)
	}
}

func (e *engine) result() *Result {
	c := e.cfg
	end := e.now
	if e.toClose {
		end = e.exitAt
	}
	r := &Result{
		Samples: e.samples,
		Ops:     e.ops,
		EndNs:   end,
		Model: trace.Simulated{
			Era:             string(c.Era),
			HostCPUs:        c.CPUs,
			SliceNs:         int64(c.Slice),
			TickNs:          int64(c.Tick),
			TickOffsetNs:    int64(c.TickOffset),
			MinRuntimeNs:    int64(MinRuntime),
			SlackNs:         int64(SlackPeriod),
			MinExpirationNs: int64(MinExpiration),
			Seed:            c.Seed,
			PhaseNs:         e.phase[0],
			Threads:         len(e.threads),
		},
	}
	if c.Wakeups > 0 {
		r.Model.WakeupsNs, r.Model.WakeupRunNs = int64(c.Wakeups), int64(wakeupRun)
	}
	if r.Ops == nil {
		r.Ops = []trace.Sample{}
	}
	if c.Parent != nil {
		p := trace.LimitsOf(*c.Parent)
		r.Model.Parent = &p
	}
	return r
}

// fail stops the run with err.
func (e *engine) fail(err error) {
	if e.err == nil {
		e.err = err
	}
}

func (e *engine) failf(format string, a ...any) { e.fail(fmt.Errorf(format, a...)) }
