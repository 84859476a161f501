package report

import (
	"fmt"
	"math"
	"sort"
	"time"

	"github.com/cfsprobe/cfsprobe/internal/trace"
)

// A chart is drawn by one SVG template: the Go code here only computes
// geometry, in the user units of a fixed viewBox that the page scales to
// its width.
type chart struct {
	ID    string // unique in the page
	Kind  string // timeline, latency, profile, compare: the SVG's class
	Title string // for screen readers
	W, H  float64
	Plot  box
	// Grid lines and tick labels.
	XTicks, YTicks []tick
	XLabel, YLabel string
	// YLabelAt centres the y label (0: the plot's middle); YLabel2 labels
	// a second, lower part of the y axis, centred at YLabel2At.
	YLabelAt, YLabel2At float64
	YLabel2             string
	// Bars are the data; Class picks the colour (used, throttled, stall,
	// latency, ...), Tip is the hover text, N a count a test can sum.
	Bars  []bar
	Lines []mark
	// Texts are free labels (row names of a comparison).
	Texts []label
	// Legend entries, shown above the chart.
	Legend []legendItem
	// Note is a line under the chart.
	Note string
}

type box struct{ X, Y, W, H float64 }

// Right and Bottom are the box's far edges.
func (b box) Right() float64  { return b.X + b.W }
func (b box) Bottom() float64 { return b.Y + b.H }

// tick is a grid line at Pos (x for XTicks, y for YTicks).
type tick struct {
	Pos   float64
	Label string
	Major bool // draw the grid line (minor ticks only get a label mark)
}

type bar struct {
	X, Y, W, H float64
	Class      string
	Tip        string
	N          int64
}

// mark is a straight line with an optional label.
type mark struct {
	X1, Y1, X2, Y2 float64
	Class          string
	Label          string
	LX, LY         float64
	Anchor         string // text-anchor of the label
	Tip            string
}

type label struct {
	X, Y   float64
	Text   string
	Anchor string
	Class  string
}

type legendItem struct{ Class, Text string }

// linear maps [d0, d1] onto [r0, r1].
type linear struct{ d0, d1, r0, r1 float64 }

func (s linear) at(v float64) float64 {
	if s.d1 == s.d0 {
		return s.r0
	}
	return s.r0 + (v-s.d0)/(s.d1-s.d0)*(s.r1-s.r0)
}

// niceStep is a step of 1, 2, 2.5 or 5 times a power of ten that cuts
// span into about n pieces.
func niceStep(span float64, n int) float64 {
	if !(span > 0) || math.IsInf(span, 0) || n <= 0 {
		return 1
	}
	raw := span / float64(n)
	p := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 2.5, 5, 10} {
		if m*p >= raw {
			return m * p
		}
	}
	return 10 * p
}

// niceMax rounds v up to a multiple of the step that cuts it into about n
// pieces.
func niceMax(v float64, n int) float64 {
	if !(v > 0) || math.IsInf(v, 0) {
		return 1
	}
	s := niceStep(v, n)
	return math.Ceil(v/s-1e-9) * s
}

// maxTicks bounds every axis, whatever a malformed trace holds.
const maxTicks = 60

// ticksFrom lists lo, lo+step, ... up to hi.
func ticksFrom(lo, hi, step float64) []float64 {
	var out []float64
	if !(step > 0) || math.IsInf(lo, 0) || math.IsInf(hi, 0) || math.IsNaN(lo) || math.IsNaN(hi) {
		return nil
	}
	for i := 0; i < maxTicks; i++ {
		v := lo + float64(i)*step
		if v > hi+step*1e-6 {
			break
		}
		out = append(out, v)
	}
	return out
}

// ticksUpTo cuts [0, hi] into about n nice steps.
func ticksUpTo(hi float64, n int) []float64 {
	return ticksFrom(0, hi, niceStep(hi, n))
}

// num formats an axis value: no trailing zeros.
func num(v float64) string {
	if math.Abs(v) < 1e-9 {
		return "0"
	}
	if v == math.Trunc(v) && math.Abs(v) < 1e15 {
		return fmt.Sprintf("%.0f", v)
	}
	return fmt.Sprintf("%.3g", v)
}

