package workload

import (
	"fmt"
	"strconv"
	"time"
)

// Flags are the flags that make w again: Parse(w.Name(), Flags(w)) is a
// workload with w's parameters. Every parameter is named, so that a rerun
// does not depend on the defaults of the binary that parses them. An
// event sized by --event is given by its size (--max-prime), so that the
// rerun does the same work wherever it runs; the CPU time it was asked
// to take (ParallelParams.Event) is not kept.
func Flags(w Workload) []string {
	d := func(v time.Duration) string { return v.String() }
	b := strconv.FormatBool
	switch w := w.(type) {
	case *periodic:
		return []string{"--burn", d(w.Burn), "--burn-cpu", d(w.BurnCPU), "--sleep", d(w.Sleep),
			"--iterations", strconv.Itoa(w.Iterations), "--threads", strconv.Itoa(w.Threads),
			"--quiet=" + b(w.Quiet)}
	case *bursty:
		return []string{"--on", d(w.On), "--on-cpu", d(w.OnCPU), "--off", d(w.Off), "--jitter", d(w.Jitter),
			"--every", d(w.Every), "--duration", d(w.Duration), "--threads", strconv.Itoa(w.Threads),
			"--seed", strconv.FormatUint(w.Seed, 10), "--pin=" + b(w.Pin)}
	case *parallel:
		return []string{"--threads", strconv.Itoa(w.Threads), "--duration", d(w.Duration),
			"--max-prime", strconv.Itoa(w.MaxPrime), "--events", strconv.FormatInt(w.Events, 10),
			"--pin=" + b(w.Pin)}
	}
	panic(fmt.Sprintf("workload.Flags: unknown workload %T", w))
}

// WithThreads is w run by at most n threads (a thread cap: GOMAXPROCS, a
// worker count) doing the same work. When w has n threads or fewer it is
// w. Otherwise, with T = w.Workers():
//
//   - periodic and bursty: n threads, each operation (--burn, --burn-cpu,
//     --on, --on-cpu) T/n times as long, so that each cycle does the work
//     T threads did (the same operations, done by fewer threads, one after
//     another); the idle time (--sleep, --off) shrinks by what the
//     operation grew, so that a cycle lasts as long as before, and at 0 the
//     cycle is longer (n threads cannot do the work in the time: a bursty
//     workload then does less in its --duration). --jitter is kept within
//     --off; bursty's --every is kept. The number of operations is kept:
//     periodic's total work is the same.
//   - parallel: n threads; --events counts events in all, so with --events
//     the total work is the same; without, the workload does what n
//     threads do in its --duration (a throughput workload has no fixed
//     amount of work).
func WithThreads(w Workload, n int) (Workload, error) {
	if n < 1 {
		return nil, fmt.Errorf("a thread cap of %d: it must be at least 1", n)
	}
	t := w.Workers()
	if n >= t {
		return w, nil
	}
	// scale is v × t/n: an operation's work spread over n threads.
	scale := func(v time.Duration) time.Duration { return time.Duration(int64(v) * int64(t) / int64(n)) }
	var out interface {
		Workload
		validate() error
	}
	switch w := w.(type) {
	case *periodic:
		c := *w
		c.Threads, c.Burn, c.BurnCPU = n, scale(w.Burn), scale(w.BurnCPU)
		c.Sleep = max(w.Sleep-(c.ExpectedOp()-w.ExpectedOp()), 0)
		out = &c
	case *bursty:
		c := *w
		c.Threads, c.On, c.OnCPU = n, scale(w.On), scale(w.OnCPU)
		c.Off = max(w.Off-(c.ExpectedOp()-w.ExpectedOp()), 0)
		c.Jitter = min(w.Jitter, c.Off)
		out = &c
	case *parallel:
		c := *w
		c.Threads = n
		out = &c
	default:
		return nil, fmt.Errorf("workload %s cannot be given a thread cap", w.Name())
	}
	if err := out.validate(); err != nil {
		return nil, fmt.Errorf("workload %s with %d threads: %w", w.Name(), n, err)
	}
	return out, nil
}
