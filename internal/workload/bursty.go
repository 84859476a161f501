package workload

import (
	"fmt"
	"io"
	"math/rand/v2"
	"runtime"
	"sync"
	"time"

	"github.com/spf13/pflag"

	"github.com/cfsprobe/cfsprobe/internal/trace"
)

func init() {
	register("bursty",
		"busy for --on, idle for --off (or a burst --every), for --duration (seed 003's bursty workload)",
		`Busy-waits for --on of wall time (or, with --on-cpu, until that much thread CPU
time is spent, so that a throttled burst takes longer), then idles for --off,
until --duration has passed. The wall time of every burst is recorded.
--jitter adds a uniformly random amount in [-jitter, +jitter] to each idle
time, so that bursts do not settle at one offset inside the period when
on+off is a multiple of it.

Each thread idles after its own burst, so a burst that a limit stretches
delays the thread's next one, and threads that began together drift
apart (a closed loop). --every instead starts a burst every --every from
the start in every thread, at once when the one before ended later, as
requests that arrive on their own schedule do (an open loop): 4 threads
that burn 40 ms of CPU once a second keep bursting together under any
limit.

The workers run in the small static C program embedded in cfsprobe (see
cfsprobe run parallel --help; spec.params.engine in the trace), so that the
group's CPU time is the bursts' and nothing else. With fewer threads than
usable CPUs the process keeps to that many CPUs, the last ones (--pin=false
turns this off): a thread that wakes on another CPU than the one it slept on
makes that CPU take a slice of the quota, while the CPU it left keeps up to
a millisecond of it unused until the end of the period.

Example: cfsprobe run --cpus 0.2 bursty --on 50ms --off 50ms --duration 5s
         cfsprobe run --cpus 0.2 bursty --threads 4 --on-cpu 40ms --every 1s --duration 20s
`,
		func(fs *pflag.FlagSet) func() (Workload, error) {
			b := &bursty{}
			fs.DurationVar(&b.On, "on", 50*time.Millisecond, "busy wall time per burst")
			fs.DurationVar(&b.OnCPU, "on-cpu", 0, "busy until this much thread CPU time is spent (instead of --on of wall time)")
			fs.DurationVar(&b.Off, "off", 50*time.Millisecond, "idle time between bursts")
			fs.DurationVar(&b.Jitter, "jitter", 0, "random +/- variation of each idle time")
			fs.DurationVar(&b.Every, "every", 0, "start a burst this often from the start, whenever the last one ended (instead of --off)")
			fs.DurationVar(&b.Duration, "duration", 5*time.Second, "how long to run")
			fs.IntVar(&b.Threads, "threads", 1, "threads, each running the same pattern")
			fs.Uint64Var(&b.Seed, "seed", trace.DefaultBurstySeed, "random seed for --jitter")
			fs.BoolVar(&b.Pin, "pin", true, "with fewer threads than usable CPUs, keep the whole process on that many CPUs, the last ones")
			return func() (Workload, error) {
				if b.Every > 0 && !fs.Changed("off") {
					b.Off = 0 // --off's default does not apply
				}
				if err := b.validate(); err != nil {
					return nil, err
				}
				return b, nil
			}
		})
}

type bursty struct{ trace.BurstyParams }

// validate names the flag of the first parameter out of range.
func (b *bursty) validate() error {
	switch {
	case b.On <= 0 && b.OnCPU <= 0:
		return fmt.Errorf("--on must be positive")
	case b.OnCPU < 0:
		return fmt.Errorf("--on-cpu must be positive")
	case b.Off < 0:
		return fmt.Errorf("--off must not be negative")
	case b.Every < 0:
		return fmt.Errorf("--every must not be negative")
	case b.Every > 0 && b.Off+b.Jitter > 0:
		return fmt.Errorf("--every spaces the bursts from the start, --off and --jitter from the end of each: give one or the other")
	case b.Jitter < 0 || b.Jitter > b.Off:
		return fmt.Errorf("--jitter must be between 0 and --off (%v)", b.Off)
	case b.Duration <= 0:
		return fmt.Errorf("--duration must be positive")
	case b.Threads < 1 || b.Threads > 1024:
		return fmt.Errorf("--threads must be between 1 and 1024")
	}
	return nil
}