// count formats a count axis value compactly: 1, 10, 100, 1k, 10k, 1M.
func count(v float64) string {
	switch {
	case v >= 1e6:
		return num(v/1e6) + "M"
	case v >= 1e3:
		return num(v/1e3) + "k"
	}
	return num(v)
}

// MaxTimelineBars is how many bars a timeline draws at most; longer
// timelines are binned, several periods to a bar.
const MaxTimelineBars = 300

// timelineBin is one bar of the timeline: one period, or several
// consecutive ones when the timeline is binned.
type timelineBin struct {
	start, end      int64 // ns since the run's start
	periods         int
	throttled       int
	usage           int64 // summed over the bin's periods
	usageThrottled  int64 // of which in throttled periods
	stall           int64 // throttled_ns summed
	first, last     int   // period indices, from 0
	kernel          bool
	maxUsage, burst int64
}

// binPeriods groups the timeline into at most maxBars bins of equal
// duration (a whole number of periods each), so that gaps where the kernel
// counted no period stay visible and bars keep their place in time.
func binPeriods(ps []trace.Period, periodNs int64, maxBars int) (bins []timelineBin, per int) {
	if len(ps) == 0 {
		return nil, 1
	}
	if periodNs <= 0 {
		periodNs = max(1, ps[0].EndNs-ps[0].StartNs)
	}
	lo, hi := ps[0].StartNs, ps[0].EndNs
	for _, p := range ps {
		lo, hi = min(lo, p.StartNs), max(hi, p.EndNs)
	}
	// In floating point: a malformed trace's times may span all of int64.
	slots := math.Ceil((float64(hi) - float64(lo)) / float64(periodNs))
	per = 1
	if len(ps) > maxBars {
		per = max(1, int(min(math.Ceil(slots/float64(maxBars)), math.MaxInt32)))
	}
	width := int64(per) * periodNs
	if width <= 0 || width/int64(per) != periodNs {
		width = math.MaxInt64
	}
	idx := map[int64]int{}
	for i, p := range ps {
		k := int64((float64(p.StartNs) - float64(lo)) / float64(width))
		if per == 1 {
			// One bar per period, even where the timeline's periods
			// overlap (its first period can start on an older phase).
			k = int64(i)
		}
		j, ok := idx[k]
		if !ok {
			j = len(bins)
			idx[k] = j
			bins = append(bins, timelineBin{start: lo + k*width, end: lo + (k+1)*width, first: i, kernel: p.Kernel})
			if per == 1 {
				bins[j].start, bins[j].end = p.StartNs, p.EndNs
			}
		}
		b := &bins[j]
		b.periods++
		b.last = i
		b.usage += p.UsageNs
		b.maxUsage = max(b.maxUsage, p.UsageNs)
		b.stall += p.ThrottledNs
		b.burst += p.BurstNs
		if p.Throttled {
			b.throttled++
			b.usageThrottled += p.UsageNs
		}
	}
	sort.SliceStable(bins, func(i, j int) bool { return bins[i].start < bins[j].start })
	return bins, per
}

// timeAxis picks the unit of a time axis: seconds for spans over 2 s.
func timeAxis(spanNs float64) (div float64, unit string) {
	if spanNs > 2e9 {
		return 1e9, "s"
	}
	return 1e6, "ms"
}

