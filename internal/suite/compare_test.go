package suite

import (
	"bytes"
	"strings"
	"testing"

	"github.com/cfsprobe/cfsprobe/internal/trace"
)

func summaryTrace(name string, throttled, cpu float64, p99, p999 int64) *trace.Trace {
	t := &trace.Trace{Scenario: &trace.Scenario{Name: name}}
	t.Summary.ThrottledRatio, t.Summary.CPURatio = throttled, cpu
	if p99 > 0 {
		t.Summary.LatencyNs = &trace.Percentiles{P99: p99, P999: p999}
	}
	return t
}

// Agree's bounds: 5 points of throttled ratio, 5 % of CPU used, and 20 %
// or 2 ms of p99 and p99.9, whichever is larger; on each side.
func TestAgree(t *testing.T) {
	const ms = int64(1e6)
	m := summaryTrace("x", 0.50, 0.40, 100*ms, 5*ms)
	for _, c := range []struct {
		name string
		sim  *trace.Trace
		ok   []bool // throttled, CPU used, p99, p99.9
	}{
		{"same", summaryTrace("x", 0.50, 0.40, 100*ms, 5*ms), []bool{true, true, true, true}},
		{"at the bounds", summaryTrace("x", 0.55, 0.42, 120*ms, 7*ms), []bool{true, true, true, true}},
		{"at the bounds below", summaryTrace("x", 0.45, 0.38, 80*ms, 3*ms), []bool{true, true, true, true}},
		{"beyond", summaryTrace("x", 0.56, 0.421, 121*ms, 7*ms+1), []bool{false, false, false, false}},
		{"beyond below", summaryTrace("x", 0.44, 0.379, 79*ms, 3*ms-1), []bool{false, false, false, false}},
		{"no latency", summaryTrace("x", 0.5, 0.4, 0, 0), []bool{true, true, false, false}},
	} {
		figs := Agree(m, c.sim)
		for i, f := range figs {
			if f.OK != c.ok[i] {
				t.Errorf("%s: %s %v / %v (bound %v): ok %v, want %v", c.name, f.Name, f.Measured, f.Simulated, f.Bound, f.OK, c.ok[i])
			}
		}
		want := true
		for _, ok := range c.ok {
			want = want && ok
		}
		if Agrees(figs) != want {
			t.Errorf("%s: Agrees %v, want %v", c.name, !want, want)
		}
	}
}

// burstsTrace has n operations of 50 ms, slow of them 100 ms (a burst
// throttled for a period), with their percentiles.
func burstsTrace(n, slow int) *trace.Trace {
	const ms = int64(1e6)
	t := summaryTrace("B-moderate", 0.01, 0.5, 0, 0)
	t.Latency = &trace.Latency{Op: "burst", Count: int64(n)}
	for i := range n {
		w := 50 * ms
		if i < slow {
			w = 100 * ms
		}
		t.Latency.Samples = append(t.Latency.Samples, trace.Sample{StartNs: int64(i) * 100 * ms, WallNs: w})
	}
	t.Summary.LatencyNs, _ = t.Latency.Percentiles()
	return t
}

