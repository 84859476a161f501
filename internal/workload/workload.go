// Package workload holds cfsprobe's built-in workloads. Each runs as its
// own process inside the measured group (cfsprobe re-executes itself), times
// every operation and hands a Result back to the runner over a pipe.
package workload

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
	_ "unsafe" // go:linkname

	"github.com/HdrHistogram/hdrhistogram-go"
	"github.com/spf13/pflag"
	"golang.org/x/sys/unix"

	"github.com/cfsprobe/cfsprobe/internal/trace"
)

// Workload is a parsed, validated built-in workload.
type Workload interface {
	// Name is the workload's name ("periodic", ...).
	Name() string
	// Op names one timed operation ("burn", "burst", "event").
	Op() string
	// Params are what the workload runs with, for the trace's spec, with
	// the engine this binary runs it in (Engine).
	Params() trace.Params
	// Workers is how many threads run operations.
	Workers() int
	// ExpectedOp is the wall time one operation takes when nothing delays
	// it, or 0 when the workload does not set it.
	ExpectedOp() time.Duration
	// Length is how long the workload runs when nothing delays it (at
	// most that, where it may stop early).
	Length() time.Duration
	// Describe says in a few words what the workload does.
	Describe() string
	// Run runs the workload, printing to out.
	Run(rec *Recorder, out io.Writer) error
}

// FromSpec makes the built-in workload a trace's spec ran, from its
// params: the way back from Params, for reading a run's parameters and
// for running it again (or modelling it). It fails for a command, and for
// params that Parse would refuse.
func FromSpec(s trace.Spec) (Workload, error) {
	var w interface {
		Workload
		validate() error
	}
	p := s.Params
	switch {
	case p != nil && s.Workload == "periodic" && p.Periodic != nil:
		w = &periodic{*p.Periodic}
	case p != nil && s.Workload == "bursty" && p.Bursty != nil:
		w = &bursty{*p.Bursty}
	case p != nil && s.Workload == "parallel" && p.Parallel != nil:
		w = &parallel{*p.Parallel}
	default:
		return nil, fmt.Errorf("the spec of workload %q has no parameters of a built-in workload", s.Workload)
	}
	if err := w.validate(); err != nil {
		return nil, fmt.Errorf("workload %s: %w", s.Workload, err)
	}
	return w, nil
}

// threads says "1 thread" or "N threads", for Describe.
func threads(n int) string {
	if n == 1 {
		return "1 thread"
	}
	return fmt.Sprintf("%d threads", n)
}

type factory struct {
	summary string
	usage   string
	parse   func(fs *pflag.FlagSet) func() (Workload, error)
}

var registry = map[string]factory{}

func register(name, summary, usage string, parse func(fs *pflag.FlagSet) func() (Workload, error)) {
	registry[name] = factory{summary: summary, usage: usage, parse: parse}
}

// Names lists the built-in workloads.
func Names() []string {
	var n []string
	for k := range registry {
		n = append(n, k)
	}
	sort.Strings(n)
	return n
}

// Summary is a one-line description of a workload.
func Summary(name string) string { return registry[name].summary }

// UnknownError is returned for a workload name that does not exist.
type UnknownError struct{ Name string }

func (e *UnknownError) Error() string {
	return fmt.Sprintf("unknown workload %q: use one of %s, or -- COMMAND ARGS... to run any program", e.Name, strings.Join(Names(), ", "))
}

// Parse validates a workload's name and flags without running anything.
func Parse(name string, args []string) (Workload, error) {
	f, ok := registry[name]
	if !ok {
		return nil, &UnknownError{name}
	}
	fs := pflag.NewFlagSet(name, pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	build := f.parse(fs)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return nil, &HelpError{Usage(name)}
		}
		return nil, &ArgError{name, fmt.Errorf("%w (see: cfsprobe run %s --help)", err, name)}
	}
	if fs.NArg() > 0 {
		return nil, &ArgError{name, fmt.Errorf("unexpected argument %q (see: cfsprobe run %s --help)", fs.Arg(0), name)}
	}
	w, err := build()
	if err != nil {
		return nil, &ArgError{name, err}
	}
	return w, nil
}

// ArgError is a workload's arguments that do not parse or do not make a
// valid workload.
type ArgError struct {
	Workload string
	Err      error
}

func (e *ArgError) Error() string { return fmt.Sprintf("workload %s: %v", e.Workload, e.Err) }
func (e *ArgError) Unwrap() error { return e.Err }

// HelpError carries a workload's usage text when --help was asked for.
type HelpError struct{ Text string }

func (e *HelpError) Error() string { return e.Text }

// Usage describes a workload and its flags.
func Usage(name string) string {
	f, ok := registry[name]
	if !ok {
		return ""
	}
	fs := pflag.NewFlagSet(name, pflag.ContinueOnError)
	f.parse(fs)
	return fmt.Sprintf("%s: %s\n\n%s\nFlags:\n%s", name, f.summary, f.usage, fs.FlagUsages())
}

