package fleet

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"time"

	"github.com/cfsprobe/cfsprobe/internal/cgroup"
	"github.com/cfsprobe/cfsprobe/internal/trace"
)

// Series is what Prometheus holds of one group over a window: the
// exporter's figures (docs/metrics.md) as the queries of Read give them.
// Synthesize turns it into a trace.
type Series struct {
	Key    Key
	Window time.Duration // the window the increases are over
	End    time.Time     // its end
	// Limits in force at the window's end (QuotaCPUs 0: none known).
	QuotaCPUs     float64
	PeriodSeconds float64
	BurstSeconds  float64
	HasBurst      bool // the burst limit series exists: the kernel has burst
	// Host is the node's, from cfsprobe_host_info and cfsprobe_host_cpus.
	Host trace.Host
	// Periods is the increase of cfsprobe_cpu_periods_total: the periods
	// in which the group had runnable tasks.
	Periods float64
	// Demand is the increase of cfsprobe_period_demand_cpus; Stopped of
	// cfsprobe_period_stopped_cpus.
	Demand, Stopped Histogram
	// Pairs is the increase of cfsprobe_period_pair_demand_cpus (no
	// buckets: the exporter has none, an older one).
	Pairs Histogram
	// Stretches are the increases of cfsprobe_throttled_stretches_total
	// (Ended) and cfsprobe_throttled_stretches_caught_up_total (CaughtUp),
	// and over them of cfsprobe_cpu_periods_total (Periods) and
	// cfsprobe_cpu_throttled_periods_total (Throttled), rounded; nil when
	// the exporter has none (an older one).
	Stretches *trace.Stretches
	// UsageQuantiles are quantiles of the minute averages of usage
	// (cgroup:cfsprobe_cpu_usage:rate1m) over the window, by quantile;
	// Minutes is how many there are.
	UsageQuantiles map[float64]float64
	Minutes        float64
	// Query says where the figures come from, for Spec.Synthetic.
	Query string
}

// Histogram is a Prometheus histogram's increase over a window: its
// buckets' upper bounds (the last one +Inf) and cumulative counts, its
// sum and count.
type Histogram struct {
	Bounds     []float64
	Cumulative []float64
	Sum, Count float64
}

// add sets a bucket's cumulative count.
func (h *Histogram) add(le, v float64) {
	h.Bounds = append(h.Bounds, le)
	h.Cumulative = append(h.Cumulative, v)
}

// sorted orders the buckets by bound and makes the counts cumulative
// again where a window's extrapolation left one a little below the one
// before.
func (h *Histogram) sorted() {
	idx := make([]int, len(h.Bounds))
	for i := range idx {
		idx[i] = i
	}
	sort.Slice(idx, func(a, b int) bool { return h.Bounds[idx[a]] < h.Bounds[idx[b]] })
	b, c := make([]float64, len(idx)), make([]float64, len(idx))
	for i, j := range idx {
		b[i], c[i] = h.Bounds[j], max(h.Cumulative[j], 0)
		if i > 0 {
			c[i] = max(c[i], c[i-1])
		}
	}
	h.Bounds, h.Cumulative = b, c
}

// counts are the observations of each bucket (not cumulative).
func (h Histogram) counts() []float64 {
	out := make([]float64, len(h.Cumulative))
	prev := 0.0
	for i, c := range h.Cumulative {
		out[i], prev = max(c-prev, 0), c
	}
	return out
}

// total is the observations of all buckets.
func (h Histogram) total() float64 {
	if len(h.Cumulative) == 0 {
		return 0
	}
	return h.Cumulative[len(h.Cumulative)-1]
}

// SynthOptions bound a synthetic trace.
type SynthOptions struct {
	// MaxPeriods is the most active periods a synthetic trace has (0:
	// DefaultMaxPeriods).
	MaxPeriods int
	// MinuteValues is the most minute averages MinuteUsage has (0:
	// DefaultMinuteValues).
	MinuteValues int
}

