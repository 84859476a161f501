// Package sim is a discrete-event model of CFS bandwidth control on N
// CPUs, per kernel era (see Era): a group's pool refilled each period,
// per-CPU local runtime taken from it in slices, the period and slack
// timers, throttling and distribution, and the counters of cpu.stat, as
// kernel/sched/fair.c and Documentation/scheduler/sched-bwc.rst describe
// them. Threads follow step programs (Behavior); Run returns the group's
// counters as the kernel would show them, for trace.BuildTimeline, and
// the latency of every operation.
package sim

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/cfsprobe/cfsprobe/internal/cgroup"
	"github.com/cfsprobe/cfsprobe/internal/trace"
)

// The kernel's constants the model uses (kernel/sched/fair.c).
const (
	// DefaultSlice is sched_cfs_bandwidth_slice_us's default.
	DefaultSlice = 5 * time.Millisecond
	// DefaultTick is the tick of CONFIG_HZ=250 (Debian's).
	DefaultTick = 4 * time.Millisecond
	// MinRuntime is min_cfs_rq_runtime: what a CPU keeps of its local
	// runtime when its last thread leaves.
	MinRuntime = time.Millisecond
	// SlackPeriod is cfs_bandwidth_slack_period: the slack timer's delay.
	SlackPeriod = 5 * time.Millisecond
	// MinExpiration is min_bandwidth_expiration: no slack distribution
	// this close to a refill.
	MinExpiration = 2 * time.Millisecond
)

// Config is one simulation. Zero values take the kernel's defaults.
type Config struct {
	Era  Era
	CPUs int // the host's CPUs (> 0)
	// Limits are the group's: Quota 0 = unlimited; Burst; Cpuset ("" =
	// all CPUs) restricts where threads run; Period 0 = 100ms.
	Limits cgroup.Limits
	Parent *cgroup.Limits // a parent group with its own quota (nil: none)
	Slice  time.Duration  // sched_cfs_bandwidth_slice_us; 0: 5 ms
	Tick   time.Duration  // scheduler tick; 0: 4 ms (CONFIG_HZ=250, Debian's)
	// TickOffset is where the ticks fall: at TickOffset + k × Tick, from
	// 0 to below the tick. The kernel's ticks are at multiples of the tick on
	// its monotonic clock, on every CPU at once (skew_tick off), and a
	// group's period timer anywhere between them: what a throttled
	// thread overruns its runtime by, charged at a tick, depends on it.
	TickOffset time.Duration
	Seed       uint64 // for any randomness of the model (same seed, same result)
	// Phase is when the group's period timer first expires, from 0 to
	// its period (the period is then the phase of the periods' grid
	// against the run's start: a phase of a whole period puts a period's
	// start at 0); 0: a phase drawn from Seed, as a group whose limit was
	// set at some moment of its life has.
	Phase time.Duration
	// Duration stops the run then even if threads still run (0: when
	// every thread has exited).
	Duration time.Duration
	// SampleEvery is how often the counters are read besides just before
	// and after each period boundary (0: a tenth of the period, as the
	// lab reads them; from 10µs): finer readings give a reader of the
	// counters at any moment (a test of the exporter's sampler).
	SampleEvery time.Duration
	// Samples, when not nil, is where the run's readings go, from its
	// start, grown as needed: Result.Samples is it. A caller that runs
	// many simulations gives the last Result's Samples to the next, once
	// done with it, so that a long run's readings are not grown again
	// each time.
	Samples []trace.CounterSample
	// QuietIdle leaves out the regular readings while the group is idle
	// with its period timer stopped, when its counters cannot change: a
	// run that is mostly idle (a group active now and then) is read at
	// its periods only, which is all a caller of its counters and kernel
	// periods needs. The trace's windows of idle time are longer then.
	QuietIdle bool
	// Wakeups is how often, on average, a task of another group wakes on
	// the host and runs for a moment (0: never; the host is otherwise
	// idle): the lab's own reader of the counters, which wakes every
	// sample interval (a spread interval: uniform over half to one and a
	// half of it). It goes to a CPU that runs no thread of the group if
	// there is one, and disturbs nothing there (the lab's reader keeps
	// off a pinned workload's CPUs: docs/design.md, "The lab's reader");
	// when the group's threads run on every CPU, to one of them, drawn at
	// random, where it does to the thread what a tick does
	// (engine.recheck): the thread is charged, and yields to another
	// thread waiting on that CPU once it has had its timeslice, which
	// with more threads than CPUs makes them take turns off the ticks'
	// grid; and it holds that CPU for wakeupRun.
	Wakeups time.Duration
	// ResumeLate is how long after the refill that unthrottles a CPU the
	// thread it picks runs (0: at once): the CPU sat idle while its run
	// queue was throttled, and the unthrottle wakes it (an IPI, and in a
	// virtual machine the vCPU scheduled again). The throttled time
	// stops at the unthrottle, as the kernel counts it; the thread
	// neither runs nor is charged until then. Measured on a host by
	// suite.MeasureCosts (tens of µs on this VM, 0.03 to 0.3 ms in the
	// qemu guest under emulation).
	ResumeLate time.Duration
}

