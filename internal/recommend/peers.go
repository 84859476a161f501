package recommend

import (
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/cfsprobe/cfsprobe/internal/trace"
)

// This file is the peers: the sizing rules in use, each computed from
// minute-average usage as its authors compute it, given as a Setting
// that the simulator then predicts. docs/recommend.md ("The peers")
// describes each rule and where it comes from.

// Window is the length of the usage averages the peers read: Kubernetes
// tools read usage a minute (or more) at a time.
const Window = time.Minute

// Windows are the minute-average usage the peers read, and how it was
// formed.
type Windows struct {
	// UsageCPUs are the averages, in CPUs, oldest first.
	UsageCPUs []float64 `json:"usage_cpus"`
	// Formed says how, for people: "2 one-minute windows of the trace",
	// "the whole 30s trace as one window", "given (Prometheus)".
	Formed string `json:"formed"`
}

// minuteWindows averages a trace's usage over consecutive one-minute
// windows from the start of its first period; a last window shorter
// than a minute is left out. A trace shorter than a minute is one window
// of its whole length: the only average it has.
func minuteWindows(tr *trace.Trace) Windows {
	if len(tr.Periods) == 0 {
		return Windows{Formed: "no periods: no usage"}
	}
	t0 := tr.Periods[0].StartNs
	span := tr.Periods[len(tr.Periods)-1].EndNs - t0
	n := int(span / int64(Window))
	if n == 0 {
		var used int64
		for _, p := range tr.Periods {
			used += max(p.UsageNs, 0)
		}
		c := 0.0
		if span > 0 {
			c = float64(used) / float64(span)
		}
		return Windows{UsageCPUs: []float64{c},
			Formed: fmt.Sprintf("the whole %v trace as one window (it is shorter than a minute)", time.Duration(span).Round(time.Millisecond))}
	}
	used := make([]int64, n)
	for _, p := range tr.Periods {
		if i := int((p.StartNs - t0) / int64(Window)); i < n {
			used[i] += max(p.UsageNs, 0)
		}
	}
	w := Windows{UsageCPUs: make([]float64, n)}
	for i, u := range used {
		w.UsageCPUs[i] = float64(u) / float64(Window)
	}
	w.Formed = fmt.Sprintf("%s of the trace", oneMinuteWindows(n))
	if rest := time.Duration(span - int64(n)*int64(Window)); rest > 0 {
		w.Formed += fmt.Sprintf(" (the last %v left out)", rest.Round(time.Millisecond))
	}
	return w
}

// Peer is one sizing rule in use, applied to the group's minute usage.
type Peer struct {
	// Name is the rule's: "seed 003", "krr simple", "VPA".
	Name string `json:"name"`
	// Rule says what it computes, and Source where it is written down.
	Rule   string `json:"rule"`
	Source string `json:"source"`
	// RequestCPUs is the request the rule gives (0: none).
	RequestCPUs float64 `json:"request_cpus,omitempty"`
	// LimitCPUs is the limit the prediction uses; Why says why when the
	// rule itself gives none.
	LimitCPUs float64 `json:"limit_cpus"`
	Why       string  `json:"why,omitempty"`
	// Setting and Prediction: the limit, and what the simulator predicts
	// it does.
	Setting    Setting    `json:"setting"`
	Prediction Prediction `json:"prediction"`
	Meets      bool       `json:"meets"`
}

// peerRule is a rule before it is predicted.
type peerRule struct {
	name, rule, source, why string
	request, limit          float64
}