// DefaultMaxPeriods bounds a synthetic trace: enough active periods that
// the 1 % of them a throttling target allows is 10 periods, few enough that
// the recommender's several simulations of 1,000 groups stay quick.
const DefaultMaxPeriods = 1000

// DefaultMinuteValues is how many minute averages a group's MinuteUsage
// has at most: the quantiles of the window's minute averages at 100 even
// steps.
const DefaultMinuteValues = 100

// ErrNoDemand is a group whose demand histogram counted no period in the
// window: nothing to recommend from.
var ErrNoDemand = fmt.Errorf("no period of the group was observed in the window")

// UsageQuantiles are the quantiles of the minute averages Read asks for.
var UsageQuantiles = []float64{0, 0.1, 0.25, 0.5, 0.75, 0.9, 0.95, 0.99, 1}

// Synthesize builds a group's synthetic trace and its minute averages
// (docs/recommend-fleet.md): the periods the kernel counted, at most
// MaxPeriods of them, end to end, and the periods it did not count (the
// group idle since a whole period, its period timer stopped) as one idle
// stretch in the middle, as large a share of the window as in the real
// one; each period's demand
// a quantile of the demand histogram, taken in an order that spreads the
// large ones; each period as a recording under the current limits would
// have it (a demand above the quota is a throttled period, which used the
// quota and stood still on the stopped CPUs for as long as the demand
// says); the limits the current ones; and the throttled stretches the
// exporter counted (Spec.Stretches), from which replay reads whether the
// group is a closed loop.
func Synthesize(s Series, opt SynthOptions) (*trace.Trace, []float64, error) {
	if opt.MaxPeriods <= 0 {
		opt.MaxPeriods = DefaultMaxPeriods
	}
	if opt.MinuteValues <= 0 {
		opt.MinuteValues = DefaultMinuteValues
	}
	s.Demand.sorted()
	s.Stopped.sorted()
	s.Pairs.sorted()
	observed := s.Demand.total()
	if observed < 0.5 {
		return nil, nil, ErrNoDemand
	}
	period := time.Duration(s.PeriodSeconds * float64(time.Second))
	if period <= 0 {
		period = cgroup.DefaultPeriod
	}
	lim := cgroup.Limits{Period: period, Quota: time.Duration(s.QuotaCPUs * float64(period)),
		Burst: time.Duration(s.BurstSeconds * float64(time.Second))}
	lim.Quota = lim.Quota.Round(time.Microsecond)

	// The active share: the periods the kernel counted over those that
	// elapsed (at least the ones the sampler saw).
	elapsed := float64(s.Window) / float64(period)
	share := 1.0
	if elapsed > 0 {
		share = min(max(s.Periods, observed)/elapsed, 1)
	}
	n := min(int(math.Round(observed)), opt.MaxPeriods)
	values := demandQuantiles(s.Demand, n)
	par := parallelism(s.Stopped, values, s.Host.CPUs)
	throttled := func(v float64) bool { return !lim.Unlimited() && time.Duration(v*float64(period)) > lim.Quota }
	k := 0 // the values are ascending: the throttled ones are the last k
	for k < n && throttled(values[n-1-k]) {
		k++
	}
	closed := s.Stretches != nil && s.Stretches.Closed()
	stopped := stoppedCPUs(s.Stopped, s.Demand, values, k, throttled, s.QuotaCPUs, par, closed)

	tr := &trace.Trace{
		Schema: trace.Schema,
		Tool:   trace.Tool{Name: "cfsprobe"},
		Spec: trace.Spec{Workload: Synthetic, Synthetic: fmt.Sprintf(
			"prometheus: %s over %s to %s; %d of %.0f observed periods, %.3g of the elapsed periods active, on %d CPUs (docs/recommend-fleet.md)",
			s.Query, s.Window, s.End.UTC().Format(time.RFC3339), n, observed, share, par)},
		Host:   s.Host,
		Limits: trace.LimitsOf(lim),
		Cgroup: trace.Cgroup{Path: s.Key.Cgroup, Version: s.Host.CPUController},
	}
	tr.Spec.Stretches = s.Stretches
	// The idle stretch: a simulated kernel stops counting periods a
	// period after the group went idle, so that one stretch adds one
	// period to its count where as many single idle periods between the
	// counted ones would each be counted.
	idle := int64(math.Round(float64(n)/share)) - int64(n)
	var order []int
	if closed {
		order = inPairs(values, inStretches(n, k, int(math.Round(float64(s.Stretches.Ended)*float64(n)/observed))), s.Pairs, k)
	} else {
		order = inPairs(values, spread(n), s.Pairs, n)
	}
	for j := 0; j < n; j++ {
		start := int64(j) * int64(period)
		if j >= n/2 {
			start += idle * int64(period)
		}
		tr.Periods = append(tr.Periods, recorded(start, period, lim, values[order[j]], stopped[order[j]]))
	}
	last := tr.Periods[len(tr.Periods)-1]
	sum := &tr.Summary
	sum.WallNs = last.EndNs
	for _, p := range tr.Periods {
		sum.UsageNs += p.UsageNs
		sum.ThrottledNs += p.ThrottledNs
		if p.Throttled {
			sum.NrThrottled++
		}
	}
	sum.NrPeriods = int64(len(tr.Periods))
	sum.TimelineThrottled = sum.NrThrottled
	sum.ThrottledRatio = float64(sum.NrThrottled) / float64(sum.NrPeriods)
	sum.CPURatio = float64(sum.UsageNs) / float64(sum.WallNs)
	return tr, minuteUsage(s.UsageQuantiles, s.Minutes, opt.MinuteValues), nil
}

