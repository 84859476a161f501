package workload

import (
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spf13/pflag"
	"golang.org/x/sys/unix"

	"github.com/cfsprobe/cfsprobe/internal/hostfs"
	"github.com/cfsprobe/cfsprobe/internal/trace"
)

func init() {
	register("parallel",
		"--threads workers doing fixed-size CPU events for --duration (like sysbench cpu)",
		`Each worker repeats one CPU event, the prime test sysbench cpu uses (trial
division of every number up to --max-prime), and times it. With more runnable
threads than the quota's CPUs, the group spends its quota early in each period
and every thread stalls until the next: events that straddle the stall take a
period instead of a fraction of a millisecond.

The workers run in a small static C program embedded in cfsprobe (the trace
says spec.params.engine = "c"): a Go process has runtime threads besides its
workers, and when demand equals the quota exactly (--threads 1 under a 1-CPU
quota) their bit of CPU makes the kernel throttle a few periods, which a C
program (sysbench cpu) does not see. A cfsprobe built without it (plain go
build instead of make) runs the workers in Go (engine = "go").

With fewer threads than usable CPUs, the process keeps to that many CPUs (the
last ones it may use; --pin=false turns this off), so that no other CPU takes
a slice of the group's quota for a helper thread.

An event's time depends on the CPU: the default --max-prime takes 0.3 ms on
one machine and 3 ms under emulation. --event sizes it by CPU time instead:
before the run, cfsprobe times events on this machine and takes the
--max-prime whose event takes about that long (the trace keeps both).

Examples:
  cfsprobe run --cpus 1 parallel --threads 2 --duration 5s
  cfsprobe run --cpus 1 parallel --threads 4 --event 1.3ms
`,
		func(fs *pflag.FlagSet) func() (Workload, error) {
			p := &parallel{}
			fs.IntVar(&p.Threads, "threads", runtime.NumCPU(), "worker threads")
			fs.DurationVar(&p.Duration, "duration", 5*time.Second, "how long to run")
			fs.IntVar(&p.MaxPrime, "max-prime", DefaultMaxPrime, "event size: test numbers up to this for primality")
			fs.DurationVar(&p.Event, "event", 0, "event size as CPU time on this machine: the --max-prime whose event takes about this long, timed before the run (instead of --max-prime)")
			fs.Int64Var(&p.Events, "events", 0, "stop after this many events in all (0: no limit)")
			fs.BoolVar(&p.Pin, "pin", true, "with fewer threads than usable CPUs, keep the whole process on that many CPUs, the last ones (see --help)")
			return func() (Workload, error) {
				if err := p.validate(); err != nil {
					return nil, err
				}
				if p.Event > 0 {
					if fs.Changed("max-prime") {
						return nil, errors.New("give --event or --max-prime, not both")
					}
					var err error
					if p.MaxPrime, err = MaxPrimeFor(p.Event); err != nil {
						return nil, fmt.Errorf("--event %v: %w", p.Event, err)
					}
				}
				return p, nil
			}
		})
}

// DefaultMaxPrime is the parallel workload's default event size,
// sysbench cpu's.
const DefaultMaxPrime = 10000

type parallel struct{ trace.ParallelParams }

// validate names the flag of the first parameter out of range.
func (p *parallel) validate() error {
	switch {
	case p.Threads < 1 || p.Threads > 4096:
		return fmt.Errorf("--threads must be between 1 and 4096")
	case p.Duration <= 0:
		return fmt.Errorf("--duration must be positive")
	case p.MaxPrime < 3:
		return fmt.Errorf("--max-prime must be at least 3")
	case p.Events < 0:
		return fmt.Errorf("--events must not be negative")
	case p.Event < 0 || p.Event > 0 && (p.Event < minEvent || p.Event > maxEvent):
		return fmt.Errorf("--event must be between %v and %v (or 0: --max-prime's size)", minEvent, maxEvent)
	}
	return nil
}

func (p *parallel) Name() string { return "parallel" }
func (p *parallel) Op() string   { return "event" }
func (p *parallel) Workers() int { return p.Threads }

func (p *parallel) Params() trace.Params {
	c := p.ParallelParams
	return trace.Params{Engine: Engine(p), Parallel: &c}
}

// ExpectedOp: an event's time depends on the CPU; nothing is set.
func (p *parallel) ExpectedOp() time.Duration { return 0 }

// Length: --duration, or less when --events are done first.
func (p *parallel) Length() time.Duration { return p.Duration }

func (p *parallel) Describe() string {
	return fmt.Sprintf("%s: CPU events for %v", threads(p.Threads), p.Duration)
}

// primeEvent is sysbench cpu's event: count primes below max by trial
// division up to the square root.
func primeEvent(maxPrime int) int {
	n := 0
	for c := 3; c < maxPrime; c++ {
		t := int(math.Sqrt(float64(c)))
		l := 2
		for ; l <= t; l++ {
			if c%l == 0 {
				break
			}
		}
		if l > t {
			n++
		}
	}
	return n
}