// Result is what a workload process hands back to the runner.
type Result struct {
	Workload string `json:"workload"`
	// StartMono and EndMono are CLOCK_MONOTONIC ns of the workload's
	// first and last operation boundaries.
	StartMono int64 `json:"start_mono"`
	EndMono   int64 `json:"end_mono"`
	// Latency.Samples[].StartNs are CLOCK_MONOTONIC ns here; the runner
	// rebases them on the run's start.
	Latency *trace.Latency `json:"latency"`
	// Throughput buckets start at ThroughputStartMono.
	Throughput          *trace.Throughput `json:"throughput,omitempty"`
	ThroughputStartMono int64             `json:"throughput_start_mono,omitempty"`
	// StartCPUNs and SelfCPUNs are the process's CPU time
	// (CLOCK_PROCESS_CPUTIME_ID, since its fork) at StartMono and at
	// EndMono: what its start cost before the workload's clock started,
	// and what it had used by the end of its last operation.
	StartCPUNs int64 `json:"start_cpu_ns,omitempty"`
	SelfCPUNs  int64 `json:"self_cpu_ns"`
}

// Recorder collects operation timings from any number of threads. Each
// thread records into its own ThreadRecorder, without locks.
type Recorder struct {
	op         string
	throughput bool
	startMono  int64
	startCPU   int64 // the process's CPU time at startMono
	anchorWall time.Time
	mu         sync.Mutex
	threads    []*ThreadRecorder
}

// NewRecorder starts the clock. With throughput, completions are counted
// per millisecond for in-period profiles.
func NewRecorder(op string, throughput bool) *Recorder {
	r := &Recorder{op: op, throughput: throughput}
	r.startCPU = int64(ProcessCPU())
	r.anchorWall = time.Now()
	r.startMono = ClockMono()
	return r
}

// Mono converts a time.Time taken in this process to CLOCK_MONOTONIC ns.
func (r *Recorder) Mono(t time.Time) int64 { return r.startMono + int64(t.Sub(r.anchorWall)) }

// ThroughputBucket is the width of throughput buckets.
const ThroughputBucket = time.Millisecond

// Thread returns a recorder for one worker thread.
func (r *Recorder) Thread(id int) *ThreadRecorder {
	t := &ThreadRecorder{r: r, id: id, hist: trace.NewHistogram()}
	r.mu.Lock()
	r.threads = append(r.threads, t)
	r.mu.Unlock()
	return t
}

// ThreadRecorder records one thread's operations.
type ThreadRecorder struct {
	r       *Recorder
	id      int
	hist    *hdrhistogram.Histogram
	samples []trace.Sample
	counts  []int64
	dropped bool
}

// Record notes an operation that started at start, took wall, and cost
// cpu of thread CPU time.
func (t *ThreadRecorder) Record(start time.Time, wall, cpu time.Duration) {
	t.recordMono(t.r.Mono(start), int64(wall), int64(cpu))
}

// recordMono records an operation that started at CLOCK_MONOTONIC start
// ns and took wall ns.
func (t *ThreadRecorder) recordMono(start, wall, cpu int64) {
	_ = t.hist.RecordValue(max(wall, 1000))
	if len(t.samples) < trace.MaxSamples {
		t.samples = append(t.samples, trace.Sample{StartNs: start, WallNs: wall, CPUNs: cpu, Thread: t.id})
	} else {
		t.dropped = true
	}
	if t.r.throughput {
		b := int((start - t.r.startMono + wall) / int64(ThroughputBucket))
		if b < 0 {
			b = 0
		}
		for len(t.counts) <= b {
			t.counts = append(t.counts, 0)
		}
		t.counts[b]++
	}
}

// Result merges the threads' recordings.
func (r *Recorder) Result(name string) *Result {
	end := ClockMono()
	return r.result(name, end, int64(ProcessCPU()))
}

func (r *Recorder) result(name string, end, selfCPU int64) *Result {
	h := trace.NewHistogram()
	var samples []trace.Sample
	var counts []int64
	dropped := false
	for _, t := range r.threads {
		h.Merge(t.hist)
		samples = append(samples, t.samples...)
		dropped = dropped || t.dropped
		for i, c := range t.counts {
			for len(counts) <= i {
				counts = append(counts, 0)
			}
			counts[i] += c
		}
	}
	lat := trace.LatencyFromHistogram(r.op, h)
	if !dropped && len(samples) <= trace.MaxSamples {
		sort.Slice(samples, func(i, j int) bool { return samples[i].StartNs < samples[j].StartNs })
		lat.Samples = samples
	}
	res := &Result{Workload: name, StartMono: r.startMono, EndMono: end, Latency: lat, StartCPUNs: r.startCPU, SelfCPUNs: selfCPU}
	if r.throughput {
		res.Throughput = &trace.Throughput{BucketNs: int64(ThroughputBucket), Counts: counts}
		res.ThroughputStartMono = r.startMono
	}
	return res
}

// countsThroughput says whether w's Result counts completions per
// ThroughputBucket: parallel's many short events make in-period profiles.
func countsThroughput(w Workload) bool { return w.Name() == "parallel" }

