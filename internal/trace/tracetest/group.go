// Package tracetest simulates, for tests, the counters of a group under
// CFS bandwidth control as cpu.stat and the usage file show them: the one
// synthetic group of cfsprobe's tests of period tracking (internal/trace)
// and of the monitor's sampler.
package tracetest

import (
	"math"
	"math/rand/v2"
	"time"

	"github.com/cfsprobe/cfsprobe/internal/trace"
)

// Group is a kernel's view of one group: its period timer fires at Phase
// + k*Period (k >= 1), period k running from Phase + k*Period to the next
// boundary; before Phase the group is idle. In every period the group
// runs on CPUs CPUs from the period's start until it has used Usage(k)
// (or, with Spread, uses it evenly over the period), and the boundary that
// ends period k counts it throttled (and adds its throttled time) when
// Throttled(k).
type Group struct {
	Period, Phase time.Duration
	CPUs          float64
	Usage         func(k int) time.Duration
	Throttled     func(k int) bool
	ThrottledTime func(k int) time.Duration // summed over CPUs
	// ThrLag delays nr_throttled and throttled_time behind nr_periods at
	// each boundary: cpu.stat is read without the bandwidth lock.
	ThrLag time.Duration
	// Spread: the group uses Usage(k) evenly over the period instead of
	// running from its start until done.
	Spread bool
}

// Boundary is the end of period k.
func (g Group) Boundary(k int) time.Duration { return g.Phase + time.Duration(k+1)*g.Period }

// PeriodAt is the k of the period that ends nearest end.
func (g Group) PeriodAt(end int64) int {
	return int((time.Duration(end)-g.Phase+g.Period/2)/g.Period) - 1
}

// At is the group's counters at t.
func (g Group) At(t time.Duration) trace.CounterSample {
	s := trace.CounterSample{T: int64(t)}
	if t < g.Phase {
		return s
	}
	cur := int((t - g.Phase) / g.Period) // the running period
	for k := 0; k <= cur; k++ {
		start := g.Phase + time.Duration(k)*g.Period
		u := g.Usage(k)
		if k < cur {
			s.UsageNs += int64(u)
			s.NrPeriods++
			if g.Throttled(k) && t >= start+g.Period+g.ThrLag {
				s.NrThrottled++
				s.ThrottledNs += int64(g.ThrottledTime(k))
			}
			continue
		}
		if g.Spread {
			s.UsageNs += int64(u) * int64(t-start) / int64(g.Period)
			continue
		}
		s.UsageNs += int64(min(u, time.Duration(g.CPUs*float64(t-start))))
	}
	return s
}

// SampleAt reads g at the given times.
func (g Group) SampleAt(times []time.Duration) []trace.CounterSample {
	out := make([]trace.CounterSample, len(times))
	for i, t := range times {
		out[i] = g.At(t)
	}
	return out
}

// Samples reads g for n periods from off, as the samplers do: every
// period/10, each interval drawn from 0.8 to 1.2 times that (jitter
// true), so that the readings drift over every phase of the period.
func (g Group) Samples(off time.Duration, n int, jitter bool, seed uint64) []trace.CounterSample {
	r := rand.New(rand.NewPCG(seed, 1))
	var out []trace.CounterSample
	step := g.Period / 10
	for t := off; t < off+time.Duration(n)*g.Period; {
		out = append(out, g.At(t))
		if jitter {
			t += time.Duration(float64(step) * (0.8 + 0.4*r.Float64()))
		} else {
			t += step
		}
	}
	return out
}

// Always is a Throttled that is always true; Never one that never is.
func Always(int) bool { return true }

// Never is a Throttled that is never true.
func Never(int) bool { return false }

// Const is a Usage or ThrottledTime that is always d.
func Const(d time.Duration) func(int) time.Duration { return func(int) time.Duration { return d } }

// Summary is what tests check of a run of periods: those seen closely
// (not blurred), how many were throttled and throttled under quota, and
// the range of their usage ratios and stalls.
type Summary struct {
	Periods, Throttled, Under int
	MinRatio, MaxRatio        float64
	MinStall, MaxStall        time.Duration
}

// Summarize sums up the periods of a group with the given quota.
func Summarize(ps []trace.Period, quota time.Duration) Summary {
	s := Summary{MinRatio: math.Inf(1), MaxRatio: math.Inf(-1), MinStall: time.Hour}
	for _, p := range ps {
		if p.Blurred {
			continue
		}
		s.Periods++
		r := p.UsageRatio(quota)
		s.MinRatio, s.MaxRatio = min(s.MinRatio, r), max(s.MaxRatio, r)
		if p.Throttled {
			s.Throttled++
			s.MinStall, s.MaxStall = min(s.MinStall, time.Duration(p.StallNs)), max(s.MaxStall, time.Duration(p.StallNs))
		}
		if p.ThrottledUnderQuota(quota) {
			s.Under++
		}
	}
	return s
}