// Synthetic is the Spec.Workload of a trace built from Prometheus series.
const Synthetic = "synthetic"

// recorded is a period of the given demand (CPUs) as a recording under
// lim would show it, on par CPUs: within the quota, its usage; beyond it,
// a throttled period that used the quota and stood still on par CPUs for
// as long as they missed the rest. Its demand as trace.Period.Demand
// reads it back is the given one, except where the group then ran on at
// least half of par CPUs while not stopped: such a period reads back as
// busy all along on them (a recording shows no other), and where the rest
// is more than par CPUs can miss in the period.
func recorded(start int64, period time.Duration, lim cgroup.Limits, cpus float64, par int) trace.Period {
	work := time.Duration(cpus * float64(period))
	p := trace.Period{StartNs: start, EndNs: start + int64(period), UsageNs: int64(work), UsageMaxNs: int64(work),
		RunningCPUs: cpus, Kernel: true}
	if lim.Unlimited() || work <= lim.Quota {
		return p
	}
	// usage + par × stall = work: the par stopped CPUs missed the rest
	// (trace.Period.Missed), at most 99 % of the period.
	used := lim.Quota
	stall := min((work-used)/time.Duration(par), period-period/100)
	p.UsageNs, p.UsageMaxNs = int64(used), int64(used)
	p.Throttled, p.StallNs, p.StoppedCPUs = true, int64(stall), par
	p.ThrottledNs = int64(stall) * int64(par)
	p.RunningCPUs = float64(used) / float64(period-stall)
	return p
}