// timelineChart draws CPU used per period as bars against the quota line,
// throttled periods in the warm colour, and each period's stall time
// hanging below the axis.
func timelineChart(id string, t *trace.Trace) *chart {
	if len(t.Periods) == 0 {
		return nil
	}
	periodNs := t.Limits.PeriodUs * 1000
	bins, per := binPeriods(t.Periods, periodNs, MaxTimelineBars)
	c := &chart{ID: id, Kind: "timeline", W: 960, H: 270}
	c.Title = "CPU used per period"
	var maxUse, maxStall float64
	for _, b := range bins {
		maxUse = max(maxUse, float64(b.usage)/float64(b.periods)/1e6)
		maxStall = max(maxStall, float64(b.stall)/float64(b.periods)/1e6)
	}
	quotaMs := 0.0
	if !t.Limits.Unlimited() {
		quotaMs = float64(t.Limits.Cgroup().Quota) / 1e6
	}
	top := niceMax(max(maxUse, quotaMs*1.08, 0.001), 4)
	const left, right, upper, bottom = 64, 16, 22, 44
	plotH := c.H - upper - bottom
	// The stall area below the axis gets a share of the height that grows
	// with its size, within bounds, so both halves stay readable.
	stallH := 0.0
	if maxStall > 0 {
		stallH = plotH * min(0.4, max(0.22, maxStall/(maxStall+top)))
	}
	c.Plot = box{left, upper, c.W - left - right, plotH}
	zero := upper + plotH - stallH
	y := linear{0, top, zero, upper}
	lo, hi := bins[0].start, bins[len(bins)-1].end
	lo = min(lo, 0)
	div, unit := timeAxis(float64(hi) - float64(lo))
	x := linear{float64(lo), float64(hi), c.Plot.X, c.Plot.Right()}

	for _, v := range ticksUpTo(top, 4) {
		c.YTicks = append(c.YTicks, tick{Pos: y.at(v), Label: num(v), Major: true})
	}
	if stallH > 0 {
		bottomMs := niceMax(maxStall, 2)
		ys := linear{0, bottomMs, zero, c.Plot.Bottom()}
		for _, v := range ticksUpTo(bottomMs, 2) {
			if v > 0 {
				c.YTicks = append(c.YTicks, tick{Pos: ys.at(v), Label: num(v), Major: true})
			}
		}
		for _, b := range bins {
			if b.stall == 0 {
				continue
			}
			x0, x1 := barX(x, b)
			h := ys.at(float64(b.stall)/float64(b.periods)/1e6) - zero
			c.Bars = append(c.Bars, bar{X: x0, Y: zero, W: x1 - x0, H: max(h, 0.5), Class: "stall", Tip: binTip(b, per), N: int64(b.periods)})
		}
	}
	step := niceStep((float64(hi)-float64(lo))/div, 8)
	for _, v := range ticksFrom(math.Ceil(float64(lo)/div/step)*step, float64(hi)/div, step) {
		c.XTicks = append(c.XTicks, tick{Pos: x.at(v * div), Label: num(v), Major: true})
	}
	c.XLabel = "time since the start of the run (" + unit + ")"
	c.YLabel = "CPU-ms per period"
	if stallH > 0 {
		c.YLabel, c.YLabelAt = "CPU used (ms)", (upper+zero)/2
		c.YLabel2, c.YLabel2At = "stall (ms)", zero+stallH/2
	}
	for _, b := range bins {
		x0, x1 := barX(x, b)
		mean := float64(b.usage) / float64(b.periods) / 1e6
		tip := binTip(b, per)
		switch {
		case b.throttled == 0:
			c.Bars = append(c.Bars, bar{X: x0, Y: y.at(mean), W: x1 - x0, H: zero - y.at(mean), Class: "used", Tip: tip, N: int64(b.periods)})
		case b.throttled == b.periods:
			c.Bars = append(c.Bars, bar{X: x0, Y: y.at(mean), W: x1 - x0, H: zero - y.at(mean), Class: "throttled", Tip: tip, N: int64(b.periods)})
		default:
			// A bin mixing both: the CPU used in throttled periods is the
			// warm part, at the bottom, the rest stacked on it.
			hot := float64(b.usageThrottled) / float64(b.periods) / 1e6
			c.Bars = append(c.Bars,
				bar{X: x0, Y: y.at(hot), W: x1 - x0, H: zero - y.at(hot), Class: "throttled", Tip: tip, N: int64(b.throttled)},
				bar{X: x0, Y: y.at(mean), W: x1 - x0, H: y.at(hot) - y.at(mean), Class: "used", Tip: tip, N: int64(b.periods - b.throttled)})
		}
	}
	// The axis between usage and stall.
	c.Lines = append(c.Lines, mark{X1: c.Plot.X, Y1: zero, X2: c.Plot.Right(), Y2: zero, Class: "axis"})
	if quotaMs > 0 {
		q := y.at(quotaMs)
		c.Lines = append(c.Lines, mark{X1: c.Plot.X, Y1: q, X2: c.Plot.Right(), Y2: q, Class: "quota",
			Label: "quota " + num(math.Round(quotaMs*1000)/1000) + " ms", LX: c.Plot.Right() - 4, LY: q - 5, Anchor: "end"})
	}
	c.Legend = []legendItem{{"used", "CPU used"}}
	if t.Summary.TimelineThrottled > 0 {
		c.Legend = append(c.Legend, legendItem{"throttled", "CPU used in a throttled period"})
	}
	if quotaMs > 0 {
		c.Legend = append(c.Legend, legendItem{"quota", "quota per period"})
	}
	if stallH > 0 {
		c.Legend = append(c.Legend, legendItem{"stall", "stall time (below the axis, summed over CPUs)"})
	}
	switch {
	case t.Limits.Unlimited():
		c.Note = fmt.Sprintf("No quota: the kernel enforces no period, so the timeline is wall-clock windows of %s.", dur(periodNs))
	case per > 1:
		c.Note = fmt.Sprintf("%d periods of %s, %d to a bar: each bar is the mean per period; the warm part is CPU used in throttled periods.", len(t.Periods), dur(periodNs), per)
	default:
		c.Note = fmt.Sprintf("%d periods of %s counted by the kernel (idle periods are not counted).", len(t.Periods), dur(periodNs))
	}
	return c
}

