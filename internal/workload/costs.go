package workload

import (
	"errors"
	"slices"
	"time"

	"github.com/cfsprobe/cfsprobe/internal/trace"
)

// Costs are what the C engine's process costs on this host beside its
// operations: CPU time that its group is charged and that no operation
// counts.
type Costs struct {
	// Start is the CPU time of the process from its start (exec, its
	// mappings, its threads) to its exit, less its operations: a process
	// that does one operation of a microsecond.
	Start time.Duration
	// Wake is the CPU time a thread spends around a sleep: the system
	// call, the switch back to it and the return, less the operations
	// between sleeps.
	Wake time.Duration
}

// costProbe is the engine's loop that ProcessCosts times: periodic, one
// thread, burns of costBurn of CPU time and sleeps of costSleep.
const (
	costBurn   = 10 * time.Microsecond
	costSleep  = time.Millisecond
	costWakes  = 100 // sleeps in the longer run
	costRounds = 3   // runs of each, the median taken
)

// ProcessCosts measures Costs on this host with the C engine, outside
// any group: the CPU time (wait4's rusage) of a periodic loop of one
// iteration (Start) and of one with costWakes sleeps more (Wake, per
// sleep), each run costRounds times and the median taken. It takes
// about a third of a second on an idle host (far longer under
// emulation, where each costs far more: what it is for).
func ProcessCosts() (Costs, error) {
	if !EngineEmbedded() {
		return Costs{}, errors.New("this cfsprobe was built without the C engine (build it with make)")
	}
	run := func(iterations int) (time.Duration, error) {
		var cpus []time.Duration
		for range costRounds {
			w := &periodic{trace.PeriodicParams{BurnCPU: costBurn, Sleep: costSleep, Iterations: iterations, Threads: 1, Quiet: true}}
			_, cpu, err := runNativeCPU(w, nil)
			if err != nil {
				return 0, err
			}
			cpus = append(cpus, cpu-time.Duration(iterations)*costBurn)
		}
		slices.Sort(cpus)
		return cpus[len(cpus)/2], nil
	}
	one, err := run(1)
	if err != nil {
		return Costs{}, err
	}
	more, err := run(1 + costWakes)
	if err != nil {
		return Costs{}, err
	}
	return Costs{Start: max(one, 0), Wake: max((more-one)/costWakes, 0)}, nil
}
