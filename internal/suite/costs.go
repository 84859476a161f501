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
// of CPU time and sleeps of sim.ShortSleep (costWakes of them) or
// sim.LongSleep (costLongWakes), costRounds times each.
const (
	costBurn      = 10 * time.Microsecond
	costWakes     = 100 // short sleeps in the run of short sleeps
	costLongWakes = 5   // long sleeps in the run of long sleeps
	costRounds    = 3   // runs of each; the median is taken
)

// MeasureCosts measures what the built-in workloads' process costs its
// group on this host beside its operations, as the lab runs it (base
// gives the parent group and the machine; a group of its own without a
// limit each time): the group's usage in a run of one 10 µs burn, less
// the burn, is the process's start (its exec, its mappings, its thread,
// its exit, and the lab's way of starting it in the group); what a run
// with 100 sleeps of 1 ms more used, less its burns, per sleep is a
// wake-up; and in a run with 5 sleeps of 1 s, what the process used in
// the periods where it woke (but the first and the last, its start and
// its exit: wakeUsage), less the burn, is a wake-up from a long sleep
// (sim.Costs.WakeAfter: caches gone cold), at least the short one's.
// Each is run three times and the median taken (the long sleeps take
// 15 s; the median of their 12 wake-ups). A long sleep's wake-up is not
// taken from the difference of two runs' usage, as the short one's is:
// in the qemu guest the start's cost moves by a millisecond or two from
// run to run, which over 5 sleeps made a wake-up 52 to 1,011 µs from
// suite to suite. A
// simulation compared with the lab's runs charges them
// (sim.Plan.WithCosts): a start costs 0.5 to 1.4 ms on this 2-CPU VM, a
// wake-up 15 to 35 µs after 1 ms of sleep and 47 to 58 µs after 1 s, and
// under emulation (the qemu guest) 5 to 7 ms, 50 to 130 µs and 204 to
// 287 µs.
func MeasureCosts(ctx context.Context, base lab.Config) (sim.Costs, error) {
	var wakes []time.Duration // of the runs of long sleeps
	run := func(sleep time.Duration, iterations int) (time.Duration, error) {
		var used []time.Duration
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
			used = append(used, time.Duration(tr.Summary.UsageNs)-time.Duration(iterations)*costBurn)
			if sleep == sim.LongSleep {
				wakes = append(wakes, wakeUsage(tr)...)
			}
		}
		slices.Sort(used)
		return used[len(used)/2], nil
	}
	one, err := run(sim.ShortSleep, 1)
	if err != nil {
		return sim.Costs{}, fmt.Errorf("measure the workload's start: %w", err)
	}
	more, err := run(sim.ShortSleep, 1+costWakes)
	if err != nil {
		return sim.Costs{}, fmt.Errorf("measure a wake-up: %w", err)
	}
	if _, err := run(sim.LongSleep, 1+costLongWakes); err != nil { // its wake-ups, not its usage
		return sim.Costs{}, fmt.Errorf("measure a wake-up from a long sleep: %w", err)
	}
	if len(wakes) == 0 {
		return sim.Costs{}, fmt.Errorf("measure a wake-up from a long sleep: the runs of %d sleeps of %v showed no wake-up between the process's start and its exit", costLongWakes, sim.LongSleep)
	}
	slices.Sort(wakes)
	wake := max((more-one)/costWakes, time.Nanosecond)
	return sim.Costs{Start: max(one, time.Microsecond), Wake: wake, WakeLong: max(wakes[len(wakes)/2]-costBurn, wake)}, nil
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
