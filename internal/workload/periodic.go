package workload

import (
	"fmt"
	"io"
	"runtime"
	"sync"
	"time"

	"github.com/spf13/pflag"
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
			fs.DurationVar(&p.burn, "burn", 5*time.Millisecond, "wall time to burn CPU per iteration")
			fs.DurationVar(&p.burnCPU, "burn-cpu", 0, "burn until this much thread CPU time is spent (instead of --burn of wall time)")
			fs.DurationVar(&p.sleep, "sleep", 100*time.Millisecond, "sleep between burns")
			fs.IntVar(&p.iterations, "iterations", 20, "number of burns (per thread)")
			fs.IntVar(&p.threads, "threads", 1, "threads, each running the same loop")
			fs.BoolVar(&p.quiet, "quiet", false, "do not print a line per iteration")
			return func() (Workload, error) {
				switch {
				case p.burn <= 0 && p.burnCPU <= 0:
					return nil, fmt.Errorf("--burn must be positive")
				case p.burnCPU < 0:
					return nil, fmt.Errorf("--burn-cpu must be positive")
				case p.sleep < 0:
					return nil, fmt.Errorf("--sleep must not be negative")
				case p.iterations < 1:
					return nil, fmt.Errorf("--iterations must be at least 1")
				case p.threads < 1 || p.threads > 1024:
					return nil, fmt.Errorf("--threads must be between 1 and 1024")
				}
				return p, nil
			}
		})
}

type periodic struct {
	burn, burnCPU, sleep time.Duration
	iterations, threads  int
	quiet                bool
}

func (p *periodic) Name() string { return "periodic" }
func (p *periodic) Op() string   { return "burn" }
func (p *periodic) Params() map[string]any {
	return map[string]any{"burn_ns": p.burn, "burn_cpu_ns": p.burnCPU, "sleep_ns": p.sleep, "iterations": p.iterations, "threads": p.threads}
}

func (p *periodic) Run(rec *Recorder, out io.Writer) error {
	lock := startWorkers(p.threads, p.burnCPU > 0)
	start := time.Now()
	var mu sync.Mutex
	var wg sync.WaitGroup
	for th := 0; th < p.threads; th++ {
		wg.Add(1)
		go func(th int) {
			defer wg.Done()
			if lock {
				runtime.LockOSThread()
				defer runtime.UnlockOSThread()
			}
			tr := rec.Thread(th)
			seed := uint64(th + 1)
			for i := 0; i < p.iterations; i++ {
				t0 := time.Now()
				c0 := ThreadCPU()
				seed = burn(seed, t0, p.burn, c0, p.burnCPU, lock)
				// Read the CPU clock (a system call, where a throttled task may
				// be stopped) before the wall clock, so a stall counts.
				cpu := ThreadCPU() - c0
				wall := time.Since(t0)
				tr.Record(t0, wall, cpu)
				if !p.quiet {
					now := time.Now()
					prefix := ""
					if p.threads > 1 {
						prefix = fmt.Sprintf("{%d}", th)
					}
					mu.Lock()
					fmt.Fprintf(out, "%s %s[%d] burn took %dms, real time so far: %dms, cpu time so far: %dms\n",
						now.Format("2006/01/02 15:04:05"), prefix, i, wall.Round(time.Millisecond).Milliseconds(),
						now.Sub(start).Milliseconds(), ProcessCPU().Milliseconds())
					mu.Unlock()
				}
				if i < p.iterations-1 {
					time.Sleep(p.sleep)
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
