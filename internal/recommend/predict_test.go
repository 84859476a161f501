package recommend

import (
	"testing"
	"time"

	"github.com/cfsprobe/cfsprobe/internal/sim"
	"github.com/cfsprobe/cfsprobe/internal/trace"
)

// A recording does not say where the periods of a new setting will fall
// against its work: the recommendation meets the target on each of the
// grids tried, and its prediction is the one of the grid that throttled
// the most periods. Under the limits it was recorded under, a recording
// is simulated on its own periods; a synthetic trace, made of the
// kernel's periods, under any quota at its period.
func TestPhasesOfTheGrid(t *testing.T) {
	for _, name := range []string{"bursty-4-threads-40ms-per-second-unlimited", "recorded-bursty-2-threads-80ms-per-second-unlimited"} {
		t.Run(name, func(t *testing.T) {
			tr := readFixture(t, name)
			g := advise(t, name, Options{})
			rec := g.Recommended
			if rec.Setting.Limits.Unlimited() {
				t.Fatalf("recommended %s: not the case under test", rec.Setting)
			}
			p, err := newPredictor(tr, g.Model.Era, g.Model.HostCPUs, 1, sim.ReplayOptions{Demand: sim.Demand(g.Model.Demand)})
			if err != nil {
				t.Fatal(err)
			}
			phases := p.phases(rec.Setting.Limits)
			if len(phases) != phaseCount {
				t.Fatalf("%d grids for a trace without a limit, want %d", len(phases), phaseCount)
			}
			worst, spread := -1.0, map[float64]bool{}
			for _, phase := range phases {
				res, err := sim.Run(sim.Config{Era: g.Model.Era, CPUs: g.Model.HostCPUs, Limits: rec.Setting.Limits, Seed: 1, Phase: phase, QuietIdle: true}, p.replays[0].Threads())
				if err != nil {
					t.Fatal(err)
				}
				ratio := trace.CounterSummary(res.Samples, res.EndNs).ThrottledRatio
				spread[ratio] = true
				if !g.Target.Met(Prediction{ThrottledRatio: ratio}) {
					t.Errorf("%s on the grid at %v: %.2f%% of periods throttled, want the target (%s) met", rec.Setting, phase, 100*ratio, g.Target)
				}
				worst = max(worst, ratio)
			}
			t.Logf("%s: %d throttled ratios over %d grids, the worst %.2f%%", rec.Setting, len(spread), len(phases), 100*worst)
			if rec.Prediction.ThrottledRatio != worst {
				t.Errorf("predicted %.4f of periods throttled, want the worst grid's, %.4f", rec.Prediction.ThrottledRatio, worst)
			}
		})
	}

	tight := readFixture(t, "recorded-bursty-2-threads-80ms-per-second-0.2cpu")
	for _, synthetic := range []string{"", "made of the periods of a recording"} {
		tight.Spec.Synthetic = synthetic
		p, err := newPredictor(tight, sim.Era6_18, 2, 1, sim.ReplayOptions{})
		if err != nil {
			t.Fatal(err)
		}
		l := tight.Limits.Cgroup()
		want := phaseCount
		if synthetic != "" {
			want = 1
		}
		if got, own := p.phases(l)[0], l.PeriodOrDefault()-sim.DefaultTick/2; got != own {
			t.Errorf("synthetic %q: the trace's own grid at %v, want a period less half a tick, %v", synthetic, got, own)
		}
		if n := len(p.phases(l)); n != 1 {
			t.Errorf("synthetic %q: %d grids under the trace's own limits, want 1", synthetic, n)
		}
		l.Quota += time.Millisecond
		if n := len(p.phases(l)); n != want {
			t.Errorf("synthetic %q: %d grids for another quota at the trace's own period, want %d", synthetic, n, want)
		}
		l.Period, l.Quota = 50*time.Millisecond, l.Quota/2
		if n := len(p.phases(l)); n != phaseCount {
			t.Errorf("synthetic %q: %d grids at another period than the trace's, want %d", synthetic, n, phaseCount)
		}
		l.Quota = 0
		if n := len(p.phases(l)); n != 1 {
			t.Errorf("synthetic %q: %d grids without a limit, want 1 (no period timer)", synthetic, n)
		}
	}
}
