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
	// Counts no period of their own interval can take: cpu.stat is read
	// without the bandwidth lock, so a reading can see nr_periods bumped
	// and nr_throttled not yet (or the reverse), and stall and burst time
	// can grow between boundaries. They go to the latest period, or to
	// the next one when there is none yet.
	var carryThr, carryStall, carryBurst int64
	for i := 1; i < len(samples); i++ {
		a, b := samples[i-1], samples[i]
		dp := b.NrPeriods - a.NrPeriods
		dthr := max(b.NrThrottled-a.NrThrottled, 0) + carryThr
		dtt := b.ThrottledNs - a.ThrottledNs + carryStall
		dbt := b.BurstNs - a.BurstNs + carryBurst
		carryThr, carryStall, carryBurst = 0, 0, 0
		if dp <= 0 {
			if len(out) == 0 {
				carryThr, carryStall, carryBurst = dthr, dtt, dbt
				continue
			}
			carryThr = markLatest(out, dthr)
			out[len(out)-1].ThrottledNs += dtt
			out[len(out)-1].BurstNs += dbt
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
		dt := int(min(dthr, dp))
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
		// More throttled periods than boundaries: the rest were earlier.
		carryThr = markLatest(out, dthr-int64(dt))
		out = append(out, ps...)
	}
	return out
}

// markLatest marks up to n of the latest unthrottled periods throttled and
// returns how many it could not mark.
func markLatest(ps []Period, n int64) int64 {
	for j := len(ps) - 1; j >= 0 && n > 0; j-- {
		if !ps[j].Throttled {
			ps[j].Throttled = true
			n--
		}
	}
	return n
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
// from the sampling intervals in which exactly one boundary was seen: each
// puts the phase in an arc of the circle of one period's length. The
// phase is the middle of the longest stretch of the circle that the most
// intervals agree on, so that an interval that disagrees (a reading
// stamped late, after a boundary it did not see) does not throw the
// estimate away. It fails when no stretch has a majority (the grid moved).
func estimatePhase(s []CounterSample, periodNs int64) (int64, bool) {
	type edge struct {
		x int64 // position on the circle, in [0, period)
		d int   // +1 where an arc (x, ...] starts, -1 where one ends
	}
	var edges []edge
	n, cover := 0, 0
	for i := 1; i < len(s); i++ {
		lo, hi := s[i-1].T, s[i].T
		if s[i].NrPeriods-s[i-1].NrPeriods != 1 || hi <= lo || hi-lo >= periodNs {
			continue // several boundaries, or an interval that says nothing
		}
		a, b := mod(lo, periodNs), mod(hi, periodNs)
		edges = append(edges, edge{a, +1}, edge{b, -1})
		n++
		if b < a {
			cover++ // the arc (a, b] wraps through 0
		}
	}
	if n == 0 {
		return 0, false
	}
	sort.Slice(edges, func(i, j int) bool { return edges[i].x < edges[j].x })
	// The stretches between consecutive edge positions and how many arcs
	// cover each; the last one wraps round to the first position.
	type stretch struct {
		from, to int64
		cover    int
	}
	var st []stretch
	best := 0
	for j := 0; j < len(edges); {
		x := edges[j].x
		for ; j < len(edges) && edges[j].x == x; j++ {
			cover += edges[j].d
		}
		to := edges[0].x + periodNs
		if j < len(edges) {
			to = edges[j].x
		}
		st = append(st, stretch{x, to, cover})
		best = max(best, cover)
	}
	if 2*best <= n {
		return 0, false
	}
	// The longest run of adjacent stretches with the best cover, going
	// round the circle once from a stretch that is not in such a run.
	first := 0
	for first < len(st) && st[first].cover == best {
		first++
	}
	if first == len(st) { // cannot happen: every arc is shorter than the period
		return 0, false
	}
	var runFrom, runLen, bestFrom, bestLen int64
	for k := 1; k <= len(st); k++ {
		c := st[(first+k)%len(st)]
		if c.cover != best {
			runLen = 0
			continue
		}
		if runLen == 0 {
			runFrom = c.from
		}
		runLen += c.to - c.from
		if runLen > bestLen {
			bestFrom, bestLen = runFrom, runLen
		}
	}
	return mod(bestFrom+bestLen/2, periodNs), true
}

// mod is x modulo m in [0, m).
func mod(x, m int64) int64 {
	r := x % m
	if r < 0 {
		r += m
	}
	return r
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
