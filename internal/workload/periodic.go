package workload

import (
	"fmt"
	"io"
	"runtime"
	"sync"
	"time"

	"github.com/spf13/pflag"

	"github.com/cfsprobe/cfsprobe/internal/trace"
)

func init() {
	register("periodic",
		"burn CPU for a short time, sleep, repeat (the \"Overly aggressive CFS\" program)",
		`Each iteration burns CPU in small chunks until --burn of wall time has passed
(or of thread CPU time, with --burn-cpu), then sleeps --sleep. Unless --quiet,
each iteration prints one line: the burn's wall time, the real time so far and
the CPU time so far. Under a quota that the workload stays far below, every
burn should take --burn; a kernel that throttles such a group shows burns of
about one period (100 ms) instead.

The loop runs in the small static C program embedded in cfsprobe (see
cfsprobe run parallel --help; spec.params.engine in the trace), so that
nothing else of the workload's process competes with a burn.

Example: cfsprobe run --cpus 0.2 periodic --burn 5ms --sleep 100ms --iterations 50
`,
		func(fs *pflag.FlagSet) func() (Workload, error) {
			p := &periodic{}
			fs.DurationVar(&p.Burn, "burn", 5*time.Millisecond, "wall time to burn CPU per iteration")
			fs.DurationVar(&p.BurnCPU, "burn-cpu", 0, "burn until this much thread CPU time is spent (instead of --burn of wall time)")
			fs.DurationVar(&p.Sleep, "sleep", 100*time.Millisecond, "sleep between burns")
			fs.IntVar(&p.Iterations, "iterations", 20, "number of burns (per thread)")
			fs.IntVar(&p.Threads, "threads", 1, "threads, each running the same loop")
			fs.BoolVar(&p.Quiet, "quiet", false, "do not print a line per iteration")
			return func() (Workload, error) {
				if err := p.validate(); err != nil {
					return nil, err
				}
				return p, nil
			}
		})
}

type periodic struct{ trace.PeriodicParams }

// validate names the flag of the first parameter out of range.
func (p *periodic) validate() error {
	switch {
	case p.Burn <= 0 && p.BurnCPU <= 0:
		return fmt.Errorf("--burn must be positive")
	case p.BurnCPU < 0:
		return fmt.Errorf("--burn-cpu must be positive")
	case p.Sleep < 0:
		return fmt.Errorf("--sleep must not be negative")
	case p.Iterations < 1:
		return fmt.Errorf("--iterations must be at least 1")
	case p.Threads < 1 || p.Threads > 1024:
		return fmt.Errorf("--threads must be between 1 and 1024")
	}
	return nil
}

func (p *periodic) Name() string { return "periodic" }
func (p *periodic) Op() string   { return "burn" }
func (p *periodic) Workers() int { return p.Threads }

func (p *periodic) Params() trace.Params {
	c := p.PeriodicParams
	return trace.Params{Engine: Engine(p), Periodic: &c}
}

// ExpectedOp: a burn lasts --burn-cpu when it is set and nothing else
// runs, else --burn.
func (p *periodic) ExpectedOp() time.Duration {
	if p.BurnCPU > 0 {
		return p.BurnCPU
	}
	return p.Burn
}

// Length: the burns, and a sleep between two.
func (p *periodic) Length() time.Duration {
	n := time.Duration(p.Iterations)
	return n*p.ExpectedOp() + (n-1)*p.Sleep
}

func (p *periodic) Describe() string {
	what := "burns"
	if p.BurnCPU > 0 {
		what = "CPU burns"
	}
	return fmt.Sprintf("%s: %v %s, sleep %v, %d times", threads(p.Threads), p.ExpectedOp(), what, p.Sleep, p.Iterations)
}

func (p *periodic) Run(rec *Recorder, out io.Writer) error {
	lock := startWorkers(p.Threads, p.BurnCPU > 0)
	start := time.Now()
	var mu sync.Mutex
	var wg sync.WaitGroup
	for th := 0; th < p.Threads; th++ {
		wg.Add(1)
		go func(th int) {
			defer wg.Done()
			if lock {
				runtime.LockOSThread()
				defer runtime.UnlockOSThread()
			}
			tr := rec.Thread(th)
			seed := uint64(th + 1)
			for i := 0; i < p.Iterations; i++ {
				t0 := time.Now()
				c0 := ThreadCPU()
				seed = burn(seed, t0, p.Burn, c0, p.BurnCPU, lock)
				// Read the CPU clock (a system call, where a throttled task may
				// be stopped) before the wall clock, so a stall counts.
				cpu := ThreadCPU() - c0
				wall := time.Since(t0)
				tr.Record(t0, wall, cpu)
				if !p.Quiet {
					now := time.Now()
					prefix := ""
					if p.Threads > 1 {
						prefix = fmt.Sprintf("{%d}", th)
					}
					mu.Lock()
					fmt.Fprintf(out, "%s %s[%d] burn took %dms, real time so far: %dms, cpu time so far: %dms\n",
						now.Format("2006/01/02 15:04:05"), prefix, i, wall.Round(time.Millisecond).Milliseconds(),
						now.Sub(start).Milliseconds(), ProcessCPU().Milliseconds())
					mu.Unlock()
				}
				if i < p.Iterations-1 {
					time.Sleep(p.Sleep)
				}
			}
			mu.Lock()
			sink += seed
			mu.Unlock()
		}(th)
	}
	wg.Wait()
	return nil
}