func (p *parallel) Run(rec *Recorder, _ io.Writer) error {
	// One P per worker: no idle P whose thread would spin looking for work.
	runtime.GOMAXPROCS(p.Threads)
	if p.Pin {
		pinProcess(p.Threads)
	}
	deadline := time.Now().Add(p.Duration)
	var done atomic.Int64
	var total atomic.Int64
	var wg sync.WaitGroup
	for th := 0; th < p.Threads; th++ {
		wg.Add(1)
		go func(th int) {
			defer wg.Done()
			tr := rec.Thread(th)
			primes := 0
			for {
				if p.Events > 0 && done.Add(1) > p.Events {
					break
				}
				// Yield to Go's scheduler between events. A goroutine that runs
				// for more than 10 ms gets preempted by the runtime, which
				// wakes other threads of the process: CPU time that counts
				// against the group's quota on top of the workers' and that
				// strands per-CPU quota slices on idle CPUs.
				runtime.Gosched()
				t0 := time.Now()
				if !t0.Before(deadline) {
					break
				}
				// No system call inside the timed region: with task-based
				// throttling (Linux 6.18+) a throttled task stops at its next
				// return to user space, and a syscall here would attract the
				// stall to the bookkeeping instead of the event.
				primes += primeEvent(p.MaxPrime)
				tr.Record(t0, time.Since(t0), 0)
			}
			total.Add(int64(primes))
		}(th)
	}
	wg.Wait()
	sink += uint64(total.Load())
	return nil
}

// The sizes --event may ask for: an event shorter than minEvent is
// mostly the loop around it, and one longer than maxEvent is not timed
// often enough for a latency distribution.
const (
	minEvent = 10 * time.Microsecond
	maxEvent = time.Second
)

// primeCostPower is how an event's CPU time grows with --max-prime: as
// its power 1.38 (the C engine's events of 10000, 20000 and 30000 took
// 0.30, 0.77 and 1.35 ms on this project's host, 2^1.38 and 3^1.38 times
// the first). The sizing below starts from it and corrects by timing.
const primeCostPower = 1.38

// sizes holds MaxPrimeFor's answers: one per --event per process, so
// that the runs of a suite and the simulations beside them have the
// same event.
var sizes sync.Map // time.Duration -> *sizing

type sizing struct {
	once     sync.Once
	maxPrime int
	err      error
}

// MaxPrimeFor is the --max-prime whose event takes about d of CPU time
// on this machine, in the engine the workload runs in: events of the
// default size are timed for 0.3 s, the size is scaled by
// primeCostPower, and timed again until the mean is within 3 % of d (at
// most four timings). It is measured once per process for each d.
func MaxPrimeFor(d time.Duration) (int, error) {
	v, _ := sizes.LoadOrStore(d, &sizing{})
	sz := v.(*sizing)
	sz.once.Do(func() {
		const tries, span, within = 4, 300 * time.Millisecond, 0.03
		mp := DefaultMaxPrime
		for i := 0; ; i++ {
			mean, _, err := timeEvents(mp, span)
			if err != nil {
				sz.err = fmt.Errorf("time the event of --max-prime %d: %w", mp, err)
				return
			}
			ratio := float64(d) / float64(mean)
			if math.Abs(ratio-1) <= within || i == tries-1 {
				sz.maxPrime = mp
				return
			}
			mp = max(3, min(int(float64(mp)*math.Pow(ratio, 1/primeCostPower)), math.MaxInt32))
		}
	})
	return sz.maxPrime, sz.err
}

// EventEvents is how many events EventCPU times at most: a p99.9 of
// their times is the second-slowest. Where they are slow (3 ms in the
// qemu guest) it times fewer, for 3 s: timed for one second there, the
// events' p99 came out at 7.3 ms once in three (a stall of a vCPU by
// the host), where the runs' is 4.4 to 5.5 ms.
const EventEvents = 2000

// EventCPU times events of the parallel workload with the given
// --max-prime on this machine, in the engine this binary runs the
// workload in (Engine): the C engine run alone, one thread outside any
// group, for EventEvents events or 3 s, whichever ends first; or, in a
// binary without it, the Go event timed in this process on the thread's
// CPU clock. It returns the mean CPU time of one event (the process's
// CPU time from its clock's start to its end, divided by its events) and
// the time each event took. The simulator calibrates its parallel
// workload with them: the Go event is some 15 % slower than the C one
// the runs use, and under emulation (the qemu guest) one event in a
// hundred takes 1.2 to 1.8 times the median.
func EventCPU(maxPrime int) (time.Duration, *trace.Latency, error) {
	return timeEvents(maxPrime, 3*time.Second)
}

// timeEvents is EventCPU for at most EventEvents events or the given
// span, whichever ends first.
func timeEvents(maxPrime int, span time.Duration) (time.Duration, *trace.Latency, error) {
	w := &parallel{trace.ParallelParams{Threads: 1, Duration: span, MaxPrime: maxPrime, Events: EventEvents}}
	if err := w.validate(); err != nil {
		return 0, nil, err
	}
	if Engine(w) == trace.EngineC {
		res, err := runNative(w, nil)
		if err != nil {
			return 0, nil, err
		}
		if res.Latency == nil || res.Latency.Count == 0 || res.SelfCPUNs <= res.StartCPUNs {
			return 0, nil, errors.New("the C engine timed no event")
		}
		return time.Duration((res.SelfCPUNs - res.StartCPUNs) / res.Latency.Count), res.Latency, nil
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	h := trace.NewHistogram()
	c0 := ThreadCPU()
	last, n, primes := c0, int64(0), 0
	for ; n < EventEvents && last-c0 < span; n++ {
		primes += primeEvent(maxPrime)
		now := ThreadCPU()
		_ = h.RecordValue(int64(now - last))
		last = now
	}
	sink += uint64(primes)
	return (last - c0) / time.Duration(n), trace.LatencyFromHistogram("event", h), nil
}

// pinProcess restricts every thread of the process to PinSet(n).
func pinProcess(n int) {
	want, ok := PinSet(n)
	if !ok {
		return
	}
	tasks, err := os.ReadDir(hostfs.Default().Proc("self", "task"))
	if err != nil {
		return
	}
	for _, t := range tasks {
		if tid, err := strconv.Atoi(t.Name()); err == nil {
			_ = unix.SchedSetaffinity(tid, &want)
		}
	}
}