// barX is a bin's horizontal extent, with a gap between bars wide enough
// to have one.
func barX(x linear, b timelineBin) (float64, float64) {
	x0, x1 := x.at(float64(b.start)), x.at(float64(b.end))
	if x1-x0 > 4 {
		x0, x1 = x0+0.5, x1-0.5
	}
	return x0, max(x1, x0+0.6)
}

func binTip(b timelineBin, per int) string {
	if per == 1 {
		s := fmt.Sprintf("period %d: %s–%s\nCPU used %s", b.first+1, msAt(b.start), msAt(b.end), dur(b.usage))
		if b.throttled > 0 {
			s += fmt.Sprintf("\nthrottled, stall %s", dur(b.stall))
		}
		if b.burst > 0 {
			s += fmt.Sprintf("\nburst %s", dur(b.burst))
		}
		return s
	}
	s := fmt.Sprintf("periods %d–%d: %s–%s\nmean CPU used %s per period (max %s)\n%d of %d throttled",
		b.first+1, b.last+1, msAt(b.start), msAt(b.end), dur(b.usage/int64(b.periods)), dur(b.maxUsage), b.throttled, b.periods)
	if b.stall > 0 {
		s += fmt.Sprintf(", stall %s", dur(b.stall))
	}
	return s
}

// msAt formats a time inside the run.
func msAt(ns int64) string {
	if ns >= 0 && ns < 1e9 || ns < 0 && ns > -1e9 {
		return fmt.Sprintf("%.1f ms", float64(ns)/1e6)
	}
	return fmt.Sprintf("%.3f s", float64(ns)/1e9)
}

// Latency histogram: 10 bins per decade of operation wall time.
const binsPerDecade = 10

