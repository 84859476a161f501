package trace

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

func TestQuantile(t *testing.T) {
	ten := []int64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	tests := []struct {
		name   string
		sorted []int64
		q      float64
		want   int64
	}{
		{"empty", nil, 0.5, 0},
		{"one value", []int64{7}, 0.999, 7},
		{"min", ten, 0, 1},
		{"p10 is the 1st", ten, 0.10, 1},
		{"p11 is the 2nd", ten, 0.11, 2},
		{"p50 is the 5th", ten, 0.50, 5},
		{"p90 is the 9th", ten, 0.90, 9},
		{"p99 is the 10th", ten, 0.99, 10},
		{"max", ten, 1, 10},
		{"above 1 clamps", ten, 1.5, 10},
		{"below 0 clamps", ten, -1, 1},
		{"p999 of 1000 is the 999th", seq(1000), 0.999, 999},
		{"p99 of 100 is the 99th", seq(100), 0.99, 99},
		{"p50 of 3 is the 2nd", []int64{1, 2, 3}, 0.5, 2},
	}
	for _, tc := range tests {
		if got := Quantile(tc.sorted, tc.q); got != tc.want {
			t.Errorf("%s: Quantile(q=%v) = %d, want %d", tc.name, tc.q, got, tc.want)
		}
	}
}

func seq(n int) []int64 {
	v := make([]int64, n)
	for i := range v {
		v[i] = int64(i + 1)
	}
	return v
}

func latencyOf(values []int64) *Latency {
	h := NewHistogram()
	for _, v := range values {
		if err := h.RecordValue(v); err != nil {
			panic(err)
		}
	}
	l := LatencyFromHistogram("burn", h)
	if len(values) <= MaxSamples {
		for i, v := range values {
			l.Samples = append(l.Samples, Sample{StartNs: int64(i), WallNs: v})
		}
	}
	return l
}

func TestPercentilesExact(t *testing.T) {
	l := latencyOf([]int64{5_000, 1_000, 3_000, 2_000, 4_000})
	p, err := l.Percentiles()
	if err != nil {
		t.Fatal(err)
	}
	want := Percentiles{Min: 1_000, Max: 5_000, Mean: 3_000, P50: 3_000, P90: 5_000, P99: 5_000, P999: 5_000}
	if *p != want {
		t.Errorf("Percentiles = %+v, want %+v", *p, want)
	}
}

// NextTo: the operation a rank below or above the nearest-rank
// quantile, of the raw samples only (Walls).
func TestLatencyNextTo(t *testing.T) {
	l := latencyOf([]int64{50, 10, 40, 30, 20}) // p99 is 50, p50 30
	walls := l.Walls()
	if !slices.Equal(walls, []int64{10, 20, 30, 40, 50}) {
		t.Fatalf("Walls = %v, want them sorted", walls)
	}
	for _, c := range []struct {
		q     float64
		shift int
		want  int64
		ok    bool
	}{
		{0.99, -1, 40, true},
		{0.99, 1, 0, false}, // none above the slowest
		{0.5, -1, 20, true},
		{0.5, 1, 40, true},
		{0, -1, 0, false},
	} {
		got, ok := NextTo(walls, c.q, c.shift)
		if got != c.want || ok != c.ok {
			t.Errorf("NextTo(%v, %d) = %d, %v; want %d, %v", c.q, c.shift, got, ok, c.want, c.ok)
		}
	}
	var none *Latency
	if _, ok := NextTo(none.Walls(), 0.99, -1); ok {
		t.Error("NextTo of no latency: ok")
	}
	big := latencyOf(seq(MaxSamples + 1)) // the histogram only
	if _, ok := NextTo(big.Walls(), 0.99, -1); ok {
		t.Error("NextTo without the raw samples: ok")
	}
}

func TestPercentilesEmpty(t *testing.T) {
	var nilL *Latency
	for _, l := range []*Latency{nilL, {Op: "burn"}} {
		p, err := l.Percentiles()
		if p != nil || err != nil {
			t.Errorf("Percentiles of %+v = %+v, %v; want nil, nil", l, p, err)
		}
	}
}

