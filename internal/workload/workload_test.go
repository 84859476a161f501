package workload

import (
	"bytes"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/cfsprobe/cfsprobe/internal/trace"
)

func TestParse(t *testing.T) {
	good := [][]string{
		{"periodic", "--burn", "5ms", "--sleep", "100ms", "--iterations", "3"},
		{"periodic", "--burn-cpu", "2ms"},
		{"bursty", "--on", "50ms", "--off", "50ms", "--duration", "1s", "--jitter", "10ms"},
		{"bursty", "--on-cpu", "30ms", "--off", "137ms"},
		{"bursty", "--on-cpu", "40ms", "--every", "1s", "--threads", "4"},
		{"bursty", "--on-cpu", "40ms", "--every", "1s", "--off", "0s"},
		{"parallel", "--threads", "3", "--duration", "1s", "--max-prime", "100", "--pin=false"},
	}
	for _, g := range good {
		w, err := Parse(g[0], g[1:])
		if err != nil {
			t.Errorf("%v: %v", g, err)
			continue
		}
		p := w.Params()
		set := map[string]bool{"periodic": p.Periodic != nil, "bursty": p.Bursty != nil, "parallel": p.Parallel != nil}
		if w.Name() != g[0] || w.Op() == "" || !set[g[0]] || len(p.Engine) == 0 {
			t.Errorf("%v: name %q op %q params %+v", g, w.Name(), w.Op(), p)
		}
	}
	bad := []struct {
		args []string
		want string
	}{
		{[]string{"spin"}, "unknown workload"},
		{[]string{"periodic", "--burn", "5xs"}, "--burn"},
		{[]string{"periodic", "--iterations", "0"}, "--iterations"},
		{[]string{"periodic", "--burn", "0"}, "--burn must be positive"},
		{[]string{"bursty", "--jitter", "60ms", "--off", "50ms"}, "--jitter"},
		{[]string{"bursty", "--duration", "0"}, "--duration"},
		{[]string{"bursty", "--every", "1s", "--off", "50ms"}, "--every"},
		{[]string{"bursty", "--every", "1s", "--jitter", "5ms"}, "--every"},
		{[]string{"bursty", "--every", "-1s"}, "--every"},
		{[]string{"parallel", "--threads", "0"}, "--threads"},
		{[]string{"parallel", "--max-prime", "2"}, "--max-prime"},
		{[]string{"parallel", "--event", "1ms", "--max-prime", "2000"}, "give --event or --max-prime, not both"},
		{[]string{"parallel", "--event", "5us"}, "--event must be between"},
		{[]string{"parallel", "--event", "-1ms"}, "--event must be between"},
		{[]string{"parallel", "stray"}, "unexpected argument"},
	}
	for _, b := range bad {
		_, err := Parse(b.args[0], b.args[1:])
		if err == nil || !strings.Contains(err.Error(), b.want) {
			t.Errorf("%v: error %v, want it to mention %q", b.args, err, b.want)
		}
	}
	var he *HelpError
	if _, err := Parse("bursty", []string{"--help"}); !errors.As(err, &he) || !strings.Contains(he.Text, "--on-cpu") {
		t.Errorf("--help: %v", err)
	}
	if !HasFlag("periodic", "burn") || HasFlag("periodic", "json") {
		t.Error("HasFlag")
	}
}

// primeEvent counts primes like sysbench cpu: 1228 primes below 10000
// (2 is not tested: the loop starts at 3).
func TestPrimeEvent(t *testing.T) {
	if n := primeEvent(10000); n != 1228 {
		t.Errorf("primeEvent(10000) = %d, want 1228", n)
	}
}