// StepKind is what a step of a thread's program does.
type StepKind int

// The kinds of step.
const (
	Burn  StepKind = iota // need CPU time: Step.CPU of it
	Spin                  // run (burning CPU whenever on a CPU) until simulated time Step.Until, checked only while running (a wall-clock burn loop)
	Sleep                 // sleep until simulated time Step.Until (no CPU)
	Exit                  // the thread ends
)

// Step is one step of a thread's program.
type Step struct {
	Kind  StepKind
	CPU   time.Duration // Burn
	Until time.Duration // Spin, Sleep: absolute simulated time since the start
	// OpStart marks the step as the first of an operation, OpEnd as its
	// last (both on a one-step operation). An operation's latency is from
	// the start of its first step to the end of its last; Result.Ops
	// lists them.
	OpStart, OpEnd bool
	// Polls (Burn): the thread reads its own CPU clock as it burns, a
	// system call in which the kernel charges its runtime to its group
	// (task_sched_runtime calls update_curr), so the group's runtime is
	// charged as it runs, not at the tick and at scheduling events: it
	// runs out when the local runtime does, and the CPU time it used
	// before a refill is charged before it (the engine's burns of CPU
	// time, burn_for with ON_CPU_NS or BURN_CPU_NS).
	Polls bool
	// ChargedAtEnd (Spin): the step ends with a read of the thread's own
	// CPU clock, the same system call: the group is charged what the
	// thread ran since the last tick, and a run queue that ran out with
	// the pool empty is throttled then, so that the step (and its
	// operation) ends only when the thread runs again (the engine's
	// wall-clock burns, burn_for with ON_NS or BURN_NS, read the CPU clock
	// before the wall clock that ends the operation).
	ChargedAtEnd bool
}

// Behavior gives a thread its next step when it finished the previous
// one (at time now). rng is the thread's own, seeded from Config.Seed.
type Behavior interface {
	Next(now time.Duration, rng *rand.Rand) Step
}

// Thread is one simulated thread of the group.
type Thread struct {
	Pin      int // the CPU it is pinned to; -1: free (shared fairly across the group's CPUs)
	Behavior Behavior
}

// Result is what happened.
type Result struct {
	// Samples are the group's cumulative counters as the kernel would
	// show them, T in ns since the start, the first at T=0 (all zero),
	// the last at EndNs; they straddle every period boundary closely
	// (readings just before and just after it) so that
	// trace.BuildTimeline places every boundary to well under a
	// millisecond, plus readings in between.
	Samples []trace.CounterSample
	// Ops are the completed operations: StartNs, WallNs, CPUNs, Thread
	// (index in the thread list).
	Ops   []trace.Sample
	EndNs int64 // when the last thread exited (or Config.Duration)
	// Model is the era and every model parameter used, for
	// spec.simulated.
	Model trace.Simulated
}