// ResultOf is the Result of w's operations timed elsewhere (by the
// simulator): ops' StartNs and endNs are ns since the workload started,
// their Thread says whose each is. It is what a run of w reporting the
// same operations would hand back, kept and summarised the same way.
func ResultOf(w Workload, ops []trace.Sample, endNs int64) *Result {
	rec := &Recorder{op: w.Op(), throughput: countsThroughput(w)}
	threads := map[int]*ThreadRecorder{}
	for th := 0; th < w.Workers(); th++ {
		threads[th] = rec.Thread(th)
	}
	for _, o := range ops {
		t, ok := threads[o.Thread]
		if !ok {
			t = rec.Thread(o.Thread)
			threads[o.Thread] = t
		}
		t.recordMono(o.StartNs, o.WallNs, o.CPUNs)
	}
	return rec.result(w.Name(), endNs, 0)
}

// ClockMono reads CLOCK_MONOTONIC in ns: the clock shared by the runner
// and the workload process.
func ClockMono() int64 { return nanotime() }

// nanotime is the runtime's reading of CLOCK_MONOTONIC, through the
// vDSO: no system call. A system call made the usual way (not raw) wakes
// the runtime's monitor thread, which then polls every 20 µs while the
// goroutine runs: context switches beside the measured group on every
// reading of the lab's (internal/alarm).
//
//go:linkname nanotime runtime.nanotime
func nanotime() int64

// ThreadCPU reads the calling thread's CPU clock. The goroutine must be
// locked to its thread.
func ThreadCPU() time.Duration {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts)
	return time.Duration(ts.Nano())
}

// ProcessCPU reads the process's CPU clock.
func ProcessCPU() time.Duration {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_PROCESS_CPUTIME_ID, &ts)
	return time.Duration(ts.Nano())
}

// ResultFDEnv names the environment variable that tells a workload
// process which file descriptor to write its Result to.
const ResultFDEnv = "CFSPROBE_RESULT_FD"

// Main runs a workload as the child process: cfsprobe's hidden
// `__workload NAME ARGS...` entry point. It writes the Result as JSON to
// the descriptor named by CFSPROBE_RESULT_FD (when set).
func Main(name string, args []string, out io.Writer) error {
	w, err := Parse(name, args)
	if err != nil {
		return err
	}
	var resultOut io.WriteCloser
	if s := os.Getenv(ResultFDEnv); s != "" {
		fd, err := strconv.Atoi(s)
		if err != nil {
			return fmt.Errorf("%s=%q: not a file descriptor", ResultFDEnv, s)
		}
		resultOut = os.NewFile(uintptr(fd), "result")
	}
	rec := NewRecorder(w.Op(), countsThroughput(w))
	if err := w.Run(rec, out); err != nil {
		return err
	}
	res := rec.Result(w.Name())
	if resultOut != nil {
		defer resultOut.Close()
		return json.NewEncoder(resultOut).Encode(res)
	}
	return nil
}

// burnChunk does a small fixed amount of CPU work (a few microseconds)
// that the compiler cannot remove.
func burnChunk(seed uint64) uint64 {
	x := seed | 1
	for i := 0; i < 2000; i++ {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
	}
	return x
}

// sink keeps results of CPU work alive.
var sink uint64

// startWorkers sets the process up for n worker goroutines: one P each,
// so no idle P has a thread spinning for work. It tells whether workers
// must lock their OS thread: when they burn until the thread CPU clock
// says so. A goroutine stalled in a system call (a throttled task stops
// at its return to user space) loses its P, and may resume on another
// thread, whose clock is another thread's: the burn would never end.
func startWorkers(n int, threadClock bool) (lock bool) {
	runtime.GOMAXPROCS(n)
	return threadClock
}

// burn keeps the CPU busy from t0 until wall time has passed or, with
// cpu > 0, until the thread has spent cpu since its clock read c0. Unless
// the goroutine is locked to its thread, it yields to Go's scheduler every
// millisecond: a goroutine that runs for 10 ms is preempted by the
// runtime, which wakes other threads of the process, and their CPU time
// counts against the quota on top of the workers' (on an idle CPU each
// wake also takes a slice of the quota there). Yielding is cheap when the
// goroutine has its P to itself.
func burn(seed uint64, t0 time.Time, wall time.Duration, c0, cpu time.Duration, locked bool) uint64 {
	lastYield := t0
	for {
		seed = burnChunk(seed)
		now := time.Now()
		if cpu > 0 {
			if ThreadCPU()-c0 >= cpu {
				return seed
			}
		} else if now.Sub(t0) >= wall {
			return seed
		}
		if !locked && now.Sub(lastYield) >= time.Millisecond {
			runtime.Gosched()
			lastYield = now
		}
	}
}

// HasFlag reports whether the workload defines the flag (name without dashes).
func HasFlag(name, flag string) bool {
	f, ok := registry[name]
	if !ok {
		return false
	}
	fs := pflag.NewFlagSet(name, pflag.ContinueOnError)
	f.parse(fs)
	return fs.Lookup(flag) != nil
}