// demandQuantiles are n values of the demand histogram's distribution, at
// the quantiles (k+0.5)/n, in order. A quantile that falls in a bucket
// is placed by its rank among the bucket's observations, log-linearly
// between the bucket's bounds (linearly from 0 in the first bucket; +Inf's
// at its lower bound × 1.26), as if the bucket's values were spread evenly
// on a log scale; then all of them are scaled by one factor, each kept
// within its bucket, so that their mean is the histogram's (sum / count)
// where the bounds allow. A group whose periods crowd at a bucket's bound
// keeps them there (the mean pushes them to it), one whose every period
// wants the same CPU has them within the bucket around it.
func demandQuantiles(h Histogram, n int) []float64 {
	counts := h.counts()
	total := h.total()
	// Each quantile's bucket and its rank in it (0 to 1).
	bucket := make([]int, n)
	rank := make([]float64, n)
	i, cum, before := 0, counts[0], 0.0
	for k := range bucket {
		q := (float64(k) + 0.5) / float64(n) * total
		for cum < q && i < len(counts)-1 {
			before = cum
			i++
			cum += counts[i]
		}
		bucket[k], rank[k] = i, min(max((q-before)/max(counts[i], 1e-9), 0), 1)
	}
	at := func(f float64) []float64 {
		out := make([]float64, n)
		for k, i := range bucket {
			hi := h.Bounds[i]
			var v, lo float64
			switch {
			case i == 0:
				v = hi * rank[k]
			case math.IsInf(hi, 1):
				lo = h.Bounds[i-1]
				v, hi = lo*1.26, lo*1.26
			default:
				lo = h.Bounds[i-1]
				v = lo * math.Pow(hi/lo, rank[k])
			}
			out[k] = min(max(v*f, lo), hi)
		}
		return out
	}
	if h.Sum <= 0 || total <= 0 {
		return at(1)
	}
	want := h.Sum / total
	mean := func(v []float64) float64 {
		s := 0.0
		for _, x := range v {
			s += x
		}
		return s / float64(len(v))
	}
	// The factor that gives the mean, by bisection over the factors that
	// keep every value in its bucket (the mean grows with it).
	a, b := 0.5, 2.0
	for range 50 {
		m := (a + b) / 2
		if mean(at(m)) < want {
			a = m
		} else {
			b = m
		}
	}
	return at((a + b) / 2)
}

// parallelism is the CPUs the group ran on: the most it was stopped on
// in a throttled period (the upper bound of the highest bucket of the
// stopped CPUs histogram that counted one, +Inf's taken for the host's
// CPUs), else the most running CPUs its demand shows, rounded up as
// replay does (trace.WholeCPUs); at least 1, at most the host's CPUs.
func parallelism(stopped Histogram, values []float64, cpus int) int {
	par := 0
	counts := stopped.counts()
	for i := len(counts) - 1; i >= 0; i-- {
		if counts[i] >= 0.5 {
			b := stopped.Bounds[i]
			if math.IsInf(b, 1) {
				b = float64(max(cpus, 1))
			}
			par = int(b)
			break
		}
	}
	if par == 0 && len(values) > 0 {
		par = int(math.Ceil(trace.WholeCPUs(slices.Max(values))))
	}
	if cpus > 0 {
		par = min(par, cpus)
	}
	return max(par, 1)
}

// stoppedCPUs are the CPUs each period stood still on when throttled
// (values sorted ascending, the last k above the quota; hs sorted), and,
// with snap (a closed loop), it snaps a throttled value to them where
// they fall in its bucket of the demand histogram hd: the throttled
// periods' counts of stopped CPUs are the quantiles of the stopped-CPU
// histogram (each bucket's upper bound, +Inf's par), given in the same
// order as their demand (a period stopped on more CPUs missed more). A
// period busy all along on the c CPUs it was stopped on wants exactly c
// CPUs (trace.Period.Missed): a
// value in c's bucket is c, so that the period's stall, which a closed
// loop's replay cuts out of its work's time, is the one it had (a period
// at 0.9 CPU in the bucket of 1 on 1 CPU would have run 10 ms more than
// the 5 ms it did). A period is stopped on at least as many CPUs as can
// miss the rest of its demand in 99 % of the period. A loop that runs for
// a time is replayed by its demand alone (stall × stopped CPUs, however
// split), which keeps its value: a period stopped on c CPUs that ran on
// fewer for a while wants less than c. Every period gets par when the
// histogram counted no throttled period.
func stoppedCPUs(hs, hd Histogram, values []float64, k int, throttled func(float64) bool, quota float64, par int, snap bool) []int {
	out := make([]int, len(values))
	for i := range out {
		out[i] = par
	}
	total := hs.total()
	if k == 0 || total < 0.5 {
		return out
	}
	counts := hs.counts()
	first := len(values) - k
	for j := 0; j < k; j++ {
		q := (float64(j) + 0.5) / float64(k) * total
		b, cum := 0, counts[0]
		for cum < q && b < len(counts)-1 {
			b++
			cum += counts[b]
		}
		c := par
		if !math.IsInf(hs.Bounds[b], 1) {
			c = min(int(hs.Bounds[b]), par)
		}
		i := first + j
		// At least as many as can miss the rest in 99 % of the period
		// (recorded's most).
		c = max(c, 1, min(int(math.Ceil((values[i]-quota)/0.99)), par))
		out[i] = c
		if !snap {
			continue
		}
		// The demand bucket that holds the value.
		for d := range hd.Bounds {
			lo := 0.0
			if d > 0 {
				lo = hd.Bounds[d-1]
			}
			if values[i] > lo && values[i] <= hd.Bounds[d] {
				if fc := float64(c); fc > lo && fc <= hd.Bounds[d] && throttled(fc) {
					values[i] = fc
				}
				break
			}
		}
	}
	return out
}