// peerRules applies the three rules to the minute usage.
func peerRules(usage []float64) []peerRule {
	seed := promQuantile(0.95, usage)
	krr := promQuantile(0.95, usage)
	vpa := vpaTarget(usage)
	return []peerRule{
		{name: "seed 003", rule: "limit = p95 of minute usage × 1.5 (request p50)",
			source:  "seed 003, \"Benchmark 02\": \"Formula: cpu_limit = p95_usage × 1.5\"",
			request: promQuantile(0.5, usage), limit: seed * 1.5},
		{name: "krr simple", rule: "request = p95 of usage, limit unset; here limit = request",
			source:  "robusta-dev/krr, robusta_krr/strategies/simple.py (cpu_percentile 95, limit None)",
			why:     "krr sets no limit, which is never throttled; a cluster that keeps limits (a LimitRange, Guaranteed QoS) sets limit = request",
			request: krr, limit: krr},
		{name: "VPA", rule: "target = p90 of minute usage × 1.15 (at least 25m); limit in proportion to the request: here limit = target",
			source:  "kubernetes/autoscaler vertical-pod-autoscaler: recommender (target-cpu-percentile 0.9, safety margin 0.15, pod-recommendation-min-cpu-millicores 25), GetProportionalLimit",
			why:     "VPA keeps the limit/request ratio of the pod spec, which a trace does not have; a container that sets only a limit has its request equal to it (ratio 1)",
			request: vpa, limit: vpa},
	}
}

// promQuantile is Prometheus's quantile (quantile_over_time, which krr
// reads): linear between the two nearest ranks of the sorted values. 0
// without values.
func promQuantile(q float64, values []float64) float64 {
	if len(values) == 0 {
		return 0
	}
	v := slices.Clone(values)
	slices.Sort(v)
	rank := q * float64(len(v)-1)
	lo := int(math.Floor(rank))
	hi := min(lo+1, len(v)-1)
	w := rank - float64(lo)
	return v[lo]*(1-w) + v[hi]*w
}

// VPA's recommender, as kubernetes/autoscaler configures it by default:
// CPU samples go to a histogram of exponential buckets (the first 0.01
// CPUs wide, each 5 % wider than the one before, up to 1000 CPUs), each
// weighted by a decay that halves every 24 hours of age; the target is
// the end of the bucket where the weight reaches the 90th percentile,
// plus a 15 % safety margin, and at least 25 millicores.
const (
	vpaFirstBucket = 0.01
	vpaGrowth      = 1.05
	vpaMaxCPUs     = 1000.0
	vpaPercentile  = 0.9
	vpaMargin      = 0.15
	vpaMinCPUs     = 0.025
	vpaHalfLife    = 24 * time.Hour
)

// vpaTarget is VPA's CPU target for minute usage samples, oldest first.
func vpaTarget(usage []float64) float64 {
	if len(usage) == 0 {
		return vpaMinCPUs
	}
	buckets := int(math.Ceil(math.Log(vpaMaxCPUs*(vpaGrowth-1)/vpaFirstBucket+1)/math.Log(vpaGrowth))) + 1
	start := func(b int) float64 {
		return vpaFirstBucket * (math.Pow(vpaGrowth, float64(b)) - 1) / (vpaGrowth - 1)
	}
	bucket := func(v float64) int {
		if v < vpaFirstBucket {
			return 0
		}
		return min(int(math.Log(v*(vpaGrowth-1)/vpaFirstBucket+1)/math.Log(vpaGrowth)), buckets-1)
	}
	weight := make([]float64, buckets)
	var total float64
	for i, u := range usage {
		w := math.Exp2(float64(time.Duration(i)*Window) / float64(vpaHalfLife))
		weight[bucket(u)] += w
		total += w
	}
	var sum float64
	b := 0
	for ; b < buckets-1; b++ {
		sum += weight[b]
		if sum >= vpaPercentile*total {
			break
		}
	}
	end := start(b)
	if b < buckets-1 {
		end = start(b + 1)
	}
	return max(end*(1+vpaMargin), vpaMinCPUs)
}

// oneMinuteWindows counts windows: "1 one-minute window", "2 one-minute
// windows".
func oneMinuteWindows(n int) string {
	if n == 1 {
		return "1 one-minute window"
	}
	return fmt.Sprintf("%d one-minute windows", n)
}