// The histogram's percentiles are within its precision (0.1 %) of the
// exact ones from the raw samples.
func TestPercentilesHistogramMatchesExact(t *testing.T) {
	dists := []struct {
		name string
		draw func(r *rand.Rand) int64
	}{
		{"uniform 1-100ms", func(r *rand.Rand) int64 { return 1_000_000 + r.Int64N(99_000_000) }},
		{"log-normal around 2ms", func(r *rand.Rand) int64 { return int64(2e6 * math.Exp(0.8*r.NormFloat64())) }},
		// A throttled loop: most operations take 1ms, one in five waits
		// out the rest of an 80ms throttle.
		{"bimodal throttled", func(r *rand.Rand) int64 {
			if r.IntN(5) == 0 {
				return 80_000_000 + r.Int64N(1_000_000)
			}
			return 1_000_000 + r.Int64N(50_000)
		}},
		{"sub-microsecond and seconds", func(r *rand.Rand) int64 {
			if r.IntN(2) == 0 {
				return 1_000 + r.Int64N(1_000)
			}
			return 1e9 + r.Int64N(1e9)
		}},
	}
	for _, d := range dists {
		t.Run(d.name, func(t *testing.T) {
			r := rand.New(rand.NewPCG(1, 2))
			// MaxSamples values: q*n is a whole rank for every
			// percentile reported, so both ways pick the same sample.
			values := make([]int64, MaxSamples)
			for i := range values {
				values[i] = max(d.draw(r), 1_000)
			}
			l := latencyOf(values)
			exact, err := l.Percentiles()
			if err != nil {
				t.Fatal(err)
			}
			sorted := slices.Clone(values)
			slices.Sort(sorted)
			if exact.Min != sorted[0] || exact.Max != sorted[len(sorted)-1] || exact.P50 != Quantile(sorted, 0.5) {
				t.Errorf("exact percentiles %+v do not come from the samples", exact)
			}

			l.Samples = nil // only the histogram left
			hist, err := l.Percentiles()
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range []struct {
				name       string
				exact, got float64
			}{
				{"min", float64(exact.Min), float64(hist.Min)},
				{"max", float64(exact.Max), float64(hist.Max)},
				{"mean", exact.Mean, hist.Mean},
				{"p50", float64(exact.P50), float64(hist.P50)},
				{"p90", float64(exact.P90), float64(hist.P90)},
				{"p99", float64(exact.P99), float64(hist.P99)},
				{"p99.9", float64(exact.P999), float64(hist.P999)},
			} {
				if rel := math.Abs(c.got-c.exact) / c.exact; rel > 0.001 {
					t.Errorf("%s: histogram %.0f, exact %.0f: off by %.3f%%", c.name, c.got, c.exact, 100*rel)
				}
			}
		})
	}
}

// With some raw samples dropped (more than MaxSamples operations) the
// histogram is used, not the partial samples.
func TestPercentilesPartialSamplesUseHistogram(t *testing.T) {
	l := latencyOf([]int64{1_000_000, 2_000_000, 3_000_000, 100_000_000})
	l.Samples = l.Samples[:2]
	p, err := l.Percentiles()
	if err != nil {
		t.Fatal(err)
	}
	if rel := math.Abs(float64(p.Max)-1e8) / 1e8; rel > 0.001 {
		t.Errorf("Max = %d, want about 1e8 from the histogram", p.Max)
	}
}

// The sparse buckets rebuild the histogram they came from.
func TestLatencyHistogramRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	h := NewHistogram()
	for range 5000 {
		if err := h.RecordValue(1_000 + r.Int64N(1e10)); err != nil {
			t.Fatal(err)
		}
	}
	l := LatencyFromHistogram("event", h)
	if l.Count != h.TotalCount() || l.Op != "event" {
		t.Errorf("Latency %q count %d, want %d", l.Op, l.Count, h.TotalCount())
	}
	for i, b := range l.Buckets {
		if b[2] <= 0 || b[0] > b[1] || (i > 0 && b[0] <= l.Buckets[i-1][1]) {
			t.Fatalf("bucket %d %v: empty, inverted or out of order", i, b)
		}
	}
	back, err := l.Histogram()
	if err != nil {
		t.Fatal(err)
	}
	if !back.Equals(h) {
		t.Error("histogram rebuilt from the buckets differs from the original")
	}
}

func TestLatencyHistogramRejectsBadBuckets(t *testing.T) {
	for _, b := range [][3]int64{
		{2_000, 1_000, 1},               // low above high
		{1_000, 1_000, -1},              // negative count
		{-5, -5, 1},                     // negative value
		{histMax * 10, histMax * 10, 1}, // beyond the range
	} {
		l := &Latency{Op: "burn", Count: 1, Buckets: [][3]int64{b}}
		if _, err := l.Histogram(); err == nil {
			t.Errorf("Histogram of bucket %v: no error", b)
		}
		if _, err := l.Percentiles(); err == nil {
			t.Errorf("Percentiles of bucket %v: no error", b)
		}
	}
}
