package trace

// Slot is one column of an in-period profile: the mean throughput at an
// offset inside the enforcement period.
type Slot struct {
	OffsetNs int64   `json:"offset_ns"` // from the start of the period
	WidthNs  int64   `json:"width_ns"`
	OpsPerMs float64 `json:"ops_per_ms"` // mean over the periods profiled
}

// InPeriodProfile averages the throughput of every complete period of the
// timeline in consecutive slots of slotNs (the seed-001 checkpoints were
// 20 ms): how much work gets done early in a period, while quota is left,
// and late, once it is gone. It returns nil when the trace has no
// throughput buckets or no complete period.
func (t *Trace) InPeriodProfile(slotNs int64) []Slot {
	tp := t.Throughput
	periodNs := t.Limits.PeriodUs * 1000
	if tp == nil || tp.BucketNs <= 0 || slotNs <= 0 || periodNs <= 0 || len(tp.Counts) == 0 {
		return nil
	}
	nslots := int(periodNs / slotNs)
	if nslots == 0 {
		return nil
	}
	sums := make([]float64, nslots)
	n := 0
	runEnd := int64(len(tp.Counts)) * tp.BucketNs
	for _, p := range t.Periods {
		if p.StartNs < 0 || p.StartNs+periodNs > runEnd {
			continue // only periods entirely inside the workload's run
		}
		n++
		for k := 0; k < nslots; k++ {
			from := p.StartNs + int64(k)*slotNs
			sums[k] += countBetween(tp, from, from+slotNs)
		}
	}
	if n == 0 {
		return nil
	}
	out := make([]Slot, nslots)
	for k := range out {
		out[k] = Slot{OffsetNs: int64(k) * slotNs, WidthNs: slotNs, OpsPerMs: sums[k] / float64(n) / (float64(slotNs) / 1e6)}
	}
	return out
}

// countBetween counts operations completed in [from, to), splitting the
// buckets at the ends proportionally.
func countBetween(tp *Throughput, from, to int64) float64 {
	var c float64
	for b := from / tp.BucketNs; b*tp.BucketNs < to && b < int64(len(tp.Counts)); b++ {
		if b < 0 {
			continue
		}
		lo, hi := max(b*tp.BucketNs, from), min((b+1)*tp.BucketNs, to)
		if hi > lo {
			c += float64(tp.Counts[b]) * float64(hi-lo) / float64(tp.BucketNs)
		}
	}
	return c
}
