package trace

import (
	"math"
	"sort"
)

// CounterSample is one reading of a group's counters, T in ns since the
// start of the run, durations in ns.
type CounterSample struct {
	T           int64 `json:"t"`
	UsageNs     int64 `json:"usage_ns"`
	NrPeriods   int64 `json:"nr_periods"`
	NrThrottled int64 `json:"nr_throttled"`
	ThrottledNs int64 `json:"throttled_ns"`
	NrBursts    int64 `json:"nr_bursts"`
	BurstNs     int64 `json:"burst_ns"`
}

// BuildTimeline turns counter samples into the per-period timeline.
//
// With a quota (kernel=true) the kernel's period timer bumps nr_periods
// (and nr_throttled, when the period that just ended was throttled) at
// every period boundary while the group is active; boundaries lie on a
// regular grid of the period length. Each boundary is located between the
// two samples that saw the counter change; the grid's phase, estimated
// from all such intervals together, places it more precisely than one
// sampling interval. Usage is interpolated at the period's two ends. If
// several boundaries fell between two samples, the throttled ones are
// taken to be those that used the most CPU.
//
// Without a quota (kernel=false) there is no enforcement period: the
// timeline is wall-clock windows of one period from the start, so that
// limited and unlimited runs can be drawn alike.
//
// By construction the number of throttled periods equals the nr_throttled
// delta between the first and the last sample.
func BuildTimeline(samples []CounterSample, periodNs int64, kernel bool) []Period {
	if len(samples) < 2 || periodNs <= 0 {
		return []Period{}
	}
	if !kernel {
		return wallclockWindows(samples, periodNs)
	}
	phase, havePhase := estimatePhase(samples, periodNs)
	out := []Period{}
	for i := 1; i < len(samples); i++ {
		a, b := samples[i-1], samples[i]
		dp := b.NrPeriods - a.NrPeriods
		if dp <= 0 {
			continue
		}
		end := b.T
		if havePhase {
			// The grid point in (a.T, b.T] nearest the sample that saw it.
			k := math.Floor(float64(b.T-phase) / float64(periodNs))
			g := phase + int64(k)*periodNs
			if g > a.T && g <= b.T {
				end = g
			}
		}
		n := int(dp)
		ps := make([]Period, n)
		for j := 0; j < n; j++ {
			e := end - int64(n-1-j)*periodNs
			s := e - periodNs
			ps[j] = Period{
				StartNs: s, EndNs: e, Kernel: true,
				UsageNs: usageAt(samples, e) - usageAt(samples, s),
			}
		}
		dt := int(min(b.NrThrottled-a.NrThrottled, dp))
		dtt := b.ThrottledNs - a.ThrottledNs
		dbt := b.BurstNs - a.BurstNs
		if dt > 0 {
			// Mark the dt periods that used the most CPU (all of them when n == dt).
			idx := make([]int, n)
			for j := range idx {
				idx[j] = j
			}
			sort.SliceStable(idx, func(x, y int) bool { return ps[idx[x]].UsageNs > ps[idx[y]].UsageNs })
			for _, j := range idx[:dt] {
				ps[j].Throttled = true
				ps[j].ThrottledNs = dtt / int64(dt)
			}
			ps[idx[0]].ThrottledNs += dtt - dtt/int64(dt)*int64(dt)
		} else if dtt > 0 {
			// Stall time without a throttled period (the kernel accounts
			// them separately): keep it on the last period.
			ps[n-1].ThrottledNs = dtt
		}
		ps[n-1].BurstNs = dbt
		out = append(out, ps...)
	}
	return out
}

// usageAt interpolates cumulative usage at time t between samples.
func usageAt(s []CounterSample, t int64) int64 {
	if t <= s[0].T {
		return s[0].UsageNs
	}
	last := s[len(s)-1]
	if t >= last.T {
		return last.UsageNs
	}
	i := sort.Search(len(s), func(i int) bool { return s[i].T >= t })
	a, b := s[i-1], s[i]
	if b.T == a.T {
		return b.UsageNs
	}
	f := float64(t-a.T) / float64(b.T-a.T)
	return a.UsageNs + int64(f*float64(b.UsageNs-a.UsageNs))
}

// estimatePhase finds phase such that boundaries are at phase + k*period,
// from the sampling intervals in which exactly one boundary was seen. It
// fails when the intervals have no common point (the grid moved).
func estimatePhase(s []CounterSample, periodNs int64) (int64, bool) {
	var ref int64
	have := false
	lo, hi := math.Inf(-1), math.Inf(1)
	for i := 1; i < len(s); i++ {
		if s[i].NrPeriods-s[i-1].NrPeriods != 1 {
			continue
		}
		if !have {
			ref, have = s[i].T, true
		}
		// Offset of this interval's end from ref, wrapped into (-P/2, P/2].
		off := (s[i].T - ref) % periodNs
		if off > periodNs/2 {
			off -= periodNs
		} else if off <= -periodNs/2 {
			off += periodNs
		}
		h := float64(off)
		l := h - float64(s[i].T-s[i-1].T)
		lo, hi = math.Max(lo, l), math.Min(hi, h)
	}
	if !have || lo >= hi {
		return 0, false
	}
	p := ref + int64((lo+hi)/2)
	return p, true
}

func wallclockWindows(s []CounterSample, periodNs int64) []Period {
	out := []Period{}
	end := s[len(s)-1].T
	for t := s[0].T; t < end; t += periodNs {
		e := min(t+periodNs, end)
		out = append(out, Period{StartNs: t, EndNs: e, UsageNs: usageAt(s, e) - usageAt(s, t)})
	}
	return out
}

// CountThrottled counts the timeline's throttled periods.
func CountThrottled(ps []Period) int64 {
	var n int64
	for _, p := range ps {
		if p.Throttled {
			n++
		}
	}
	return n
}
