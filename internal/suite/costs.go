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
// of CPU time and sleeps of costSleep, costRounds times each.
const (
	costBurn   = 10 * time.Microsecond
	costSleep  = time.Millisecond
	costWakes  = 100 // sleeps in the longer run
	costRounds = 3   // runs of each; the median is taken
)

// MeasureCosts measures what the built-in workloads' process costs its
// group on this host beside its operations, as the lab runs it (base
// gives the parent group and the machine; a group of its own without a
// limit each time): the group's usage in a run of one 10 µs burn, less
// the burn, is the process's start (its exec, its mappings, its thread,
// its exit, and the lab's way of starting it in the group); what a run
// with 100 sleeps of 1 ms more used, less its burns, per sleep is a
// wake-up. Each is run three times and the median taken. A simulation
// compared with the lab's runs charges them (sim.Plan.WithCosts): a
// start costs 0.9 to 1.4 ms on this 2-CPU VM, and a wake-up about 25 µs,
// but four to eight times as much under emulation (the qemu guest).
func MeasureCosts(ctx context.Context, base lab.Config) (sim.Costs, error) {
	run := func(iterations int) (time.Duration, error) {
		var used []time.Duration
		for range costRounds {
			cfg := base
			cfg.Limits = cgroup.Limits{Period: cgroup.DefaultPeriod} // no quota
			cfg.Workload, cfg.Command = "periodic", nil
			cfg.WorkloadArgs = []string{"--burn-cpu", costBurn.String(), "--sleep", costSleep.String(), "--iterations", fmt.Sprint(iterations), "--quiet"}
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
		}
		slices.Sort(used)
		return used[len(used)/2], nil
	}
	one, err := run(1)
	if err != nil {
		return sim.Costs{}, fmt.Errorf("measure the workload's start: %w", err)
	}
	more, err := run(1 + costWakes)
	if err != nil {
		return sim.Costs{}, fmt.Errorf("measure a wake-up: %w", err)
	}
	return sim.Costs{Start: max(one, time.Microsecond), Wake: max((more-one)/costWakes, time.Nanosecond)}, nil
}
