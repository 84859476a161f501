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

// copyInto copies h, its counts into into's (reused when large enough).
func (h Histogram) copyInto(into Histogram) Histogram {
	h.Counts = append(into.Counts[:0], h.Counts...)
	return h
}

// copyInto copies the histograms, their counts into into's: a snapshot
// taken again into the last one allocates nothing.
func (h PeriodHistograms) copyInto(into PeriodHistograms) PeriodHistograms {
	h.Usage, h.Demand, h.Stall = h.Usage.copyInto(into.Usage), h.Demand.copyInto(into.Demand), h.Stall.copyInto(into.Stall)
	h.Stopped, h.Pairs = h.Stopped.copyInto(into.Stopped), h.Pairs.copyInto(into.Pairs)
	return h
}

// PeriodHistograms are the per-period figures of a group: those of its
// periods that the readings saw closely (trace.Period.Blurred is false),
// each figure as trace.Period defines it.
type PeriodHistograms struct {
	Usage  Histogram // usage per period as a fraction of the quota
	Demand Histogram // demand per period (trace.Period.DemandCPUs), in CPUs
	// Pairs is the mean demand of each period and the one just before it
	// (both seen closely, the one ending where the other starts), in
	// CPUs: how the heavy periods follow each other, which Demand does
	// not keep.
	Pairs      Histogram
	Stall      Histogram // stall per throttled period, in seconds
	Stopped    Histogram // CPUs stopped per throttled period (trace.Period.Stopped)
	UnderQuota uint64    // throttled periods with usage under trace.UnderQuotaRatio of the quota
	MaxStallNs int64     // the longest stall
	// Stretches are the throttled stretches that ended, and those the
	// group caught up after, over all its periods, blurred ones too (a
	// recording's periods as the recommender reads them).
	Stretches trace.Stretches

	lastEnd    int64   // where the last period seen closely ended (0: none)
	lastDemand float64 // its demand
}

// NewPeriodHistograms are empty histograms with the given buckets' upper
// bounds; the pairs' are the demand's.
func NewPeriodHistograms(usage, demand, stall, stopped []float64) PeriodHistograms {
	return PeriodHistograms{Usage: newHistogram(usage), Demand: newHistogram(demand), Pairs: newHistogram(demand),
		Stall: newHistogram(stall), Stopped: newHistogram(stopped)}
}

// Observe counts one period of a group with the given quota that can run
// on at most cpus CPUs (0: no bound); a blurred period is counted in
// Stretches only.
func (h *PeriodHistograms) Observe(p trace.Period, quota time.Duration, cpus int) {
	h.Stretches.Add(p, quota)
	if p.Blurred {
		h.lastEnd = 0
		return
	}
	d := p.DemandCPUs(float64(cpus))
	h.Usage.Observe(p.UsageRatio(quota))
	h.Demand.Observe(d)
	if h.lastEnd != 0 && h.lastEnd == p.StartNs {
		h.Pairs.Observe((h.lastDemand + d) / 2)
	}
	h.lastEnd, h.lastDemand = p.EndNs, d
	if p.Throttled {
		h.Stall.Observe(time.Duration(p.StallNs).Seconds())
		h.Stopped.Observe(float64(p.Stopped()))
		h.MaxStallNs = max(h.MaxStallNs, p.StallNs)
		if p.ThrottledUnderQuota(quota) {
			h.UnderQuota++
		}
	}
}
