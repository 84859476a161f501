package sim

import (
	"strings"
	"testing"
	"time"

	"github.com/cfsprobe/cfsprobe/internal/cgroup"
	"github.com/cfsprobe/cfsprobe/internal/trace"
)

// A spread made from timed events has their quantiles, scaled to the
// events' mean CPU time; one that is not increasing is refused.
func TestSpreadOf(t *testing.T) {
	h := trace.NewHistogram()
	// 1000 events: 980 of 3 ms, 10 of 5 ms and 10 of 6 ms, as the qemu
	// guest's are (a slow one in a hundred).
	for i := range 1000 {
		v := 3 * ms
		switch {
		case i >= 990:
			v = 6 * ms
		case i >= 980:
			v = 5 * ms
		}
		_ = h.RecordValue(int64(v))
	}
	times := trace.LatencyFromHistogram("event", h)
	s, err := spreadOf(3*ms, times)
	if err != nil {
		t.Fatal(err)
	}
	if m := s.Mean(); m < 3*ms-time.Microsecond || m > 3*ms+time.Microsecond {
		t.Errorf("spread %v: mean %v, want the events' mean CPU time, 3ms", s, m)
	}
	// The shape is the events': the slowest twice the median.
	if r := float64(s[len(s)-1]) / float64(s[3]); r < 1.95 || r > 2.05 {
		t.Errorf("spread %v: the slowest %.2f times the median, want 2", s, r)
	}
	if err := s.Check(); err != nil {
		t.Error(err)
	}
	bad := s
	bad[2], bad[3] = bad[3]+ms, bad[2]
	if err := bad.Check(); err == nil || !strings.Contains(err.Error(), "increasing") {
		t.Errorf("a decreasing spread: %v", err)
	}
	if _, err := spreadOf(ms, trace.LatencyFromHistogram("event", trace.NewHistogram())); err == nil {
		t.Error("a spread of no events")
	}
	if (EventSpread{}).Check() != nil || !(EventSpread{}).Zero() || len(s.Trace()) != len(EventQuantiles) || (EventSpread{}).Trace() != nil {
		t.Error("the zero spread is none: valid, not recorded")
	}
}

// Events drawn from a spread have its quantiles and its mean: one
// thread under no limit times them as they were drawn; the same seed
// draws the same; a plan whose event's mean is not its spread's is
// refused.
func TestEventSpreadDrawn(t *testing.T) {
	var s EventSpread
	for i, d := range []time.Duration{2800, 2850, 2880, 2900, 2950, 3050, 3200, 4700, 5300, 5800} {
		s[i] = d * time.Microsecond
	}
	setup := Setup{Workload: "parallel", Args: []string{"--threads", "1", "--duration", "10s"}, Era: Era6_18, CPUs: 2,
		Limits: cgroup.Limits{Period: 100 * ms}, Costs: Costs{Event: s.Mean(), EventSpread: s}, Seed: 7}
	run := func(s Setup) *trace.Trace {
		t.Helper()
		p, err := Prepare(s)
		if err != nil {
			t.Fatal(err)
		}
		tr, err := p.Run()
		if err != nil {
			t.Fatal(err)
		}
		return tr
	}
	tr := run(setup)
	p := tr.Summary.LatencyNs
	n := tr.Latency.Count
	t.Logf("spread %v (mean %v): %d events, %+v", s, s.Mean(), n, p)
	near := func(got int64, want time.Duration, tol float64) bool {
		return float64(got) >= (1-tol)*float64(want) && float64(got) <= (1+tol)*float64(want)
	}
	if !near(p.P50, s[3], 0.02) || !near(p.P99, s[7], 0.05) || !near(int64(p.Mean), s.Mean(), 0.02) || p.Max > int64(s[9]) {
		t.Errorf("events drawn from %v: %+v, want its median, p99, mean (%v) and none beyond its slowest", s, p, s.Mean())
	}
	if q := tr.Spec.Simulated.EventCPUQuantiles; len(q) != len(EventQuantiles) || q[7].P != 0.99 || q[7].Ns != int64(s[7]) {
		t.Errorf("event_cpu_quantiles %+v", q)
	}
	if again := run(setup); again.Summary.UsageNs != tr.Summary.UsageNs || again.Latency.Count != n {
		t.Error("the same seed drew other events")
	}
	setup.Costs.Event = 3 * ms
	if _, err := Prepare(setup); err == nil || !strings.Contains(err.Error(), "mean of its spread") {
		t.Errorf("an event's mean apart from its spread's: %v", err)
	}
}