// The recorder merges threads, keeps raw samples and counts throughput.
func TestRecorder(t *testing.T) {
	r := NewRecorder("event", true)
	start := time.Now()
	for th := 0; th < 2; th++ {
		tr := r.Thread(th)
		for i := 0; i < 5; i++ {
			tr.Record(start, time.Duration(i+1)*time.Millisecond, time.Millisecond)
		}
	}
	res := r.Result("parallel")
	if res.Latency.Count != 10 || len(res.Latency.Samples) != 10 {
		t.Fatalf("count %d samples %d, want 10", res.Latency.Count, len(res.Latency.Samples))
	}
	p, err := res.Latency.Percentiles()
	if err != nil || p.Max != int64(5*time.Millisecond) || p.Min != int64(time.Millisecond) {
		t.Errorf("percentiles %+v %v", p, err)
	}
	var total int64
	for _, c := range res.Throughput.Counts {
		total += c
	}
	if total != 10 {
		t.Errorf("throughput counts %d, want 10", total)
	}
	if res.EndMono < res.StartMono {
		t.Error("end before start")
	}
}

// ResultOf keeps operations timed elsewhere as a run keeps its own: all
// in the histogram, the raw ones up to trace.MaxSamples, sorted, and for
// parallel the throughput per millisecond from the start.
func TestResultOf(t *testing.T) {
	w, err := Parse("parallel", []string{"--threads", "2"})
	if err != nil {
		t.Fatal(err)
	}
	ms := int64(time.Millisecond)
	ops := []trace.Sample{{StartNs: 2 * ms, WallNs: ms, Thread: 1}, {StartNs: 0, WallNs: ms / 2, Thread: 0}, {StartNs: ms, WallNs: 3 * ms, Thread: 0}}
	res := ResultOf(w, ops, 5*ms)
	if res.Latency.Op != "event" || res.Latency.Count != 3 || len(res.Latency.Samples) != 3 || res.Latency.Samples[0].StartNs != 0 || res.Latency.Samples[2].StartNs != 2*ms {
		t.Errorf("latency %+v", res.Latency)
	}
	if res.StartMono != 0 || res.EndMono != 5*ms {
		t.Errorf("start %d end %d", res.StartMono, res.EndMono)
	}
	// Ends at 0.5, 3 and 4 ms.
	if want := []int64{1, 0, 0, 1, 1}; res.Throughput == nil || !reflect.DeepEqual(res.Throughput.Counts, want) {
		t.Errorf("throughput %+v, want %v", res.Throughput, want)
	}
	many := make([]trace.Sample, trace.MaxSamples+1)
	res = ResultOf(w, many, ms)
	if res.Latency.Count != int64(len(many)) || res.Latency.Samples != nil {
		t.Errorf("%d ops: count %d, %d samples kept", len(many), res.Latency.Count, len(res.Latency.Samples))
	}
	b, _ := Parse("bursty", nil)
	if res := ResultOf(b, ops, 5*ms); res.Throughput != nil || res.Latency.Op != "burst" {
		t.Errorf("bursty: %+v", res)
	}
}

// A short real run of each workload in this process.
func TestRunShort(t *testing.T) {
	for _, args := range [][]string{
		{"periodic", "--burn", "1ms", "--sleep", "1ms", "--iterations", "3", "--quiet"},
		{"bursty", "--on", "2ms", "--off", "2ms", "--duration", "30ms"},
		{"parallel", "--threads", "2", "--duration", "30ms", "--max-prime", "1000", "--pin=false"},
	} {
		w, err := Parse(args[0], args[1:])
		if err != nil {
			t.Fatal(err)
		}
		rec := NewRecorder(w.Op(), args[0] == "parallel")
		var out strings.Builder
		if err := w.Run(rec, &out); err != nil {
			t.Fatal(err)
		}
		if res := rec.Result(w.Name()); res.Latency.Count == 0 {
			t.Errorf("%s: no operations recorded", args[0])
		}
	}
}