// spread is an order of n quantiles that spreads the large ones over the
// window: the k-th period takes quantile k × step mod n, step the integer
// nearest n/φ coprime with n (every quantile once).
func spread(n int) []int {
	out := make([]int, n)
	if n == 0 {
		return out
	}
	step := max(int(math.Round(float64(n)/math.Phi)), 1)
	for gcd(step, n) != 1 {
		step++
	}
	for k := range out {
		out[k] = k * step % n
	}
	return out
}

// pairIterations is how many swaps inPairs tries per period that moves: enough that
// the heavy periods of the fleet test's groups find their neighbours
// (docs/recommend-fleet.md), few enough for a fleet's synthesis.
const pairIterations = 60

// inPairs is an order of n periods (values ascending, order a first
// one) whose consecutive pairs have mean demands that fall in the
// buckets of pairs (cfsprobe_period_pair_demand_cpus) as often as the
// group's did, scaled to n−1 pairs: where the group's heavy periods came
// together, theirs do. Only the movable largest values move: all n, or a
// closed loop's throttled ones, among themselves, so that its stretches
// keep their places and which of their periods stood still longest
// follows the pairs. It swaps two of them, one among the heaviest quarter
// of those, and keeps the swap when the pairs' counts come no further
// from the group's: a distance that weighs each bucket by the square of
// its bound, since the heavy pairs decide a burst allowance and are few.
// The swaps come from a pseudo-random sequence seeded by n, so the same
// series give the same order. Without pairs (an exporter before them)
// the order is kept.
func inPairs(values []float64, order []int, pairs Histogram, movable int) []int {
	n := len(order)
	total := pairs.total()
	if n < 3 || movable < 2 || total < 1 || len(pairs.Bounds) == 0 {
		return order
	}
	counts := pairs.counts()
	nb := len(counts)
	want, w := make([]float64, nb), make([]float64, nb)
	for b := range counts {
		want[b] = counts[b] * float64(n-1) / total
		x := pairs.Bounds[b]
		if math.IsInf(x, 1) {
			x = pairs.Bounds[max(b-1, 0)] * 1.26
		}
		w[b] = x * x
	}
	o := append([]int(nil), order...)
	bucket := func(i int) int {
		v := (values[o[i]] + values[o[i+1]]) / 2
		return min(sort.SearchFloat64s(pairs.Bounds, v), nb-1)
	}
	have := make([]float64, nb)
	for i := 0; i+1 < n; i++ {
		have[bucket(i)]++
	}
	// Where each value sits, for a swap that starts from a heavy one.
	at := make([]int, n)
	for i, v := range o {
		at[v] = i
	}
	heavy := max(movable/4, 1)
	r := rand.New(rand.NewPCG(uint64(n), 1))
	var ps, before, after [4]int
	var touched [8]int
	dist := func(bs []int) float64 {
		d := 0.0
		for _, b := range bs {
			d += w[b] * math.Abs(have[b]-want[b])
		}
		return d
	}
	for range pairIterations * movable {
		// i holds a heavy value; j any position, or, when only some
		// values move, one of theirs.
		i, j := at[n-1-r.IntN(heavy)], r.IntN(n)
		if movable < n {
			j = at[n-1-r.IntN(movable)]
		}
		if i == j {
			continue
		}
		np := 0
		for _, p := range [4]int{i - 1, i, j - 1, j} {
			if p >= 0 && p+1 < n && !slices.Contains(ps[:np], p) {
				ps[np] = p
				np++
			}
		}
		for k := range np {
			before[k] = bucket(ps[k])
		}
		o[i], o[j] = o[j], o[i]
		nt := 0
		for k := range np {
			after[k] = bucket(ps[k])
			for _, b := range [2]int{before[k], after[k]} {
				if !slices.Contains(touched[:nt], b) {
					touched[nt] = b
					nt++
				}
			}
		}
		was := dist(touched[:nt])
		for k := range np {
			have[before[k]]--
			have[after[k]]++
		}
		if dist(touched[:nt]) > was {
			for k := range np {
				have[after[k]]--
				have[before[k]]++
			}
			o[i], o[j] = o[j], o[i]
			continue
		}
		at[o[i]], at[o[j]] = i, j
	}
	return o
}

