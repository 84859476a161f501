package workload

import (
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

Example: cfsprobe run --cpus 1 parallel --threads 2 --duration 5s
`,
		func(fs *pflag.FlagSet) func() (Workload, error) {
			p := &parallel{}
			fs.IntVar(&p.threads, "threads", runtime.NumCPU(), "worker threads")
			fs.DurationVar(&p.duration, "duration", 5*time.Second, "how long to run")
			fs.IntVar(&p.maxPrime, "max-prime", 10000, "event size: test numbers up to this for primality")
			fs.Int64Var(&p.events, "events", 0, "stop after this many events in all (0: no limit)")
			fs.BoolVar(&p.pin, "pin", true, "with fewer threads than usable CPUs, keep the whole process on that many CPUs, the last ones (see --help)")
			return func() (Workload, error) {
				switch {
				case p.threads < 1 || p.threads > 4096:
					return nil, fmt.Errorf("--threads must be between 1 and 4096")
				case p.duration <= 0:
					return nil, fmt.Errorf("--duration must be positive")
				case p.maxPrime < 3:
					return nil, fmt.Errorf("--max-prime must be at least 3")
				case p.events < 0:
					return nil, fmt.Errorf("--events must not be negative")
				}
				return p, nil
			}
		})
}

type parallel struct {
	pin      bool
	threads  int
	duration time.Duration
	maxPrime int
	events   int64
}

func (p *parallel) Name() string { return "parallel" }
func (p *parallel) Op() string   { return "event" }
func (p *parallel) Params() map[string]any {
	return map[string]any{"threads": p.threads, "duration_ns": p.duration, "max_prime": p.maxPrime, "events": p.events, "pin": p.pin}
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
	runtime.GOMAXPROCS(p.threads)
	if p.pin {
		pinProcess(p.threads)
	}
	deadline := time.Now().Add(p.duration)
	var done atomic.Int64
	var total atomic.Int64
	var wg sync.WaitGroup
	for th := 0; th < p.threads; th++ {
		wg.Add(1)
		go func(th int) {
			defer wg.Done()
			tr := rec.Thread(th)
			primes := 0
			for {
				if p.events > 0 && done.Add(1) > p.events {
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
				primes += primeEvent(p.maxPrime)
				tr.Record(t0, time.Since(t0), 0)
			}
			total.Add(int64(primes))
		}(th)
	}
	wg.Wait()
	sink += uint64(total.Load())
	return nil
}

// pinProcess restricts every thread of the process to PinSet(n).
func pinProcess(n int) {
	want, ok := PinSet(n)
	if !ok {
		return
	}
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return
	}
	for _, t := range tasks {
		if tid, err := strconv.Atoi(t.Name()); err == nil {
			_ = unix.SchedSetaffinity(tid, &want)
		}
	}
}
