package suite

import (
	"context"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/cfsprobe/cfsprobe/internal/cgroup"
	"github.com/cfsprobe/cfsprobe/internal/lab"
	"github.com/cfsprobe/cfsprobe/internal/sim"
	"github.com/cfsprobe/cfsprobe/internal/trace"
)

// The runs MeasureCosts times: periodic, one thread, burns of costBurn
// of CPU time and sleeps of sim.ShortSleep (none, or costWakes of them),
// sim.LongSleep (costLongWakes) or sim.MidSleep (costLates), costRounds
// times each.
const (
	costBurn      = 10 * time.Microsecond
	costWakes     = 100 // short sleeps in the run of short sleeps
	costLongWakes = 5   // long sleeps in the run of long sleeps
	costLates     = 40  // sleeps of sim.MidSleep in the run that times them
	costRounds    = 3   // runs of each; the median is taken
	// The run that times a throttled thread's resumption: burns of
	// resumeBurn, back to back, under resumeQuota per default period,
	// resumeBurns of them (about 20 periods, each throttled).
	resumeBurn  = 50 * time.Microsecond
	resumeQuota = 5 * time.Millisecond
	resumeBurns = 2000
)

// MeasureCosts measures what a thread of the built-in workloads costs
// its group on this host beside its operations, and how late its sleeps
// end, as the lab runs it (base gives the parent group and the machine;
// a group of its own without a limit each time). What a run used beside
// its operations is its group's usage less its burns and less its
// process's start and exit, as the workload reported them
// (trace.Process): its thread's own cost (its making, its end and the
// join: sim.Costs.Thread) and its wake-ups. A run of one burn and no
// sleep gives the thread's own; what a run of 100 sleeps of 1 ms used so
// beyond it, per sleep, is a wake-up. In a run of 5 sleeps of 1 s, what
// the process used in the periods where it woke (but the first and the
// last, its start and its exit: wakeUsage), less the burn, is a wake-up
// from a long sleep (sim.Costs.WakeAfter: caches gone cold), at least the
// short one's: over 5 sleeps, what such a run used beyond the run of
// none is the thread's own cost's noise (135 to 300 µs from suite to
// suite here) as much as the wake-ups'. A run of 40 sleeps of 50 ms
// (sim.MidSleep, the suites' workloads' sleep) gives a wake-up after it,
// as the run of short sleeps does (sim.Costs.WakeMid, kept between the
// short one's and the long one's), and how late a sleep ends
// (sim.Costs.SleepLate): the median time between one burn's end and the
// next's start, less the sleep and its wake-up: the suites'
// workloads sleep 50 ms and more, and a sleep of 1 ms ends earlier (on
// this host 85 µs after it, the wake-up's CPU time included, where one of
// 50 ms ends 145 to 160 µs after it: a CPU idle that long goes into a
// deeper idle state; the 15 sleeps of 1 s, 110 to 170 µs, are too few to
// say). Three runs of a thread throttled every period under a quota
// (resumeLateness) give how late a throttled thread runs again after the
// refill (sim.Costs.ResumeLate): the median over their throttles. Each
// run is made three times and the median taken (the long sleeps take
// 15 s). A simulation compared with the lab's runs charges
// them (sim.Plan.WithCosts), and each run's own start and exit
// (sim.Plan.WithRunOf).
func MeasureCosts(ctx context.Context, base lab.Config) (sim.Costs, error) {
	// run makes costRounds runs of iterations burns and sleeps of sleep,
	// hands each trace to each (nil: nothing more to read) and returns
	// the median of what they used beside their burns, start and exit.
	run := func(sleep time.Duration, iterations int, each func(*trace.Trace)) (time.Duration, error) {
		var rest []time.Duration
		for range costRounds {
			cfg := base
			cfg.Limits = cgroup.Limits{Period: cgroup.DefaultPeriod} // no quota
			cfg.Workload, cfg.Command = "periodic", nil
			cfg.WorkloadArgs = []string{"--burn-cpu", costBurn.String(), "--sleep", sleep.String(), "--iterations", fmt.Sprint(iterations), "--quiet"}
			cfg.Stdout, cfg.Stderr = io.Discard, io.Discard
			plan, err := lab.Prepare(cfg)
			if err != nil {
				return 0, err
			}
			tr, err := plan.Run(ctx)
			if err != nil {
				return 0, err
			}
			pr := tr.Process
			if pr.StartCPUNs <= 0 {
				return 0, fmt.Errorf("the workload did not report its process's CPU time at its start (%s)", tr.Spec.Workload)
			}
			rest = append(rest, time.Duration(tr.Summary.UsageNs-pr.StartCPUNs-pr.ExitCPUNs)-time.Duration(iterations)*costBurn)
			if each != nil {
				each(tr)
			}
		}
		return median(rest), nil
	}
	none, err := run(sim.ShortSleep, 1, nil)
	if err != nil {
		return sim.Costs{}, fmt.Errorf("measure a run without sleeps: %w", err)
	}
	short, err := run(sim.ShortSleep, 1+costWakes, nil)
	if err != nil {
		return sim.Costs{}, fmt.Errorf("measure a wake-up: %w", err)
	}
	// The runs of long sleeps: what each wake-up used, not their usage.
	var wakes []time.Duration
	if _, err := run(sim.LongSleep, 1+costLongWakes, func(tr *trace.Trace) { wakes = append(wakes, wakeUsage(tr)...) }); err != nil {
		return sim.Costs{}, fmt.Errorf("measure a wake-up from a long sleep: %w", err)
	}
	if len(wakes) == 0 {
		return sim.Costs{}, fmt.Errorf("measure a wake-up from a long sleep: the runs of %d sleeps of %v showed no wake-up between the process's start and its exit", costLongWakes, sim.LongSleep)
	}
	// The runs of sim.MidSleep: what they used, and the time between one
	// burn's end and the next's start.
	var gaps []time.Duration
	mid, err := run(sim.MidSleep, 1+costLates, func(tr *trace.Trace) {
		if tr.Latency != nil {
			ops := tr.Latency.Samples // one thread's, in order
			for i := 1; i < len(ops); i++ {
				gaps = append(gaps, time.Duration(ops[i].StartNs-ops[i-1].StartNs-ops[i-1].WallNs))
			}
		}
	})
	if err != nil {
		return sim.Costs{}, fmt.Errorf("measure a wake-up from a sleep of %v and its lateness: %w", sim.MidSleep, err)
	}
	if len(gaps) < costLates {
		return sim.Costs{}, fmt.Errorf("measure a sleep's lateness: %d of the %d sleeps of %v were timed", len(gaps), costRounds*costLates, sim.MidSleep)
	}
	var resumes []time.Duration
	for range costRounds {
		r, err := resumeLateness(ctx, base)
		if err != nil {
			return sim.Costs{}, fmt.Errorf("measure how late a throttled thread runs again: %w", err)
		}
		resumes = append(resumes, r...)
	}
	if len(resumes) == 0 {
		return sim.Costs{}, fmt.Errorf("measure how late a throttled thread runs again: %d runs of %d burns of %v under %v per %v saw no throttled burn", costRounds, resumeBurns, resumeBurn, resumeQuota, cgroup.DefaultPeriod)
	}
	c := sim.Costs{Thread: max(none, 0), Wake: max((short-none)/costWakes, time.Nanosecond)}
	c.ResumeLate = max(median(resumes), time.Nanosecond)
	c.WakeLong = max(median(wakes)-costBurn, c.Wake)
	c.WakeMid = min(max((mid-none)/costLates, c.Wake), c.WakeLong)
	// A gap is the sleep, its lateness and the wake-up's CPU time.
	c.SleepLate = max(median(gaps)-sim.MidSleep-c.WakeMid, time.Nanosecond)
	return c, nil
}

