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
