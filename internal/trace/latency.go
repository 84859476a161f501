package trace

import (
	"fmt"
	"slices"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// Histogram range: up to 1000 s at 3 significant digits (0.1 %) all the
// way down. The lowest discernible value is 1 ns, not 1 us: HDR resolves
// values below 2048 x lowest only to lowest rounded down to a power of
// two, which with 1 us would be 512 ns (50 % at 1 us, 1 % at 50 us).
const (
	histMin     = 1
	histMax     = 1_000_000_000_000
	histSigFigs = 3
	// MaxSamples is how many raw operations a trace keeps; beyond that
	// only the histogram is kept.
	MaxSamples = 10_000
)

// NewHistogram returns an HDR histogram of nanosecond values with the
// range every cfsprobe histogram uses.
func NewHistogram() *hdrhistogram.Histogram {
	return hdrhistogram.New(histMin, histMax, histSigFigs)
}

// Latency holds per-operation latencies of a run.
type Latency struct {
	// Op says what one operation is ("burn", "burst", "event").
	Op string `json:"op"`
	// Count is the number of operations.
	Count int64 `json:"count"`
	// Buckets is the HDR histogram, sparse: [low_ns, high_ns, count] for
	// every non-empty bucket (values in a bucket are equivalent at the
	// histogram's precision, 3 significant digits).
	Buckets [][3]int64 `json:"buckets"`
	// Samples are the raw operations when there are at most MaxSamples.
	Samples []Sample `json:"samples,omitempty"`
}

// Sample is one operation.
type Sample struct {
	// StartNs is when it began, ns since the start of the run.
	StartNs int64 `json:"start_ns"`
	// WallNs is how long it took.
	WallNs int64 `json:"wall_ns"`
	// CPUNs is the CPU time the thread spent on it.
	CPUNs int64 `json:"cpu_ns"`
	// Thread is the worker that ran it.
	Thread int `json:"thread,omitempty"`
}

// LatencyFromHistogram builds the sparse form of a histogram.
func LatencyFromHistogram(op string, h *hdrhistogram.Histogram) *Latency {
	l := &Latency{Op: op, Count: h.TotalCount(), Buckets: [][3]int64{}}
	for _, b := range h.Distribution() {
		if b.Count > 0 {
			l.Buckets = append(l.Buckets, [3]int64{b.From, b.To, b.Count})
		}
	}
	return l
}

// Histogram rebuilds the HDR histogram from the sparse buckets.
func (l *Latency) Histogram() (*hdrhistogram.Histogram, error) {
	h := NewHistogram()
	for _, b := range l.Buckets {
		if b[2] < 0 || b[0] > b[1] {
			return nil, fmt.Errorf("latency bucket %v: invalid", b)
		}
		if err := h.RecordValues(b[0], b[2]); err != nil {
			return nil, fmt.Errorf("latency bucket %v: %w", b, err)
		}
	}
	return h, nil
}

// Percentiles summarises the distribution. Raw samples give exact values;
// otherwise the histogram's (within 0.1 %).
func (l *Latency) Percentiles() (*Percentiles, error) {
	if l == nil || l.Count == 0 {
		return nil, nil
	}
	if v := l.Walls(); v != nil {
		var sum float64
		for _, w := range v {
			sum += float64(w)
		}
		return &Percentiles{
			Min: v[0], Max: v[len(v)-1], Mean: sum / float64(len(v)),
			P50: Quantile(v, 0.50), P90: Quantile(v, 0.90), P99: Quantile(v, 0.99), P999: Quantile(v, 0.999),
		}, nil
	}
	h, err := l.Histogram()
	if err != nil {
		return nil, err
	}
	return &Percentiles{
		Min: h.Min(), Max: h.Max(), Mean: h.Mean(),
		P50: h.ValueAtQuantile(50), P90: h.ValueAtQuantile(90), P99: h.ValueAtQuantile(99), P999: h.ValueAtQuantile(99.9),
	}, nil
}

// Quantile returns the nearest-rank quantile q (0..1) of sorted values.
func Quantile(sorted []int64, q float64) int64 {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[quantileIndex(len(sorted), q)]
}

// quantileIndex is the index of the nearest-rank quantile q of n sorted
// values.
func quantileIndex(n int, q float64) int {
	return max(0, min(int(q*float64(n)+0.999999999)-1, n-1))
}

// NextTo is the value shift ranks from the nearest-rank quantile q of
// sorted values (shift -1: the one below it, +1: the one above); ok is
// false when there is none there.
func NextTo(sorted []int64, q float64, shift int) (v int64, ok bool) {
	i := quantileIndex(len(sorted), q) + shift
	if len(sorted) == 0 || i < 0 || i >= len(sorted) {
		return 0, false
	}
	return sorted[i], true
}

// Walls are the operations' wall times, sorted, from the raw samples;
// nil without them (none, or more than MaxSamples operations).
func (l *Latency) Walls() []int64 {
	if l == nil || len(l.Samples) == 0 || int64(len(l.Samples)) != l.Count {
		return nil
	}
	v := make([]int64, len(l.Samples))
	for i, s := range l.Samples {
		v[i] = s.WallNs
	}
	slices.Sort(v)
	return v
}

// Throughput counts completed operations per bucket of BucketNs, from the
// start of the run.
type Throughput struct {
	BucketNs int64   `json:"bucket_ns"`
	Counts   []int64 `json:"counts"`
}