// resumeLateness runs one thread that burns resumeBurn after
// resumeBurn under resumeQuota per default period, so that the group is
// throttled every period, and returns, for each burn that a throttle
// stopped, how long after the nearest period boundary it ran again: its
// end less half a burn (its CPU time after the boundary is 0 to
// resumeBurn), against the boundaries the run's timeline placed (from
// its first kernel period's end, a period apart). That is the frame the
// model of a compared run takes (its boundaries where the measured run
// had them, sim.Plan.WithRunOf), so the figure holds both the kernel's
// delay (the refill's unthrottle wakes the idle CPU: tens of µs on this
// VM, a few tenths of a millisecond under emulation) and what the
// timeline's boundaries miss of the refill.
func resumeLateness(ctx context.Context, base lab.Config) ([]time.Duration, error) {
	cfg := base
	cfg.Limits = cgroup.Limits{Period: cgroup.DefaultPeriod, Quota: resumeQuota}
	cfg.Workload, cfg.Command = "periodic", nil
	cfg.WorkloadArgs = []string{"--burn-cpu", resumeBurn.String(), "--sleep", "0s", "--iterations", fmt.Sprint(resumeBurns), "--quiet"}
	cfg.Stdout, cfg.Stderr = io.Discard, io.Discard
	plan, err := lab.Prepare(cfg)
	if err != nil {
		return nil, err
	}
	tr, err := plan.Run(ctx)
	if err != nil {
		return nil, err
	}
	return resumesOf(tr, int64(resumeBurn)), nil
}

// resumesOf is, for each operation of tr that a throttle stopped (it
// took over a quarter of the period), how long after the nearest
// boundary of tr's kernel periods it ran again: its end less half of
// burn.
func resumesOf(tr *trace.Trace, burn int64) []time.Duration {
	if tr.Latency == nil {
		return nil
	}
	first := slices.IndexFunc(tr.Periods, func(p trace.Period) bool { return p.Kernel })
	if first < 0 {
		return nil
	}
	period := tr.Limits.Cgroup().PeriodOrDefault().Nanoseconds()
	grid := tr.Periods[first].EndNs
	var out []time.Duration
	for _, op := range tr.Latency.Samples {
		if op.WallNs < period/4 {
			continue
		}
		at := op.StartNs + op.WallNs - burn/2 - grid
		d := ((at+period/2)%period+period)%period - period/2
		out = append(out, time.Duration(d))
	}
	return out
}

// median is the middle of ds (the upper one of an even count), sorted.
func median(ds []time.Duration) time.Duration {
	slices.Sort(ds)
	return ds[len(ds)/2]
}

// wakeUsage is what each wake-up from a long sleep used in a run of
// them (one burn between sleeps of sim.LongSleep, many periods apart):
// the usage of the timeline's periods where the process ran, periods
// next to each other taken together (a wake-up across a boundary), but
// for the first (the process's start) and the last (its exit).
func wakeUsage(tr *trace.Trace) []time.Duration {
	var bursts []time.Duration
	ran := false // the period before ran
	for _, p := range tr.Periods {
		switch {
		case p.UsageNs > 0 && ran:
			bursts[len(bursts)-1] += time.Duration(p.UsageNs)
		case p.UsageNs > 0:
			bursts = append(bursts, time.Duration(p.UsageNs))
		}
		ran = p.UsageNs > 0
	}
	if len(bursts) < 3 {
		return nil
	}
	return bursts[1 : len(bursts)-1]
}
