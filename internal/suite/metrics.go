package suite

import (
	"fmt"
	"sort"

	"github.com/cfsprobe/cfsprobe/internal/report"
	"github.com/cfsprobe/cfsprobe/internal/trace"
)

// Metric computes one number from a trace. ok is false when the trace has
// no such figure (latency of an external command, a profile without
// throughput).
type Metric struct {
	Doc      string
	Duration bool // the value is in ns: shown and bounded as a duration
	Get      func(t *trace.Trace) (v float64, ok bool)
}

func latency(f func(p *trace.Percentiles) int64) func(t *trace.Trace) (float64, bool) {
	return func(t *trace.Trace) (float64, bool) {
		if t.Summary.LatencyNs == nil {
			return 0, false
		}
		return float64(f(t.Summary.LatencyNs)), true
	}
}

// Metrics are the names expectations can use.
var Metrics = map[string]Metric{
	"throttled_ratio": {Doc: "throttled periods / periods (0 to 1; 0 without periods)", Get: func(t *trace.Trace) (float64, bool) { return t.Summary.ThrottledRatio, true }},
	"nr_throttled":    {Doc: "throttled periods (kernel count)", Get: func(t *trace.Trace) (float64, bool) { return float64(t.Summary.NrThrottled), true }},
	"nr_periods":      {Doc: "enforcement periods (kernel count)", Get: func(t *trace.Trace) (float64, bool) { return float64(t.Summary.NrPeriods), true }},
	"cpu_ratio":       {Doc: "CPU used / wall time, in CPUs (0.5 = half a CPU)", Get: func(t *trace.Trace) (float64, bool) { return t.Summary.CPURatio, true }},
	"throttled_time":  {Doc: "throttled time the kernel accounted (summed over CPUs)", Duration: true, Get: func(t *trace.Trace) (float64, bool) { return float64(t.Summary.ThrottledNs), true }},
	"throttled_share": {Doc: "throttled time / wall time", Get: func(t *trace.Trace) (float64, bool) {
		if t.Summary.WallNs == 0 {
			return 0, false
		}
		return float64(t.Summary.ThrottledNs) / float64(t.Summary.WallNs), true
	}},
	"ops":          {Doc: "operations timed", Get: func(t *trace.Trace) (float64, bool) { return float64(t.Summary.Ops), t.Latency != nil }},
	"latency_p50":  {Doc: "median operation wall time", Duration: true, Get: latency(func(p *trace.Percentiles) int64 { return p.P50 })},
	"latency_p90":  {Doc: "90th percentile operation wall time", Duration: true, Get: latency(func(p *trace.Percentiles) int64 { return p.P90 })},
	"latency_p99":  {Doc: "99th percentile operation wall time", Duration: true, Get: latency(func(p *trace.Percentiles) int64 { return p.P99 })},
	"latency_p999": {Doc: "99.9th percentile operation wall time", Duration: true, Get: latency(func(p *trace.Percentiles) int64 { return p.P999 })},
	"latency_max":  {Doc: "slowest operation", Duration: true, Get: latency(func(p *trace.Percentiles) int64 { return p.Max })},
	"profile_last_first": {Doc: "in-period profile: throughput in the period's last 20 ms slot / in its first", Get: func(t *trace.Trace) (float64, bool) {
		p := t.InPeriodProfile(int64(report.ProfileSlot))
		if len(p) < 2 || p[0].OpsPerMs == 0 {
			return 0, false
		}
		return p[len(p)-1].OpsPerMs / p[0].OpsPerMs, true
	}},
}

// MetricNames lists the metrics, sorted.
func MetricNames() []string {
	var n []string
	for k := range Metrics {
		n = append(n, k)
	}
	sort.Strings(n)
	return n
}

// FormatValue writes a metric's value for people.
func FormatValue(metric string, v float64) string {
	if Metrics[metric].Duration {
		return report.Dur(int64(v))
	}
	if v == float64(int64(v)) && v >= 10 {
		return fmt.Sprintf("%d", int64(v))
	}
	return fmt.Sprintf("%.3g", v)
}

// evaluate checks a bound against a value.
func evaluate(metric string, b Bound, v float64, ok bool, relative string) trace.Expectation {
	e := trace.Expectation{Metric: metric, Value: v, OK: ok, Relative: relative}
	if relative == "" && Metrics[metric].Duration {
		e.Unit = "ns"
	}
	name := metric
	if relative != "" {
		name = fmt.Sprintf("%s / %s's", metric, relative)
	}
	fv := func(x *Value) string {
		if relative != "" {
			return x.Text
		}
		if Metrics[metric].Duration {
			return report.Dur(int64(x.V))
		}
		return x.Text
	}
	switch {
	case b.Min != nil && b.Max != nil:
		e.Text = fmt.Sprintf("%s in [%s, %s]", name, fv(b.Min), fv(b.Max))
	case b.Min != nil:
		e.Text = fmt.Sprintf("%s >= %s", name, fv(b.Min))
	default:
		e.Text = fmt.Sprintf("%s <= %s", name, fv(b.Max))
	}
	if b.Min != nil {
		m := b.Min.V
		e.Min = &m
		e.OK = e.OK && v >= m
	}
	if b.Max != nil {
		m := b.Max.V
		e.Max = &m
		e.OK = e.OK && v <= m
	}
	if !ok {
		e.Text += " (not measured)"
	}
	return e
}
