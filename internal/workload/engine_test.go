package workload

import (
	"bytes"
	"encoding/binary"
	"io"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cfsprobe/cfsprobe/internal/testenv"
	"github.com/cfsprobe/cfsprobe/internal/trace"
)

// engineBlob builds what the C engine writes: the process's CPU time at
// its clock's start (startCPU) and at its end (self); per thread, records
// of (start, wall, cpu).
func engineBlob(start, end, startCPU, self int64, dropped int64, threads [][][3]int64) []byte {
	var b bytes.Buffer
	b.WriteString("CFSPENG3")
	_ = binary.Write(&b, binary.LittleEndian, []int64{start, end, startCPU, self, int64(len(threads)), dropped})
	for _, recs := range threads {
		_ = binary.Write(&b, binary.LittleEndian, int64(len(recs)))
		for _, r := range recs {
			_ = binary.Write(&b, binary.LittleEndian, r[:])
		}
	}
	return b.Bytes()
}

func parallelWorkload(t *testing.T, args ...string) Workload {
	t.Helper()
	w, err := Parse("parallel", args)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func TestDecodeEngineResult(t *testing.T) {
	w := parallelWorkload(t, "--threads", "2")
	const ms = int64(time.Millisecond)
	start := int64(1_000_000_000)
	blob := engineBlob(start, start+10*ms, 2*ms, 7*ms, 0, [][][3]int64{
		{{start, 300_000, 0}, {start + ms, 2 * ms, 0}},
		{{start + 500_000, 200_000, 0}},
	})
	res, err := DecodeResult(blob, w)
	if err != nil {
		t.Fatal(err)
	}
	if res.Workload != "parallel" || res.StartMono != start || res.EndMono != start+10*ms || res.StartCPUNs != 2*ms || res.SelfCPUNs != 7*ms {
		t.Errorf("header: %+v", res)
	}
	if res.Latency == nil || len(res.Latency.Samples) != 3 {
		t.Fatalf("latency: %+v", res.Latency)
	}
	for i, want := range []int64{start, start + 500_000, start + ms} {
		if s := res.Latency.Samples[i]; s.StartNs != want {
			t.Errorf("sample %d starts at %d, want %d (sorted by start)", i, s.StartNs, want)
		}
	}
	if res.Latency.Samples[1].Thread != 1 {
		t.Errorf("sample 1 thread %d, want 1", res.Latency.Samples[1].Thread)
	}
	// Completions per ms: 0.3 ms and 0.7 ms fall in bucket 0, 3 ms in 3.
	want := []int64{2, 0, 0, 1}
	if res.Throughput == nil || !equal(res.Throughput.Counts, want) {
		t.Errorf("throughput %+v, want counts %v", res.Throughput, want)
	}
	if res.ThroughputStartMono != start {
		t.Errorf("throughput starts at %d, want %d", res.ThroughputStartMono, start)
	}
}

func equal(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestDecodeEngineResultErrors(t *testing.T) {
	w := parallelWorkload(t)
	good := engineBlob(1, 2, 3, 4, 0, [][][3]int64{{{1, 1, 1}}})
	for name, b := range map[string][]byte{
		"no header":    []byte("CFSPENG3"),
		"old format":   append([]byte("CFSPENG2"), good[8:]...),
		"truncated":    good[:len(good)-4],
		"extra bytes":  append(append([]byte{}, good...), 0),
		"zero threads": engineBlob(1, 2, 3, 4, 0, nil),
		"huge count":   append(engineBlob(1, 2, 3, 4, 0, [][][3]int64{{}})[:8+48], 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f),
		"not json":     []byte("{"),
	} {
		if _, err := DecodeResult(b, w); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

func TestDecodeResultJSON(t *testing.T) {
	res, err := DecodeResult([]byte(`{"workload":"periodic","start_mono":5,"self_cpu_ns":9}`), parallelWorkload(t))
	if err != nil || res.Workload != "periodic" || res.StartMono != 5 || res.SelfCPUNs != 9 {
		t.Fatalf("%+v %v", res, err)
	}
}

func FuzzDecodeResult(f *testing.F) {
	f.Add(engineBlob(1, 2, 3, 4, 0, [][][3]int64{{{1, 1, 0}, {2, 5, 1}}, {}}))
	f.Add([]byte(`{"workload":"x"}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		w := &parallel{trace.ParallelParams{Threads: 1, Duration: time.Second, MaxPrime: 10}}
		res, err := DecodeResult(b, w)
		if err == nil && res == nil {
			t.Fatal("nil result without error")
		}
	})
}

// TestEngineRuns runs the embedded C engine for real (outside any group)
// and checks its result against its own clock and CPU time.
func TestEngineRuns(t *testing.T) {
	needEngine(t)
	path, err := EnginePath()
	if err != nil {
		t.Fatal(err)
	}
	w := parallelWorkload(t, "--threads", "2", "--duration", "300ms", "--max-prime", "2000")
	res := runEngine(t, w, nil)
	wall := res.EndMono - res.StartMono
	if wall < int64(300*time.Millisecond) || wall > int64(3*time.Second) {
		t.Errorf("engine ran %v for a 300ms duration", time.Duration(wall))
	}
	n := res.Latency.Count
	var tput int64
	for _, c := range res.Throughput.Counts {
		tput += c
	}
	if n < 100 || tput != n {
		t.Errorf("%d events recorded, %d in the throughput buckets", n, tput)
	}
	// Two busy threads on a machine with at least one CPU: the process's
	// CPU time is at least most of the wall time.
	if res.SelfCPUNs < wall/2 {
		t.Errorf("self CPU %v over %v of wall time", time.Duration(res.SelfCPUNs), time.Duration(wall))
	}
	// bursty: 5 ms busy, 5 ms idle; each burst's wall time is at least
	// its 5 ms and the CPU clock saw most of it.
	bw := &bursty{trace.BurstyParams{On: 5 * time.Millisecond, Off: 5 * time.Millisecond, Duration: 200 * time.Millisecond, Threads: 1, Seed: 1}}
	bres := runEngine(t, bw, nil)
	if c := bres.Latency.Count; c < 5 || c > 21 {
		t.Errorf("bursty: %d bursts in 200ms of 5ms on / 5ms off", c)
	}
	for _, s := range bres.Latency.Samples {
		if s.WallNs < int64(5*time.Millisecond) || s.CPUNs <= 0 || s.CPUNs > s.WallNs+int64(time.Millisecond) {
			t.Errorf("bursty: burst of %v wall, %v CPU", time.Duration(s.WallNs), time.Duration(s.CPUNs))
		}
	}
	if bres.Throughput != nil {
		t.Error("bursty: the engine's result has throughput buckets")
	}
	// periodic: 3 burns of 2 ms of thread CPU time, 1 ms apart, one line
	// each in the Go workload's format.
	pw := &periodic{trace.PeriodicParams{BurnCPU: 2 * time.Millisecond, Sleep: time.Millisecond, Iterations: 3, Threads: 1}}
	var lines strings.Builder
	pres := runEngine(t, pw, &lines)
	if c := pres.Latency.Count; c != 3 {
		t.Errorf("periodic: %d burns, want 3", c)
	}
	for _, s := range pres.Latency.Samples {
		if s.CPUNs < int64(2*time.Millisecond) || s.WallNs < s.CPUNs-int64(100*time.Microsecond) {
			t.Errorf("periodic: burn of %v wall, %v CPU, want at least 2ms of CPU", time.Duration(s.WallNs), time.Duration(s.CPUNs))
		}
	}
	out := strings.Split(strings.TrimSpace(lines.String()), "\n")
	line := regexp.MustCompile(`^\d{4}/\d\d/\d\d \d\d:\d\d:\d\d \[(\d)\] burn took \d+ms, real time so far: \d+ms, cpu time so far: \d+ms$`)
	for i, l := range out {
		if m := line.FindStringSubmatch(l); m == nil || m[1] != strconv.Itoa(i) {
			t.Errorf("periodic: line %d %q does not match the Go workload's format", i, l)
		}
	}
	if len(out) != 3 {
		t.Errorf("periodic printed %d lines, want 3:\n%s", len(out), lines.String())
	}
	// Bad arguments: exit 2 with usage.
	bad := exec.Command(path, "parallel", "0", "1", "3", "0", "0")
	if err := bad.Run(); bad.ProcessState == nil || bad.ProcessState.ExitCode() != 2 {
		t.Errorf("engine with 0 threads: %v, want exit 2", err)
	}
	// The runs used the engine extracted once.
	if p, err := EnginePath(); err != nil || p != path {
		t.Errorf("engine at %s, want %s (%v)", p, path, err)
	}
}

// needEngine skips the test (or fails it, under CFSPROBE_REQUIRE_CGROUPS=1)
// in a build without the C engine.
func needEngine(t *testing.T) {
	t.Helper()
	if !EngineEmbedded() {
		if testenv.Required() {
			t.Fatal("this build has no C engine: build it with make engine (make test does)")
		}
		t.Skip("no C engine embedded (make engine)")
	}
}

// runEngine runs w in the C engine (runNative), its output to stdout.
func runEngine(t *testing.T, w Workload, stdout io.Writer) *Result {
	t.Helper()
	res, err := runNative(w, stdout)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// The C engine draws a bursty workload's jitter as Jitter says it does:
// the idle time between two bursts is --off plus the next draw.
func TestEngineJitter(t *testing.T) {
	needEngine(t)
	p := trace.BurstyParams{On: time.Millisecond, Off: 20 * time.Millisecond, Jitter: 19 * time.Millisecond, Duration: 500 * time.Millisecond, Threads: 1, Seed: 42}
	res, err := runNative(&bursty{p}, nil)
	if err != nil {
		t.Fatal(err)
	}
	s := res.Latency.Samples
	if len(s) < 10 {
		t.Fatalf("%d bursts in 500ms of 1ms on, 1 to 39ms off", len(s))
	}
	match := func(engine string) (n int) {
		draw := Jitter(p, engine, 0)
		for i := 0; i+1 < len(s); i++ {
			slept := s[i+1].StartNs - (s[i].StartNs + s[i].WallNs)
			want := int64(p.Off + draw())
			// A sleep never ends early; a busy machine may end it late.
			if slept >= want-int64(100*time.Microsecond) && slept <= want+int64(2*time.Millisecond) {
				n++
			}
		}
		return n
	}
	c, g := match(trace.EngineC), match(trace.EngineGo)
	t.Logf("%d bursts: %d idle times match the C draws, %d the Go ones", len(s), c, g)
	if c < (len(s)-1)*3/4 {
		t.Errorf("%d of %d idle times are --off plus the C engine's draws", c, len(s)-1)
	}
	if g > (len(s)-1)/2 {
		t.Errorf("%d of %d idle times match the Go workload's draws too: the test cannot tell them apart", g, len(s)-1)
	}
}

// The C engine's and the Go workload's open loop (--every): each thread
// starts its k-th burst k × every after the start, whenever the one
// before ended, and at once when that was later; the closed loop
// (--off) idles after each burst, so a late burst pushes the rest.
func TestBurstyEvery(t *testing.T) {
	needEngine(t)
	// Bursts shorter than the interval (2 ms every 10 ms) keep the
	// schedule; bursts longer (12 ms every 10 ms) fall behind it and
	// each starts at once, none skipped.
	for _, c := range []struct {
		on, every time.Duration
		late      bool
	}{{2 * time.Millisecond, 10 * time.Millisecond, false}, {12 * time.Millisecond, 10 * time.Millisecond, true}} {
		p := trace.BurstyParams{On: c.on, Every: c.every, Duration: 200 * time.Millisecond, Threads: 2, Seed: 1, Pin: false}
		for _, engine := range []string{trace.EngineC, trace.EngineGo} {
			var s []trace.Sample
			before := ClockMono()
			if engine == trace.EngineC {
				res, err := runNative(&bursty{p}, nil)
				if err != nil {
					t.Fatal(err)
				}
				s = res.Latency.Samples
			} else {
				w := &bursty{p}
				rec := NewRecorder(w.Op(), false)
				if err := w.Run(rec, nil); err != nil {
					t.Fatal(err)
				}
				s = rec.Result(w.Name()).Latency.Samples
			}
			if len(s) < 10 {
				t.Fatalf("%s, %v every %v: %d bursts in 200ms", engine, c.on, c.every, len(s))
			}
			// No burst starts before its time on the schedule, whose
			// origin is at or after before (read just before the
			// workload started; the first burst itself may start late on
			// a busy machine, so it is not the origin). Short bursts keep
			// the schedule: 20 a thread in 200 ms (below), where a closed
			// loop, idle 10 ms after each 2 ms, starts 16 or 17.
			k := map[int]int64{}
			for _, b := range s {
				due := before + k[b.Thread]*int64(c.every)
				k[b.Thread]++
				if b.StartNs < due-int64(500*time.Microsecond) {
					t.Errorf("%s, %v every %v: thread %d's burst %d started %v before its time", engine, c.on, c.every, b.Thread, k[b.Thread], time.Duration(due-b.StartNs))
				}
			}
			t.Logf("%s, %v every %v: %d bursts, the first %v after the start", engine, c.on, c.every, len(s), time.Duration(s[0].StartNs-before))
			if !c.late && (len(s) < 2*19 || len(s) > 2*20) {
				t.Errorf("%s, %v every %v: %d bursts, want 2 threads × 20, one every 10 ms for 200 ms", engine, c.on, c.every, len(s))
			}
			// Behind the schedule, a thread runs burst after burst:
			// 200 ms / 12 ms, 16 or 17 of them, 2 threads; on a busy
			// machine a preempted burst runs over, and 13 or 14 were
			// seen. A thread that idled 10 ms after a late burst would
			// start 9.
			if c.late && (len(s) < 2*12 || len(s) > 2*18) {
				t.Errorf("%s, %v every %v: %d bursts, want 2 threads × 12 to 17 back to back", engine, c.on, c.every, len(s))
			}
		}
	}
}

// EventCPU times the event the runs use: under a millisecond for
// sysbench's default size, and growing with it; each event's time is
// timed too, around the mean.
func TestEventCPU(t *testing.T) {
	small, times, err := EventCPU(2000)
	if err != nil {
		t.Fatal(err)
	}
	big, _, err := EventCPU(20000)
	if err != nil {
		t.Fatal(err)
	}
	if small <= 0 || big < 3*small || big > 5*time.Millisecond {
		t.Errorf("event of --max-prime 2000: %v, of 20000: %v", small, big)
	}
	if times == nil || times.Count < 100 || times.Count > EventEvents {
		t.Fatalf("events timed at --max-prime 2000: %+v, want 100 to %d", times, EventEvents)
	}
	p, err := times.Percentiles()
	if err != nil {
		t.Fatal(err)
	}
	// Each event's time is its wall time (C engine) or its CPU time (Go):
	// the median is close to the mean CPU time, and no event is faster
	// than half of it.
	t.Logf("--max-prime 2000: mean CPU %v, %d events timed: %+v; 20000: %v", small, times.Count, *p, big)
	if med := time.Duration(p.P50); med < small/2 || med > 2*small || time.Duration(p.Min) < small/2 {
		t.Errorf("events of --max-prime 2000: mean CPU %v, times %+v", small, p)
	}
	if _, _, err := EventCPU(2); err == nil {
		t.Error("EventCPU(2) measures an event --max-prime refuses")
	}
}

// --event sizes the event by CPU time on this machine: the size it
// finds takes about that long when timed again, whatever the default
// size takes here, and the same size is found again in the process.
func TestEventSizedByCPUTime(t *testing.T) {
	for _, d := range []time.Duration{200 * time.Microsecond, 2 * time.Millisecond} {
		w, err := Parse("parallel", []string{"--event", d.String()})
		if err != nil {
			t.Fatal(err)
		}
		p := w.Params().Parallel
		if p.Event != d {
			t.Errorf("--event %v: params %+v, want the event asked for", d, *p)
		}
		mean, _, err := EventCPU(p.MaxPrime)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("--event %v: --max-prime %d, timed again at %v", d, p.MaxPrime, mean)
		// The sizing stops within 3 %; a noisy machine times it again
		// within a quarter.
		if r := float64(mean) / float64(d); r < 0.75 || r > 1.25 {
			t.Errorf("--event %v: --max-prime %d takes %v", d, p.MaxPrime, mean)
		}
		if again, err := MaxPrimeFor(d); err != nil || again != p.MaxPrime {
			t.Errorf("--event %v sized again: %d, %v; want %d", d, again, err, p.MaxPrime)
		}
	}
}
