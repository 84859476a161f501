package workload

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

// Flags parse back into the workload they came from, whatever the
// defaults: every parameter is named.
func TestFlagsRoundTrip(t *testing.T) {
	for _, args := range [][]string{
		{"periodic", "--burn", "5ms", "--sleep", "100ms", "--iterations", "3", "--quiet"},
		{"periodic", "--burn-cpu", "2.5ms", "--threads", "2"},
		{"bursty", "--on", "50ms", "--off", "50ms", "--duration", "1s", "--jitter", "10ms", "--seed", "7"},
		{"bursty", "--on-cpu", "30ms", "--off", "137ms", "--threads", "4", "--pin=false"},
		{"bursty", "--on-cpu", "40ms", "--every", "1s", "--threads", "4"},
		{"parallel", "--threads", "3", "--duration", "1.5s", "--max-prime", "100", "--events", "9"},
		{"parallel", "--threads", "1", "--pin=false"},
	} {
		w, err := Parse(args[0], args[1:])
		if err != nil {
			t.Fatal(err)
		}
		back, err := Parse(w.Name(), Flags(w))
		if err != nil {
			t.Fatalf("%v: Flags %v: %v", args, Flags(w), err)
		}
		if !reflect.DeepEqual(back, w) {
			t.Errorf("%v: Flags %v parse to %+v, want %+v", args, Flags(w), back, w)
		}
	}
	// An event sized by CPU time comes back as the size it was timed at.
	w, err := Parse("parallel", []string{"--threads", "2", "--event", "200us"})
	if err != nil {
		t.Fatal(err)
	}
	back, err := Parse("parallel", Flags(w))
	if err != nil {
		t.Fatal(err)
	}
	want := *w.(*parallel)
	want.Event = 0
	if got := *back.(*parallel); got != want {
		t.Errorf("--event 200us: Flags %v parse to %+v, want %+v", Flags(w), got, want)
	}
}

// A thread cap keeps the work: T threads' operations done by n threads,
// each T/n as long, in a cycle as long as before where the idle time
// allows it.
func TestWithThreads(t *testing.T) {
	for _, c := range []struct {
		args []string
		n    int
		want []string // flags of the capped workload, parsed the same way
	}{
		// 4 threads, 40 ms of CPU once a second: one thread, 160 ms.
		{[]string{"bursty", "--threads", "4", "--on-cpu", "40ms", "--off", "960ms", "--jitter", "10ms"}, 1,
			[]string{"--threads", "1", "--on", "200ms", "--on-cpu", "160ms", "--off", "840ms", "--jitter", "10ms"}},
		// 3 threads to 2: each op 3/2 as long.
		{[]string{"bursty", "--threads", "3", "--on", "20ms", "--off", "80ms"}, 2,
			[]string{"--threads", "2", "--on", "30ms", "--off", "70ms"}},
		// The op outgrows the cycle: no idle time, and no jitter.
		{[]string{"bursty", "--threads", "4", "--on", "50ms", "--off", "50ms", "--jitter", "20ms"}, 1,
			[]string{"--threads", "1", "--on", "200ms", "--off", "0s", "--jitter", "0s"}},
		{[]string{"periodic", "--threads", "2", "--burn-cpu", "5ms", "--sleep", "100ms", "--iterations", "7"}, 1,
			[]string{"--threads", "1", "--burn", "10ms", "--burn-cpu", "10ms", "--sleep", "95ms", "--iterations", "7"}},
		// parallel: --events are counted in all.
		{[]string{"parallel", "--threads", "4", "--events", "400", "--duration", "2s"}, 2,
			[]string{"--threads", "2", "--events", "400", "--duration", "2s"}},
		// A cap at or above the threads changes nothing.
		{[]string{"bursty", "--threads", "2", "--on", "20ms"}, 2, []string{"--threads", "2", "--on", "20ms"}},
		{[]string{"parallel", "--threads", "2"}, 8, []string{"--threads", "2"}},
	} {
		w, err := Parse(c.args[0], c.args[1:])
		if err != nil {
			t.Fatal(err)
		}
		got, err := WithThreads(w, c.n)
		if err != nil {
			t.Fatalf("%v cap %d: %v", c.args, c.n, err)
		}
		want, err := Parse(c.args[0], append(append([]string{}, c.args[1:]...), c.want...))
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%v cap %d: %+v, want %+v", c.args, c.n, got, want)
		}
		if got.Workers() > c.n && c.n < w.Workers() {
			t.Errorf("%v cap %d: %d workers", c.args, c.n, got.Workers())
		}
	}
	w, _ := Parse("bursty", nil)
	if _, err := WithThreads(w, 0); err == nil || !strings.Contains(err.Error(), "at least 1") {
		t.Errorf("cap 0: %v", err)
	}
}

// The total CPU work of a closed workload is the same under the cap.
func TestWithThreadsKeepsWork(t *testing.T) {
	work := func(w Workload) time.Duration {
		switch w := w.(type) {
		case *periodic:
			return time.Duration(w.Threads*w.Iterations) * w.ExpectedOp()
		case *bursty:
			return time.Duration(w.Threads) * w.ExpectedOp() // per cycle
		}
		return 0
	}
	for _, args := range [][]string{
		{"periodic", "--threads", "4", "--burn-cpu", "3ms", "--iterations", "5"},
		{"periodic", "--threads", "6", "--burn", "7ms"},
		{"bursty", "--threads", "4", "--on-cpu", "40ms", "--off", "960ms"},
		{"bursty", "--threads", "5", "--on", "10ms"},
	} {
		w, err := Parse(args[0], args[1:])
		if err != nil {
			t.Fatal(err)
		}
		for n := 1; n <= w.Workers(); n++ {
			c, err := WithThreads(w, n)
			if err != nil {
				t.Fatal(err)
			}
			// Integer ns: at most one ns per thread lost.
			if d := work(w) - work(c); d < 0 || d > time.Duration(w.Workers()*50) {
				t.Errorf("%v cap %d: work %v, want %v", args, n, work(c), work(w))
			}
		}
	}
}
