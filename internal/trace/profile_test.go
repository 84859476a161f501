package trace

import (
	"math"
	"testing"
)

// A workload that completes 10 ops/ms for the first 50 ms of each 100 ms
// period and nothing after (quota spent) gives a profile of 10, 10, 5
// (the slot straddling 50 ms), 0, 0 in 20 ms slots.
func TestInPeriodProfile(t *testing.T) {
	const ms = int64(1e6)
	tr := &Trace{Limits: Limits{PeriodUs: 100_000}, Throughput: &Throughput{BucketNs: ms}}
	start := 7 * ms // periods start 7 ms into the run
	for i := 0; i < 5; i++ {
		tr.Periods = append(tr.Periods, Period{StartNs: start + int64(i)*100*ms, EndNs: start + int64(i+1)*100*ms, Kernel: true})
	}
	tr.Periods = append([]Period{{StartNs: start - 100*ms, EndNs: start, Kernel: true}}, tr.Periods...) // before the run: skipped
	for b := int64(0); b < 520; b++ {
		off := (b*ms - start) % (100 * ms)
		c := int64(0)
		if b*ms >= start && off < 50*ms {
			c = 10
		}
		tr.Throughput.Counts = append(tr.Throughput.Counts, c)
	}
	p := tr.InPeriodProfile(20 * ms)
	want := []float64{10, 10, 5, 0, 0}
	if len(p) != len(want) {
		t.Fatalf("got %d slots, want %d", len(p), len(want))
	}
	for i, w := range want {
		if math.Abs(p[i].OpsPerMs-w) > 1e-9 || p[i].OffsetNs != int64(i)*20*ms {
			t.Errorf("slot %d: %+v, want %.1f ops/ms at %d ms", i, p[i], w, i*20)
		}
	}
	if (&Trace{}).InPeriodProfile(20*ms) != nil {
		t.Error("a trace without throughput has no profile")
	}
}