// A workload comes back from its trace's spec, through the trace's JSON,
// with the same parameters and the same knowledge of itself.
func TestFromSpec(t *testing.T) {
	for _, c := range []struct {
		args     []string
		workers  int
		expected time.Duration
		length   time.Duration
		describe string
	}{
		{[]string{"periodic", "--burn", "5ms", "--sleep", "100ms", "--iterations", "3", "--quiet"}, 1, 5 * time.Millisecond, 215 * time.Millisecond,
			"1 thread: 5ms burns, sleep 100ms, 3 times"},
		{[]string{"periodic", "--burn-cpu", "2ms", "--threads", "2"}, 2, 2 * time.Millisecond, 1940 * time.Millisecond,
			"2 threads: 2ms CPU burns, sleep 100ms, 20 times"},
		{[]string{"bursty", "--on", "50ms", "--off", "50ms", "--duration", "1s", "--jitter", "10ms", "--seed", "7"}, 1, 50 * time.Millisecond, time.Second,
			"1 thread: 50ms bursts, idle 50ms±10ms, for 1s"},
		{[]string{"bursty", "--on-cpu", "30ms", "--off", "137ms", "--threads", "4", "--pin=false"}, 4, 30 * time.Millisecond, 5 * time.Second,
			"4 threads: 30ms CPU bursts, idle 137ms, for 5s"},
		{[]string{"bursty", "--on-cpu", "40ms", "--every", "1s", "--threads", "4", "--duration", "20s"}, 4, 40 * time.Millisecond, 20 * time.Second,
			"4 threads: 40ms CPU bursts, one every 1s, for 20s"},
		{[]string{"parallel", "--threads", "3", "--duration", "1s", "--max-prime", "100", "--events", "9"}, 3, 0, time.Second,
			"3 threads: CPU events for 1s"},
	} {
		w, err := Parse(c.args[0], c.args[1:])
		if err != nil {
			t.Fatal(err)
		}
		params := w.Params()
		tr := trace.Trace{Schema: trace.Schema, Spec: trace.Spec{Workload: w.Name(), Args: c.args[1:], Params: &params}}
		var buf bytes.Buffer
		if err := tr.Write(&buf); err != nil {
			t.Fatal(err)
		}
		back, err := trace.Read(&buf)
		if err != nil {
			t.Fatal(err)
		}
		got, err := FromSpec(back.Spec)
		if err != nil {
			t.Fatalf("%v: %v", c.args, err)
		}
		if !reflect.DeepEqual(got.Params(), params) || !reflect.DeepEqual(got, w) {
			t.Errorf("%v: params %+v, want %+v", c.args, got.Params(), params)
		}
		if got.Workers() != c.workers || got.ExpectedOp() != c.expected || got.Length() != c.length || got.Describe() != c.describe {
			t.Errorf("%v: workers %d, expected op %v, length %v, %q; want %d, %v, %v, %q", c.args,
				got.Workers(), got.ExpectedOp(), got.Length(), got.Describe(), c.workers, c.expected, c.length, c.describe)
		}
	}
}

// FromSpec refuses what Parse would, and specs without a built-in
// workload's parameters.
func TestFromSpecErrors(t *testing.T) {
	for _, c := range []struct {
		spec trace.Spec
		want string
	}{
		{trace.Spec{Workload: "command", Args: []string{"sleep", "1"}}, `workload "command" has no parameters`},
		{trace.Spec{Workload: "bursty", Params: &trace.Params{Engine: trace.EngineC}}, `workload "bursty" has no parameters`},
		{trace.Spec{Workload: "bursty", Params: &trace.Params{Periodic: &trace.PeriodicParams{Burn: 1, Iterations: 1, Threads: 1}}}, "has no parameters"},
		{trace.Spec{Workload: "periodic", Params: &trace.Params{Periodic: &trace.PeriodicParams{Burn: time.Millisecond, Threads: 1}}}, "--iterations must be at least 1"},
		{trace.Spec{Workload: "bursty", Params: &trace.Params{Bursty: &trace.BurstyParams{On: 1, Off: 1, Jitter: 2, Duration: 1, Threads: 1}}}, "--jitter"},
		{trace.Spec{Workload: "parallel", Params: &trace.Params{Parallel: &trace.ParallelParams{Threads: 1, Duration: time.Second, MaxPrime: 2}}}, "--max-prime"},
	} {
		if w, err := FromSpec(c.spec); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v %v, want an error with %q", c.spec, w, err, c.want)
		}
	}
}