// FieldError is a Config or thread that cannot be simulated: which field
// ("CPUs", "Limits", "Threads[3].Pin", ...) and why.
type FieldError struct {
	Field string
	Err   error
}

func (e *FieldError) Error() string { return fmt.Sprintf("sim: %s: %v", e.Field, e.Err) }
func (e *FieldError) Unwrap() error { return e.Err }

func fieldErr(field, format string, a ...any) error {
	return &FieldError{Field: field, Err: fmt.Errorf(format, a...)}
}

// MaxCPUs bounds Config.CPUs, the simulated host's (the kernel's NR_CPUS
// is at most 8192).
const MaxCPUs = 8192

// MinWakeups bounds Config.Wakeups: another task's wake-ups at most
// this often (the lab's shortest sample interval).
const MinWakeups = 100 * time.Microsecond

// maxThreads bounds the threads (timer slots are numbered in 24 bits).
const maxThreads = 1 << 20

// Run simulates the threads under cfg. A Config or thread that cannot be
// simulated is a *FieldError naming the field.
func Run(cfg Config, threads []Thread) (*Result, error) { return run(cfg, threads, options{}) }

// options are what run does beside Run.
type options struct {
	// toClose: with a quota and no Duration, the counters are read on
	// after the last thread exited, as the lab reads a run's: until the
	// period in which it exited has closed (the kernel counts a period
	// when it ends, so the lab waits for that boundary before its last
	// reading), or, when the period timer has stopped, a period on.
	// EndNs stays the exit, the run's wall time.
	toClose bool
	// verify checks the engine's state after every event (tests; nil:
	// none).
	verify func(*engine) error
}

// run is Run with options.
func run(cfg Config, threads []Thread, o options) (*Result, error) {
	c, err := normalize(cfg, threads)
	if err != nil {
		return nil, err
	}
	e := newEngine(c, threads)
	e.verify = o.verify
	e.toClose = o.toClose && c.Duration == 0 && !c.Limits.Unlimited()
	if err := e.run(); err != nil {
		return nil, err
	}
	return e.result(), nil
}

