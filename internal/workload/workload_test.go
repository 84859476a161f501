package workload

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestParse(t *testing.T) {
	good := [][]string{
		{"periodic", "--burn", "5ms", "--sleep", "100ms", "--iterations", "3"},
		{"periodic", "--burn-cpu", "2ms"},
		{"bursty", "--on", "50ms", "--off", "50ms", "--duration", "1s", "--jitter", "10ms"},
		{"bursty", "--on-cpu", "30ms", "--off", "137ms"},
		{"parallel", "--threads", "3", "--duration", "1s", "--max-prime", "100", "--pin=false"},
	}
	for _, g := range good {
		w, err := Parse(g[0], g[1:])
		if err != nil {
			t.Errorf("%v: %v", g, err)
			continue
		}
		if w.Name() != g[0] || w.Op() == "" || len(w.Params()) == 0 {
			t.Errorf("%v: name %q op %q params %v", g, w.Name(), w.Op(), w.Params())
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
		{[]string{"parallel", "--threads", "0"}, "--threads"},
		{[]string{"parallel", "--max-prime", "2"}, "--max-prime"},
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
