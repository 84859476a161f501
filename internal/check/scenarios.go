package check

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/cfsprobe/cfsprobe/internal/cgroup"
	"github.com/cfsprobe/cfsprobe/internal/hostfs"
	"github.com/cfsprobe/cfsprobe/internal/lab"
	"github.com/cfsprobe/cfsprobe/internal/trace"
)

// Suite is the Scenario.Suite of the traces the check records.
const Suite = "check"

// The check's limits. Seed 000 used a quota of 20 ms per 100 ms period
// (docker --cpu-quota 20000 --cpu-period 100000); the period is the
// kernel's and Kubernetes' default.
const (
	Period    = 100 * time.Millisecond
	SeedQuota = 20 * time.Millisecond
	// minCFSRQRuntime is what a CPU keeps of a slice when the group's
	// last task there sleeps (the kernel's min_cfs_rq_runtime): the most
	// the stranded-slice defect loses per CPU and period.
	minCFSRQRuntime = time.Millisecond
	// runFor is how long every run lasts; they run side by side, so the
	// check takes about this long.
	runFor = 16 * time.Second
)

// Scenario is one run of the live check.
type Scenario struct {
	Name        string
	Description string
	Limits      cgroup.Limits
	Workload    string
	Args        []string
}

// Scenarios returns the check's runs for a host with cpus online CPUs:
//
//   - seed-1000ms and seed-250ms: seed 000's program, one thread burning
//     5 ms of wall time and sleeping, under 20 ms / 100 ms. The group is
//     idle for whole periods between burns, so its period timer stops and
//     restarts at every burn: the slice-expiry defect (3.16 to 4.17)
//     throttled most of those burns for the rest of a period.
//   - spread: one thread per CPU, each bursting briefly twice a period at
//     random moments, 20 % of the quota in all. The quota is 1 ms per CPU,
//     and at least two slices (sliceUs, kernel.sched_cfs_bandwidth_slice_us):
//     a kernel with the stranded-slice defect (4.18 to 5.3) loses up to
//     1 ms per CPU that ran the group in a period, so the group runs out
//     of quota with 80 % of it unused (from about 10 CPUs on: below that
//     the defect cannot waste enough to show, nor to matter much); on a
//     correct kernel two CPUs can take a whole slice at the same moment
//     and leave quota for the others.
func Scenarios(cpus int, sliceUs int64) []Scenario {
	cpus = max(cpus, 1)
	if sliceUs <= 0 {
		sliceUs = 5000
	}
	seed := cgroup.Limits{Period: Period, Quota: SeedQuota}
	periodic := func(sleep time.Duration) Scenario {
		burn := 5 * time.Millisecond
		n := int(runFor/(sleep+burn)) + 1
		return Scenario{
			Name:        fmt.Sprintf("seed-%dms", sleep.Milliseconds()),
			Description: fmt.Sprintf("seed 000: 1 thread, 5ms burns, %v sleeps, under 20ms/100ms (the slice-expiry pattern of 3.16 to 4.17)", sleep),
			Limits:      seed, Workload: "periodic",
			Args: []string{"--burn", burn.String(), "--sleep", sleep.String(), "--iterations", fmt.Sprint(n), "--quiet"},
		}
	}
	quota := max(2*time.Duration(sliceUs)*time.Microsecond, time.Duration(cpus)*minCFSRQRuntime)
	// Two bursts per thread and period, 20 % of the quota in all.
	cycle := Period / 2
	on := (quota / 10 / time.Duration(cpus)).Round(10 * time.Microsecond)
	on = max(on, 50*time.Microsecond)
	off := cycle - on
	jitter := (off / 2).Round(time.Millisecond)
	spread := Scenario{
		Name: "spread",
		Description: fmt.Sprintf("%d threads (one per CPU): %v bursts every %v at random, %.0f%% of a %v/%v quota (the stranded-slice pattern of 4.18 to 5.3)",
			cpus, on, cycle, 100*float64(2*on*time.Duration(cpus))/float64(quota), quota, Period),
		Limits:   cgroup.Limits{Period: Period, Quota: quota},
		Workload: "bursty",
		Args: []string{"--threads", fmt.Sprint(cpus), "--on", on.String(), "--off", off.String(),
			"--jitter", jitter.String(), "--duration", runFor.String()},
	}
	return []Scenario{periodic(time.Second), periodic(250 * time.Millisecond), spread}
}

// Config says where the check runs.
type Config struct {
	// FS is the machine whose /proc, /sys and cgroup mounts are used
	// (the zero FS: this one).
	FS hostfs.FS
	// Parent is the group under which the runs' groups are made.
	Parent string
	// Self is the cfsprobe executable (default: this one).
	Self string
	// Stderr receives the workloads' diagnostics.
	Stderr io.Writer
	// CPUs and SliceUs override the number of online CPUs and
	// kernel.sched_cfs_bandwidth_slice_us.
	CPUs    int
	SliceUs int64
}

// Check is a validated live check: nothing was created yet.
type Check struct {
	scenarios []Scenario
	plans     []*lab.Plan
}

// Prepare validates every run of the check. Its input errors are
// *lab.UserError.
func Prepare(cfg Config) (*Check, error) {
	if cfg.Stderr == nil {
		cfg.Stderr = os.Stderr
	}
	if cfg.CPUs <= 0 {
		cfg.CPUs = cgroup.OnlineCPUs(cfg.FS)
	}
	if cfg.SliceUs <= 0 {
		cfg.SliceUs = cgroup.SliceUs(cfg.FS)
	}
	c := &Check{scenarios: Scenarios(cfg.CPUs, cfg.SliceUs)}
	for _, s := range c.scenarios {
		p, err := lab.Prepare(lab.Config{
			Limits: s.Limits, Workload: s.Workload, WorkloadArgs: s.Args,
			Stdout: cfg.Stderr, Stderr: cfg.Stderr, FS: cfg.FS,
			Parent: cfg.Parent, Self: cfg.Self,
		})
		if err != nil {
			return nil, err
		}
		c.plans = append(c.plans, p)
	}
	return c, nil
}

// Scenarios lists the runs the check makes.
func (c *Check) Scenarios() []Scenario { return append([]Scenario{}, c.scenarios...) }

// Run makes the runs side by side, each in its own group, and returns
// their traces in the order of Scenarios. The groups are independent and
// together use a few percent of the machine, so running them at once
// changes none of them; it keeps the check within 30 seconds. If a run
// fails the others are stopped. Cancelling ctx stops them all and returns
// lab.ErrInterrupted.
func (c *Check) Run(ctx context.Context) ([]*trace.Trace, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	traces := make([]*trace.Trace, len(c.plans))
	errs := make([]error, len(c.plans))
	var wg sync.WaitGroup
	for i, p := range c.plans {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tr, err := p.Run(ctx)
			if err != nil {
				errs[i] = err
				cancel()
				return
			}
			s := c.scenarios[i]
			tr.Scenario = &trace.Scenario{Suite: Suite, Name: s.Name, Description: s.Description, Repetition: 1, Verdict: "none"}
			traces[i] = tr
		}()
	}
	wg.Wait()
	// The first real failure, not the interruptions it caused.
	var interrupted bool
	for i, err := range errs {
		switch {
		case err == nil:
		case errors.Is(err, lab.ErrInterrupted):
			interrupted = true
		default:
			return nil, fmt.Errorf("run %s: %w", c.scenarios[i].Name, err)
		}
	}
	if interrupted {
		return nil, lab.ErrInterrupted
	}
	return traces, nil
}