// A percentile outside at its rank agrees an operation below or above it
// in both runs (one burst of 101 throttled or none: the slowest, p99.9;
// three or one: the second slowest, p99, and the slowest), and three
// against none do not, at p99's rank or either side of it.
func TestAgreeAnOperationApart(t *testing.T) {
	for _, c := range []struct {
		name       string
		m, s       *trace.Trace
		p99, p999  bool
		shift999   int
		fig999Text string
	}{
		{"one throttled measured", burstsTrace(101, 1), burstsTrace(102, 0), true, true, -1, "100ms / 50ms (-50ms); an operation below: 50ms / 50ms"},
		{"one throttled simulated", burstsTrace(101, 0), burstsTrace(102, 1), true, true, -1, "50ms / 100ms (+50ms); an operation below: 50ms / 50ms"},
		{"three against none", burstsTrace(101, 3), burstsTrace(101, 0), false, false, 0, "100ms / 50ms (-50ms)"},
		{"three against one", burstsTrace(101, 3), burstsTrace(101, 1), true, true, 0, "100ms / 100ms (+0s)"},
	} {
		figs := Agree(c.m, c.s)
		p99, p999 := figs[2], figs[3]
		if p99.OK != c.p99 || p999.OK != c.p999 || p999.Shift != c.shift999 {
			t.Errorf("%s: p99 %v (%s), p99.9 %v at %d (%s); want %v, %v at %d", c.name, p99.OK, p99, p999.OK, p999.Shift, p999, c.p99, c.p999, c.shift999)
		}
		if got := p999.String(); got != c.fig999Text {
			t.Errorf("%s: p99.9 %q, want %q", c.name, got, c.fig999Text)
		}
	}
}

// The side-by-side table: a row per scenario, the figures as measured /
// simulated (difference), a mark on those outside, and the count.
func TestWriteComparison(t *testing.T) {
	const ms = int64(1e6)
	r := &Result{
		Traces:    []*trace.Trace{summaryTrace("a", 0.5, 0.4, 100*ms, 5*ms), summaryTrace("b", 0, 0.5, 50*ms, 51*ms)},
		Simulated: []*trace.Trace{summaryTrace("a", 0.52, 0.4, 101*ms, 5*ms), summaryTrace("b", 0.2, 0.5, 50*ms, 51*ms)},
	}
	r.Simulated[0].Host = trace.Host{Kernel: "6.18", CPUs: 2}
	r.Simulated[0].Spec.Simulated = &trace.Simulated{WakeupsNs: 10 * ms}
	quiet, busy := 0.01, 0.2
	r.Traces[0].Summary.OthersBusyCPUs, r.Traces[1].Summary.OthersBusyCPUs = &quiet, &busy
	var b bytes.Buffer
	if err := r.WriteComparison(&b); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	t.Logf("\n%s", out)
	for _, want := range []string{
		"(kernel era 6.18, 2 CPUs; the period boundaries and ticks where the measured run had them, and the lab's reader waking every 10ms)",
		"50.0% / 52.0% (+2.0 pt)",
		"40.0% / 40.0% (+0.0%)",
		"100ms / 101ms (+1ms)",
		"0.0% / 20.0% (+20.0 pt) !",
		"1 of 2 scenarios agree",
		"1 measured beside other work that kept more than 0.05 CPUs busy (disturbed)",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in\n%s", want, out)
		}
	}
	lines := strings.Split(out, "\n")
	if !strings.HasSuffix(strings.TrimSpace(lines[2]), "yes    0.01 CPUs") || !strings.HasSuffix(strings.TrimSpace(lines[3]), "no     0.20 CPUs disturbed") {
		t.Errorf("agree and other work columns:\n%s", out)
	}
}

// An absolute bound on a duration is recorded with its unit, so that the
// report shows the value as a duration; a ratio to another scenario has
// none.
func TestEvaluateUnit(t *testing.T) {
	v := &Value{V: 7e6, Text: "7ms"}
	if e := evaluate("latency_p99", Bound{Max: v}, 5.01e6, true, ""); e.Unit != "ns" {
		t.Errorf("latency_p99 <= 7ms: unit %q, want ns", e.Unit)
	}
	if e := evaluate("latency_p99", Bound{Max: &Value{V: 1.5, Text: "1.5"}}, 0.9, true, "A"); e.Unit != "" {
		t.Errorf("latency_p99 relative to A: unit %q, want none", e.Unit)
	}
	if e := evaluate("throttled_ratio", Bound{Max: &Value{V: 0.1, Text: "0.1"}}, 0.05, true, ""); e.Unit != "" {
		t.Errorf("throttled_ratio: unit %q, want none", e.Unit)
	}
}