// inStretches is the order of a closed loop's n periods (their values
// sorted ascending, the last k above the quota): the throttled ones in as
// many stretches of consecutive periods as the exporter
// counted (at most one a throttled period), the k-th largest in stretch k
// mod their number, each stretch followed by its catch-up (the largest of
// the others, while they last), the stretches spaced evenly with the rest
// between them in spread order. A closed loop's work is its usage, only
// delayed: replay joins a stretch's periods into the one piece of work
// they were (sim.Replay, closedOffset), and a burst allowance is sized by
// that piece, which periods spread one by one would hide. Within a
// stretch the periods come largest first; inPairs then moves them as the
// group's pairs say (in the fleet test's closed loops the longest stalls
// mostly came one at a time, where largest first laid them side by side:
// docs/recommend-fleet.md).
func inStretches(n, k, stretches int) []int {
	if k == 0 || stretches <= 0 {
		return spread(n)
	}
	e := min(stretches, k)
	runs := make([][]int, e)
	for j := 0; j < k; j++ {
		runs[j%e] = append(runs[j%e], n-1-j)
	}
	// The catch-ups, then the rest in spread order.
	rest := n - k
	catch := min(e, rest)
	var others []int
	for _, i := range spread(rest) {
		if i < rest-catch {
			others = append(others, i)
		}
	}
	out := make([]int, 0, n)
	used := 0
	for r, run := range runs {
		out = append(out, run...)
		if r < catch {
			out = append(out, rest-1-r)
		}
		// The others up to this stretch's share of them.
		upto := len(others) * (r + 1) / e
		out = append(out, others[used:upto]...)
		used = upto
	}
	return out
}

func gcd(a, b int) int {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

// minuteUsage is up to most minute averages with the given quantiles:
// the values at the quantiles (k+0.5)/m, m the number of minutes (at most
// most), interpolated linearly between the quantiles known. nil when
// there are none.
func minuteUsage(q map[float64]float64, minutes float64, most int) []float64 {
	m := min(int(math.Round(minutes)), most)
	if m <= 0 || len(q) == 0 {
		return nil
	}
	qs := slices.Sorted(func(yield func(float64) bool) {
		for k := range q {
			if !yield(k) {
				return
			}
		}
	})
	out := make([]float64, m)
	for k := range out {
		p := (float64(k) + 0.5) / float64(m)
		j := sort.SearchFloat64s(qs, p)
		switch {
		case j == 0:
			out[k] = q[qs[0]]
		case j == len(qs):
			out[k] = q[qs[len(qs)-1]]
		default:
			a, b := qs[j-1], qs[j]
			out[k] = q[a] + (q[b]-q[a])*(p-a)/(b-a)
		}
	}
	return out
}
