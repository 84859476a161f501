package workload

import (
	"fmt"
	"io"
	"math/rand/v2"
	"runtime"
	"sync"
	"time"

	"github.com/spf13/pflag"
)

func init() {
	register("bursty",
		"busy for --on, idle for --off, for --duration (seed 003's bursty workload)",
		`Busy-waits for --on of wall time (or, with --on-cpu, until that much thread CPU
time is spent, so that a throttled burst takes longer), then idles for --off,
until --duration has passed. The wall time of every burst is recorded.
--jitter adds a uniformly random amount in [-jitter, +jitter] to each idle
time, so that bursts do not settle at one offset inside the period when
on+off is a multiple of it.

The workers run in the small static C program embedded in cfsprobe (see
cfsprobe run parallel --help; spec.params.engine in the trace), so that the
group's CPU time is the bursts' and nothing else. With fewer threads than
usable CPUs the process keeps to that many CPUs, the last ones (--pin=false
turns this off): a thread that wakes on another CPU than the one it slept on
makes that CPU take a slice of the quota, while the CPU it left keeps up to
a millisecond of it unused until the end of the period.

Example: cfsprobe run --cpus 0.2 bursty --on 50ms --off 50ms --duration 5s
`,
		func(fs *pflag.FlagSet) func() (Workload, error) {
			b := &bursty{}
			fs.DurationVar(&b.on, "on", 50*time.Millisecond, "busy wall time per burst")
			fs.DurationVar(&b.onCPU, "on-cpu", 0, "busy until this much thread CPU time is spent (instead of --on of wall time)")
			fs.DurationVar(&b.off, "off", 50*time.Millisecond, "idle time between bursts")
			fs.DurationVar(&b.jitter, "jitter", 0, "random +/- variation of each idle time")
			fs.DurationVar(&b.duration, "duration", 5*time.Second, "how long to run")
			fs.IntVar(&b.threads, "threads", 1, "threads, each running the same pattern")
			fs.Uint64Var(&b.seed, "seed", 1, "random seed for --jitter")
			fs.BoolVar(&b.pin, "pin", true, "with fewer threads than usable CPUs, keep the whole process on that many CPUs, the last ones")
			return func() (Workload, error) {
				switch {
				case b.on <= 0 && b.onCPU <= 0:
					return nil, fmt.Errorf("--on must be positive")
				case b.onCPU < 0:
					return nil, fmt.Errorf("--on-cpu must be positive")
				case b.off < 0:
					return nil, fmt.Errorf("--off must not be negative")
				case b.jitter < 0 || b.jitter > b.off:
					return nil, fmt.Errorf("--jitter must be between 0 and --off (%v)", b.off)
				case b.duration <= 0:
					return nil, fmt.Errorf("--duration must be positive")
				case b.threads < 1 || b.threads > 1024:
					return nil, fmt.Errorf("--threads must be between 1 and 1024")
				}
				return b, nil
			}
		})
}

type bursty struct {
	on, onCPU, off, jitter, duration time.Duration
	threads                          int
	seed                             uint64
	pin                              bool
}

func (b *bursty) Name() string { return "bursty" }
func (b *bursty) Op() string   { return "burst" }
func (b *bursty) Params() map[string]any {
	return map[string]any{"on_ns": b.on, "on_cpu_ns": b.onCPU, "off_ns": b.off, "jitter_ns": b.jitter, "duration_ns": b.duration, "threads": b.threads, "pin": b.pin}
}

func (b *bursty) Run(rec *Recorder, _ io.Writer) error {
	lock := startWorkers(b.threads, b.onCPU > 0)
	if b.pin {
		pinProcess(b.threads)
	}
	deadline := time.Now().Add(b.duration)
	var wg sync.WaitGroup
	var mu sync.Mutex
	for th := 0; th < b.threads; th++ {
		wg.Add(1)
		go func(th int) {
			defer wg.Done()
			if lock {
				runtime.LockOSThread()
				defer runtime.UnlockOSThread()
			}
			tr := rec.Thread(th)
			rng := rand.New(rand.NewPCG(b.seed, uint64(th)))
			seed := uint64(th + 7)
			for time.Now().Before(deadline) {
				t0 := time.Now()
				c0 := ThreadCPU()
				seed = burn(seed, t0, b.on, c0, b.onCPU, lock)
				// CPU clock (a system call, where a throttled task may be
				// stopped) before the wall clock, so a stall counts.
				cpu := ThreadCPU() - c0
				tr.Record(t0, time.Since(t0), cpu)
				off := b.off
				if b.jitter > 0 {
					off += time.Duration(rng.Int64N(int64(2*b.jitter)+1)) - b.jitter
				}
				if rest := time.Until(deadline); rest < off {
					off = max(rest, 0)
				}
				time.Sleep(off)
			}
			mu.Lock()
			sink += seed
			mu.Unlock()
		}(th)
	}
	wg.Wait()
	return nil
}