func (b *bursty) Name() string { return "bursty" }
func (b *bursty) Op() string   { return "burst" }
func (b *bursty) Workers() int { return b.Threads }

func (b *bursty) Params() trace.Params {
	c := b.BurstyParams
	return trace.Params{Engine: Engine(b), Bursty: &c}
}

// ExpectedOp: a burst lasts --on-cpu when it is set and nothing else
// runs, else --on.
func (b *bursty) ExpectedOp() time.Duration {
	if b.OnCPU > 0 {
		return b.OnCPU
	}
	return b.On
}

func (b *bursty) Length() time.Duration { return b.Duration }

func (b *bursty) Describe() string {
	what := "bursts"
	if b.OnCPU > 0 {
		what = "CPU bursts"
	}
	if b.Every > 0 {
		return fmt.Sprintf("%s: %v %s, one every %v, for %v", threads(b.Threads), b.ExpectedOp(), what, b.Every, b.Duration)
	}
	idle := b.Off.String()
	if b.Jitter > 0 {
		idle += "±" + b.Jitter.String()
	}
	return fmt.Sprintf("%s: %v %s, idle %s, for %v", threads(b.Threads), b.ExpectedOp(), what, idle, b.Duration)
}

func (b *bursty) Run(rec *Recorder, _ io.Writer) error {
	lock := startWorkers(b.Threads, b.OnCPU > 0)
	if b.Pin {
		pinProcess(b.Threads)
	}
	start := time.Now()
	deadline := start.Add(b.Duration)
	var wg sync.WaitGroup
	var mu sync.Mutex
	for th := 0; th < b.Threads; th++ {
		wg.Add(1)
		go func(th int) {
			defer wg.Done()
			if lock {
				runtime.LockOSThread()
				defer runtime.UnlockOSThread()
			}
			tr := rec.Thread(th)
			jitter := Jitter(b.BurstyParams, trace.EngineGo, th)
			seed := uint64(th + 7)
			for k := 1; time.Now().Before(deadline); k++ {
				t0 := time.Now()
				c0 := ThreadCPU()
				seed = burn(seed, t0, b.On, c0, b.OnCPU, lock)
				// CPU clock (a system call, where a throttled task may be
				// stopped) before the wall clock, so a stall counts.
				cpu := ThreadCPU() - c0
				tr.Record(t0, time.Since(t0), cpu)
				off := b.Off + jitter()
				if b.Every > 0 {
					off = max(time.Until(start.Add(time.Duration(k)*b.Every)), 0)
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

// Jitter returns the idle-time jitter of thread th (from 0) of a bursty
// workload, draw after draw, as the engine (trace.EngineC or
// trace.EngineGo) that runs it draws it from p.Seed: each call gives the
// amount added to p.Off, uniform in [-p.Jitter, +p.Jitter] (always 0
// without jitter). The Go workload draws through it; the C engine's
// burst_work draws the same sequence in C (splitmix64 seeded with
// seed*1000003 + thread), and the simulator replays it.
func Jitter(p trace.BurstyParams, engine string, th int) func() time.Duration {
	if p.Jitter <= 0 {
		return func() time.Duration { return 0 }
	}
	span := uint64(2*p.Jitter) + 1
	if engine == trace.EngineC {
		s := p.Seed*1000003 + uint64(th)
		return func() time.Duration {
			s += 0x9e3779b97f4a7c15
			z := s
			z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
			z = (z ^ (z >> 27)) * 0x94d049bb133111eb
			z ^= z >> 31
			return time.Duration(z%span) - p.Jitter
		}
	}
	rng := rand.New(rand.NewPCG(p.Seed, uint64(th)))
	return func() time.Duration { return time.Duration(rng.Int64N(int64(span))) - p.Jitter }
}