// latencyChart draws the distribution of operation wall times on a log
// axis, with the percentiles marked.
// A wide chart spans the page (when there is no profile beside it).
func latencyChart(id string, t *trace.Trace, wide bool) *chart {
	l, p := t.Latency, t.Summary.LatencyNs
	if l == nil || len(l.Buckets) == 0 || p == nil {
		return nil
	}
	counts := map[int]int64{}
	kmin, kmax := math.MaxInt, math.MinInt
	for _, b := range l.Buckets {
		v := float64(b[0]+b[1]) / 2
		if v < 1 {
			v = 1
		}
		k := int(math.Floor(math.Log10(v) * binsPerDecade))
		counts[k] += b[2]
		kmin, kmax = min(kmin, k), max(kmax, k)
	}
	// At least one decade, with a bin of air on each side.
	kmin--
	kmax += 2
	for kmax-kmin < binsPerDecade {
		kmin--
		kmax++
	}
	var maxCount, minCount int64 = 0, math.MaxInt64
	for _, n := range counts {
		maxCount = max(maxCount, n)
		if n > 0 {
			minCount = min(minCount, n)
		}
	}
	c := &chart{ID: id, Kind: "latency", W: 560, H: 300, Title: "latency histogram"}
	if wide {
		c.W, c.H = 960, 240
		c.Kind = "latency wide"
	}
	const left, right, upper, bottom = 64, 16, 58, 44
	c.Plot = box{left, upper, c.W - left - right, c.H - upper - bottom}
	x := linear{float64(kmin) / binsPerDecade, float64(kmax) / binsPerDecade, c.Plot.X, c.Plot.Right()}
	xAt := func(ns float64) float64 { return x.at(math.Log10(max(ns, 1))) }
	logY := maxCount >= 50 && maxCount/minCount >= 20
	var yAt func(n float64) float64
	if logY {
		top := math.Ceil(math.Log10(float64(maxCount) + 1))
		y := linear{0, top, c.Plot.Bottom(), c.Plot.Y}
		yAt = func(n float64) float64 { return y.at(math.Log10(n + 1)) }
		for _, e := range ticksFrom(0, top, 1) {
			v := math.Pow(10, e)
			c.YTicks = append(c.YTicks, tick{Pos: yAt(v), Label: count(v), Major: true})
		}
		c.YLabel = "operations (log scale)"
	} else {
		top := niceMax(float64(maxCount), 4)
		y := linear{0, top, c.Plot.Bottom(), c.Plot.Y}
		yAt = y.at
		for _, v := range ticksUpTo(top, 4) {
			c.YTicks = append(c.YTicks, tick{Pos: y.at(v), Label: num(v), Major: true})
		}
		c.YLabel = "operations"
	}
	// Decades get a labelled grid line; 2x and 5x a label when the axis
	// spans few decades.
	decades := float64(kmax-kmin) / binsPerDecade
	for _, e := range ticksFrom(math.Floor(float64(kmin)/binsPerDecade), float64(kmax)/binsPerDecade, 1) {
		for _, m := range []float64{1, 2, 5} {
			v := m * math.Pow(10, e)
			pos := xAt(v)
			if pos < c.Plot.X-0.1 || pos > c.Plot.Right()+0.1 || (m != 1 && decades > 3) {
				continue
			}
			c.XTicks = append(c.XTicks, tick{Pos: pos, Label: dur(int64(v)), Major: m == 1})
		}
	}
	c.XLabel = "wall time of one " + opName(l.Op) + " (log scale)"
	keys := make([]int, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	sort.Ints(keys)
	for _, k := range keys {
		n := counts[k]
		lo, hi := math.Pow(10, float64(k)/binsPerDecade), math.Pow(10, float64(k+1)/binsPerDecade)
		x0, x1 := xAt(lo), xAt(hi)
		c.Bars = append(c.Bars, bar{X: x0 + 0.5, Y: yAt(float64(n)), W: x1 - x0 - 1, H: c.Plot.Bottom() - yAt(float64(n)), Class: "latency",
			Tip: fmt.Sprintf("%s–%s: %d operations", dur(int64(lo)), dur(int64(hi)), n), N: n})
	}
	c.Lines = percentileMarks(c, xAt, p)
	if pn := t.Limits.PeriodUs * 1000; pn > 0 {
		px := xAt(float64(pn))
		if px > c.Plot.X && px < c.Plot.Right() {
			c.Lines = append(c.Lines, mark{X1: px, Y1: c.Plot.Y, X2: px, Y2: c.Plot.Bottom(), Class: "period",
				Label: "period", LX: px + 3, LY: c.Plot.Bottom() - 4, Anchor: "start", Tip: "enforcement period " + dur(pn)})
		}
	}
	c.Legend = []legendItem{{"latency", "operations"}, {"pct", "percentiles"}}
	c.Note = fmt.Sprintf("%d operations (%s); mean %s, min %s.", l.Count, opName(l.Op), dur(int64(p.Mean)), dur(p.Min))
	return c
}

func opName(op string) string {
	if op == "" {
		return "operation"
	}
	return op
}

// percentileMarks draws p50, p90, p99, p99.9 and max as vertical lines
// labelled above the plot. Percentiles that fall on the same spot share a
// label; labels that would overlap go to the next row up.
func percentileMarks(c *chart, xAt func(float64) float64, p *trace.Percentiles) []mark {
	type pt struct {
		names []string
		v     int64
		x     float64
	}
	var pts []pt
	for _, q := range []struct {
		name string
		v    int64
	}{{"p50", p.P50}, {"p90", p.P90}, {"p99", p.P99}, {"p99.9", p.P999}, {"max", p.Max}} {
		x := xAt(float64(q.v))
		// Percentiles with the same value share a label.
		if n := len(pts); n > 0 && dur(pts[n-1].v) == dur(q.v) {
			pts[n-1].names = append(pts[n-1].names, q.name)
			continue
		}
		pts = append(pts, pt{[]string{q.name}, q.v, x})
	}
	const charW, rowH = 6.8, 13.0
	var rowEnds []float64 // right end of the last label in each row
	var out []mark
	for _, q := range pts {
		text := fmt.Sprintf("%s %s", joinNames(q.names), dur(q.v))
		w := charW * float64(len([]rune(text)))
		x0, anchor := q.x-w/2, "middle"
		switch {
		case x0 < 2:
			x0, anchor = q.x, "start"
		case q.x+w/2 > c.W-2:
			x0, anchor = q.x-w, "end"
		}
		row := 0
		for row < len(rowEnds) && rowEnds[row]+10 > x0 {
			row++
		}
		if row == len(rowEnds) {
			rowEnds = append(rowEnds, 0)
		}
		rowEnds[row] = x0 + w
		ly := c.Plot.Y - 6 - rowH*float64(row)
		out = append(out, mark{X1: q.x, Y1: ly + 3, X2: q.x, Y2: c.Plot.Bottom(), Class: "pct", Label: text, LX: q.x, LY: ly, Anchor: anchor,
			Tip: text})
	}
	return out
}

func joinNames(ns []string) string {
	s := ns[0]
	for _, n := range ns[1:] {
		s += " · " + n
	}
	return s
}

// maxPeriodNs is the longest period the kernel accepts (1 s).
const maxPeriodNs = 1_000_000_000

// ProfileSlot is the slot width of in-period profiles, here and in the
// suite's metrics and tables (the seed's sysbench checkpoints were 20 ms
// apart).
const ProfileSlot = 20 * time.Millisecond

// profileChart draws the in-period throughput profile: operations per ms
// in each 20 ms slot of the period (a fifth of the period when that is
// shorter, but never finer than the throughput buckets).
func profileChart(id string, t *trace.Trace) *chart {
	if t.Throughput == nil {
		return nil
	}
	periodNs := t.Limits.PeriodUs * 1000
	if periodNs <= 0 || periodNs > maxPeriodNs {
		return nil // not a period the kernel accepts: no profile to draw
	}
	slot := int64(ProfileSlot)
	if periodNs < 2*slot {
		slot = periodNs / 5
	}
	if slot < t.Throughput.BucketNs {
		return nil
	}
	prof := t.InPeriodProfile(slot)
	if len(prof) == 0 {
		return nil
	}
	c := &chart{ID: id, Kind: "profile", W: 560, H: 300, Title: "in-period profile"}
	const left, right, upper, bottom = 64, 16, 58, 44
	c.Plot = box{left, upper, c.W - left - right, c.H - upper - bottom}
	var maxRate, sum float64
	for _, s := range prof {
		maxRate = max(maxRate, s.OpsPerMs)
		sum += s.OpsPerMs
	}
	top := niceMax(max(maxRate, 0.001), 4)
	y := linear{0, top, c.Plot.Bottom(), c.Plot.Y}
	end := prof[len(prof)-1].OffsetNs + prof[len(prof)-1].WidthNs
	x := linear{0, float64(end), c.Plot.X, c.Plot.Right()}
	for _, v := range ticksUpTo(top, 4) {
		c.YTicks = append(c.YTicks, tick{Pos: y.at(v), Label: num(v), Major: true})
	}
	for _, s := range prof {
		c.XTicks = append(c.XTicks, tick{Pos: x.at(float64(s.OffsetNs)), Label: num(float64(s.OffsetNs) / 1e6), Major: true})
	}
	c.XTicks = append(c.XTicks, tick{Pos: x.at(float64(end)), Label: num(float64(end) / 1e6), Major: true})
	for _, s := range prof {
		x0, x1 := x.at(float64(s.OffsetNs)), x.at(float64(s.OffsetNs+s.WidthNs))
		c.Bars = append(c.Bars, bar{X: x0 + 2, Y: y.at(s.OpsPerMs), W: x1 - x0 - 4, H: c.Plot.Bottom() - y.at(s.OpsPerMs), Class: "used",
			Tip: fmt.Sprintf("%s–%s into the period: %.3g ops/ms", dur(s.OffsetNs), dur(s.OffsetNs+s.WidthNs), s.OpsPerMs), N: 1})
	}
	mean := sum / float64(len(prof))
	c.Lines = append(c.Lines, mark{X1: c.Plot.X, Y1: y.at(mean), X2: c.Plot.Right(), Y2: y.at(mean), Class: "mean",
		Label: fmt.Sprintf("mean %.3g", mean), LX: c.Plot.Right() - 2, LY: y.at(mean) - 5, Anchor: "end"})
	c.XLabel = "offset inside the period (ms)"
	c.YLabel = "operations per ms"
	c.Legend = []legendItem{{"used", fmt.Sprintf("throughput per %s slot", dur(slot))}, {"mean", "mean over the period"}}
	c.Note = fmt.Sprintf("Mean over the complete periods of the run. A limit that runs out mid-period shows as slots with less work at the end.")
	return c
}

// compareChart draws, for every run, side by side: CPU used against the
// limit, the share of periods throttled, and the p99.9 latency. Runs are
// rows, labelled with their names.
func compareChart(id string, runs []Named, rs []row) *chart {
	if len(runs) == 0 {
		return nil
	}
	const rowH, labelW, gap, upper, bottom = 30.0, 150.0, 28.0, 40.0, 30.0
	c := &chart{ID: id, Kind: "compare", W: 960, Title: "comparison of the runs"}
	c.H = upper + rowH*float64(len(runs)) + bottom
	c.Plot = box{labelW, upper, c.W - labelW - 12, rowH * float64(len(runs))}
	panelW := (c.Plot.W - 2*gap) / 3
	panels := []box{
		{c.Plot.X, upper, panelW, c.Plot.H},
		{c.Plot.X + panelW + gap, upper, panelW, c.Plot.H},
		{c.Plot.X + 2*(panelW+gap), upper, panelW, c.Plot.H},
	}
	var maxCPU, maxP999 float64
	for _, r := range runs {
		t := r.Trace
		maxCPU = max(maxCPU, t.Summary.CPURatio)
		if !t.Limits.Unlimited() {
			maxCPU = max(maxCPU, cpus(t.Limits))
		}
		if p := t.Summary.LatencyNs; p != nil {
			maxP999 = max(maxP999, float64(p.P999)/1e6)
		}
	}
	cpuTop := niceMax(max(maxCPU, 0.01), 4)
	latTop := niceMax(max(maxP999, 0.001), 4)
	scales := []linear{
		{0, cpuTop, panels[0].X, panels[0].Right()},
		{0, 100, panels[1].X, panels[1].Right()},
		{0, latTop, panels[2].X, panels[2].Right()},
	}
	titles := []string{"CPU used (CPUs) against the limit", "throttled periods (%)", "p99.9 latency (ms)"}
	tops := []float64{cpuTop, 100, latTop}
	for i, p := range panels {
		c.Texts = append(c.Texts, label{X: p.X, Y: upper - 14, Text: titles[i], Anchor: "start", Class: "panel-title"})
		for _, v := range ticksUpTo(tops[i], 4) {
			c.XTicks = append(c.XTicks, tick{Pos: scales[i].at(v), Label: num(v), Major: true})
		}
	}
	for i, r := range runs {
		t, s := r.Trace, r.Trace.Summary
		y0 := upper + rowH*float64(i)
		by, bh := y0+7, rowH-14
		c.Texts = append(c.Texts, label{X: labelW - 10, Y: y0 + rowH/2 + 4, Text: ellipsis(rs[i].Name, 22), Anchor: "end", Class: "row-label"})
		cpu := scales[0].at(s.CPURatio) - panels[0].X
		c.Bars = append(c.Bars, bar{X: panels[0].X, Y: by, W: max(cpu, 0.5), H: bh, Class: "used", N: 1,
			Tip: fmt.Sprintf("%s: %s used, limit %s", rs[i].Name, rs[i].CPUUsed, rs[i].Limit)})
		if !t.Limits.Unlimited() {
			lx := scales[0].at(cpus(t.Limits))
			c.Lines = append(c.Lines, mark{X1: lx, Y1: y0 + 3, X2: lx, Y2: y0 + rowH - 3, Class: "limit", Tip: "limit " + rs[i].Limit})
		}
		if t.Limits.Unlimited() {
			c.Texts = append(c.Texts, label{X: panels[1].X + 4, Y: y0 + rowH/2 + 4, Text: "no quota", Anchor: "start", Class: "na"})
		} else {
			w := scales[1].at(100*s.ThrottledRatio) - panels[1].X
			c.Bars = append(c.Bars, bar{X: panels[1].X, Y: by, W: max(w, 0.5), H: bh, Class: "throttled", N: 1,
				Tip: fmt.Sprintf("%s: %s periods throttled (%s), stall %s", rs[i].Name, rs[i].Throttled, rs[i].ThrottledPct, rs[i].ThrottledTime)})
			c.Texts = append(c.Texts, label{X: panels[1].X + max(w, 0.5) + 4, Y: y0 + rowH/2 + 4, Text: rs[i].ThrottledPct, Anchor: "start", Class: "value"})
		}
		if p := s.LatencyNs; p != nil {
			w := scales[2].at(float64(p.P999)/1e6) - panels[2].X
			c.Bars = append(c.Bars, bar{X: panels[2].X, Y: by, W: max(w, 0.5), H: bh, Class: "latency", N: 1,
				Tip: fmt.Sprintf("%s: p99.9 %s, p99 %s, p50 %s", rs[i].Name, rs[i].P999, rs[i].P99, rs[i].P50)})
			anchor, lx, cls := "start", panels[2].X+max(w, 0.5)+4, "value"
			if w > panelW-60 {
				anchor, lx, cls = "end", panels[2].X+w-4, "value inside"
			}
			c.Texts = append(c.Texts, label{X: lx, Y: y0 + rowH/2 + 4, Text: rs[i].P999, Anchor: anchor, Class: cls})
		} else {
			c.Texts = append(c.Texts, label{X: panels[2].X + 4, Y: y0 + rowH/2 + 4, Text: "no latencies", Anchor: "start", Class: "na"})
		}
	}
	c.Legend = []legendItem{{"used", "CPU used"}, {"limit", "limit"}, {"throttled", "throttled periods"}, {"latency", "p99.9 latency"}}
	return c
}

// YLabelY is where the y label is centred.
func (c *chart) YLabelY() float64 {
	if c.YLabelAt != 0 {
		return c.YLabelAt
	}
	return c.Plot.MidY()
}

// HalfW and MidY place axis labels at the middle of the box.
func (b box) HalfW() float64 { return b.W / 2 }
func (b box) MidY() float64  { return b.Y + b.H/2 }

// ellipsis shortens s to n characters.
func ellipsis(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}