// normalize checks cfg and fills in the kernel's defaults.
func normalize(cfg Config, threads []Thread) (Config, error) {
	c := cfg
	if c.Era == "" {
		return c, fieldErr("Era", "no kernel era given: use one of %s", EraNames())
	}
	if _, err := ParseEra(string(c.Era)); err != nil {
		return c, &FieldError{Field: "Era", Err: err}
	}
	if c.CPUs <= 0 || c.CPUs > MaxCPUs {
		return c, fieldErr("CPUs", "%d is not a CPU count from 1 to %d", c.CPUs, MaxCPUs)
	}
	var err error
	if c.Limits, err = checkLimits(c.Limits, c.CPUs); err != nil {
		return c, &FieldError{Field: "Limits", Err: err}
	}
	if c.Limits.Burst > 0 && !c.Era.HasBurst() {
		return c, fieldErr("Limits", "burst %v needs era %s or later (cpu.cfs_burst_us came with f4183717b370)", c.Limits.Burst, Era5_14)
	}
	if c.Parent != nil {
		p, err := checkLimits(*c.Parent, c.CPUs)
		if err != nil {
			return c, &FieldError{Field: "Parent", Err: err}
		}
		c.Parent = &p
	}
	if c.Slice == 0 {
		c.Slice = DefaultSlice
	}
	if c.Slice < time.Microsecond {
		return c, fieldErr("Slice", "%v is below the kernel's minimum of 1µs", c.Slice)
	}
	if c.Tick == 0 {
		c.Tick = DefaultTick
	}
	if c.Tick < 100*time.Microsecond || c.Tick > 100*time.Millisecond {
		return c, fieldErr("Tick", "%v is not a tick from 100µs to 100ms", c.Tick)
	}
	if c.TickOffset < 0 || c.TickOffset >= c.Tick {
		return c, fieldErr("TickOffset", "%v is not from 0 to below the tick, %v", c.TickOffset, c.Tick)
	}
	if c.Wakeups != 0 && c.Wakeups < MinWakeups {
		return c, fieldErr("Wakeups", "%v is not 0 or at least %v", c.Wakeups, MinWakeups)
	}
	if c.ResumeLate < 0 || c.ResumeLate >= c.Limits.Period {
		return c, fieldErr("ResumeLate", "%v is not from 0 to below the period, %v", c.ResumeLate, c.Limits.Period)
	}
	if c.Duration < 0 {
		return c, fieldErr("Duration", "%v is negative", c.Duration)
	}
	if c.SampleEvery == 0 {
		c.SampleEvery = c.Limits.Period / 10
	}
	if c.SampleEvery < 10*time.Microsecond {
		return c, fieldErr("SampleEvery", "%v is below 10µs", c.SampleEvery)
	}
	if c.Phase < 0 || c.Phase > c.Limits.Period {
		return c, fieldErr("Phase", "%v is not from 0 to the period, %v", c.Phase, c.Limits.Period)
	}
	if len(threads) == 0 {
		return c, fieldErr("Threads", "none given")
	}
	if len(threads) > maxThreads {
		return c, fieldErr("Threads", "%d threads are more than the %d the engine takes", len(threads), maxThreads)
	}
	allowed := allowedCPUs(c.Limits.Cpuset, c.CPUs)
	for i, t := range threads {
		if t.Behavior == nil {
			return c, fieldErr(fmt.Sprintf("Threads[%d].Behavior", i), "is nil")
		}
		if t.Pin < -1 || t.Pin >= c.CPUs {
			return c, fieldErr(fmt.Sprintf("Threads[%d].Pin", i), "%d is neither -1 (free) nor a CPU from 0 to %d", t.Pin, c.CPUs-1)
		}
		if t.Pin >= 0 && !allowed[t.Pin] {
			return c, fieldErr(fmt.Sprintf("Threads[%d].Pin", i), "CPU %d is not in the group's cpuset %q", t.Pin, c.Limits.Cpuset)
		}
	}
	return c, nil
}

// checkLimits fills in the default period and checks the limits as the
// kernel would, and the cpuset against the host's CPUs.
func checkLimits(l cgroup.Limits, cpus int) (cgroup.Limits, error) {
	l.Period = l.PeriodOrDefault()
	if err := l.Validate(); err != nil {
		return l, err
	}
	_, err := cpusetCPUs(l.Cpuset, cpus)
	return l, err
}

// cpusetCPUs are the CPUs a group with the cpuset may use on a host of
// cpus CPUs, increasing: the cpuset's, or all of them when it is "". A
// cpuset that is not a CPU list, names none, or names a CPU the host does
// not have is a *cgroup.LimitError.
func cpusetCPUs(cpuset string, cpus int) ([]int, error) {
	if cpuset == "" {
		all := make([]int, cpus)
		for c := range all {
			all[c] = c
		}
		return all, nil
	}
	le := func(reason string, err error) error {
		return &cgroup.LimitError{Field: cgroup.FieldCpuset, Value: strconv.Quote(cpuset), Reason: reason, Err: err}
	}
	list, err := cgroup.ParseCPUList(cpuset)
	if err != nil {
		return nil, le("is not a CPU list like 0-1 or 0,2", err)
	}
	if len(list) == 0 {
		return nil, le("names no CPU", nil)
	}
	for _, c := range list {
		if c >= cpus {
			return nil, le(fmt.Sprintf("names CPU %d, but the simulated host has CPUs 0 to %d", c, cpus-1), nil)
		}
	}
	return list, nil
}

// allowedCPUs marks the CPUs of a valid cpuset ("" = all).
func allowedCPUs(cpuset string, cpus int) []bool {
	list, _ := cpusetCPUs(cpuset, cpus)
	a := make([]bool, cpus)
	for _, c := range list {
		a[c] = true
	}
	return a
}
