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
)

// The runs MeasureCosts times: periodic, one thread, burns of costBurn
// of CPU time and sleeps of sim.ShortSleep (none, or costWakes of them)
// or sim.LongSleep (costLongWakes), costRounds times each.
const (
	costBurn      = 10 * time.Microsecond
	costWakes     = 100 // short sleeps in the run of short sleeps
	costLongWakes = 5   // long sleeps in the run of long sleeps
	costRounds    = 3   // runs of each; the median is taken
)

// MeasureCosts measures what a thread of the built-in workloads costs
// its group on this host beside its operations, as the lab runs it (base
// gives the parent group and the machine; a group of its own without a
// limit each time). What a run used beside its operations is its group's
// usage less its burns and less its process's start and exit, as the
// workload reported them (trace.Process): its thread's own (its making,
// its end and the join: sim.Costs.Thread) and its wake-ups. A run of one
// burn and no sleep gives the thread's own; what a run of 100 sleeps of 1 ms used so beyond it, per sleep,
// is a wake-up; what a run of 5 sleeps of 1 s did, a wake-up from a long
// sleep (sim.Costs.WakeAfter: caches gone cold), at least the short
// one's. Each is run three times and the median taken (the long sleeps
// take 15 s). A simulation compared with the lab's runs charges them
// (sim.Plan.WithCosts), and each run's own start and exit
// (sim.Plan.WithRunOf).
func MeasureCosts(ctx context.Context, base lab.Config) (sim.Costs, error) {
	run := func(sleep time.Duration, iterations int) (time.Duration, error) {
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
		}
		slices.Sort(rest)
		return rest[len(rest)/2], nil
	}
	none, err := run(sim.ShortSleep, 1)
	if err != nil {
		return sim.Costs{}, fmt.Errorf("measure a run without sleeps: %w", err)
	}
	short, err := run(sim.ShortSleep, 1+costWakes)
	if err != nil {
		return sim.Costs{}, fmt.Errorf("measure a wake-up: %w", err)
	}
	long, err := run(sim.LongSleep, 1+costLongWakes)
	if err != nil {
		return sim.Costs{}, fmt.Errorf("measure a wake-up from a long sleep: %w", err)
	}
	wake := max((short-none)/costWakes, time.Nanosecond)
	return sim.Costs{Thread: max(none, 0), Wake: wake, WakeLong: max((long-none)/costLongWakes, wake)}, nil
}
