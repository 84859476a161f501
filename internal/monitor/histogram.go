package monitor

import (
	"time"

	"github.com/cfsprobe/cfsprobe/internal/trace"
)

// Histogram counts observations in buckets with the upper bounds Bounds
// (the last bucket, +Inf, is implied).
type Histogram struct {
	Bounds []float64 // shared, not copied
	Counts []uint64  // per bucket, not cumulative: len(Bounds)+1
	Sum    float64
	Count  uint64
}

func newHistogram(bounds []float64) Histogram {
	return Histogram{Bounds: bounds, Counts: make([]uint64, len(bounds)+1)}
}

// Observe counts v.
func (h *Histogram) Observe(v float64) {
	i := 0
	for i < len(h.Bounds) && v > h.Bounds[i] {
		i++
	}
	h.Counts[i]++
	h.Sum += v
	h.Count++
}

func (h Histogram) clone() Histogram {
	h.Counts = append([]uint64(nil), h.Counts...)
	return h
}

// PeriodHistograms are the per-period figures of a group: those of its
// periods that the readings saw closely (trace.Period.Blurred is false),
// each figure as trace.Period defines it.
type PeriodHistograms struct {
	Usage      Histogram // usage per period as a fraction of the quota
	Stall      Histogram // stall per throttled period, in seconds
	UnderQuota uint64    // throttled periods with usage under trace.UnderQuotaRatio of the quota
	MaxStallNs int64     // the longest stall
}

// Observe counts one period of a group with the given quota; a blurred
// period is not counted.
func (h *PeriodHistograms) Observe(p trace.Period, quota time.Duration) {
	if p.Blurred {
		return
	}
	h.Usage.Observe(p.UsageRatio(quota))
	if p.Throttled {
		h.Stall.Observe(time.Duration(p.StallNs).Seconds())
		h.MaxStallNs = max(h.MaxStallNs, p.StallNs)
		if p.ThrottledUnderQuota(quota) {
			h.UnderQuota++
		}
	}
}
