package suite

import (
	"fmt"
	"io"
	"math"
	"text/tabwriter"
	"time"

	"github.com/cfsprobe/cfsprobe/internal/report"
	"github.com/cfsprobe/cfsprobe/internal/trace"
)

// The simulator is validated on the figures of Agree: a simulated run
// agrees with the measured one when its throttled ratio is within
// ThrottledPoints of the measured one, its CPU used within CPUShare of it,
// and its p99 and p99.9 latencies within LatencyShare of the measured
// ones or LatencyFloor, whichever is larger (issue 10, must-show 1).
const (
	ThrottledPoints = 0.05
	CPUShare        = 0.05
	LatencyShare    = 0.20
	LatencyFloor    = 2 * time.Millisecond
)

// Figure is one figure of a measured and a simulated run.
type Figure struct {
	Name                string // "throttled", "CPU used", "p99", "p99.9"
	Measured, Simulated float64
	// Bound is how far apart they may be, in the figure's unit.
	Bound float64
	// OK: within the bound. A figure one run lacks (latency of a
	// command) is not OK.
	OK   bool
	text func(float64) string
}

// Diff is Simulated - Measured.
func (f Figure) Diff() float64 { return f.Simulated - f.Measured }

// String says both values and their difference: "12% / 14% (+2.0 pt)".
func (f Figure) String() string {
	if math.IsNaN(f.Measured) || math.IsNaN(f.Simulated) {
		return "-"
	}
	return fmt.Sprintf("%s / %s (%s)", f.text(f.Measured), f.text(f.Simulated), f.diffText())
}

func (f Figure) diffText() string {
	switch f.Name {
	case "throttled":
		return fmt.Sprintf("%+.1f pt", 100*f.Diff())
	case "CPU used":
		if f.Measured == 0 {
			return fmt.Sprintf("%+.3f CPUs", f.Diff())
		}
		return fmt.Sprintf("%+.1f%%", 100*f.Diff()/f.Measured)
	}
	d := report.Dur(int64(math.Abs(f.Diff())))
	if f.Diff() < 0 {
		return "-" + d
	}
	return "+" + d
}

// Agree compares a simulated run with the measured one on the figures
// the simulator is validated on.
func Agree(measured, simulated *trace.Trace) []Figure {
	m, s := measured.Summary, simulated.Summary
	pct := func(v float64) string { return fmt.Sprintf("%.1f%%", 100*v) }
	figs := []Figure{
		{Name: "throttled", Measured: m.ThrottledRatio, Simulated: s.ThrottledRatio, Bound: ThrottledPoints, text: pct},
		{Name: "CPU used", Measured: m.CPURatio, Simulated: s.CPURatio, Bound: CPUShare * m.CPURatio, text: pct},
	}
	lat := func(name string, get func(*trace.Percentiles) int64) Figure {
		f := Figure{Name: name, Measured: math.NaN(), Simulated: math.NaN(), text: func(v float64) string { return report.Dur(int64(v)) }}
		if m.LatencyNs != nil {
			f.Measured = float64(get(m.LatencyNs))
		}
		if s.LatencyNs != nil {
			f.Simulated = float64(get(s.LatencyNs))
		}
		f.Bound = max(LatencyShare*f.Measured, float64(LatencyFloor))
		return f
	}
	figs = append(figs,
		lat("p99", func(p *trace.Percentiles) int64 { return p.P99 }),
		lat("p99.9", func(p *trace.Percentiles) int64 { return p.P999 }))
	for i := range figs {
		f := &figs[i]
		// A little slack for rounding: CPU used of an idle run is 0.
		f.OK = !math.IsNaN(f.Diff()) && math.Abs(f.Diff()) <= f.Bound+1e-9
	}
	return figs
}

// Agrees says whether every figure agrees.
func Agrees(figs []Figure) bool {
	for _, f := range figs {
		if !f.OK {
			return false
		}
	}
	return true
}

// WriteComparison prints, per scenario, the measured and the simulated
// run side by side (Agree's figures: measured / simulated (difference))
// and whether they agree; then how many do.
func (r *Result) WriteComparison(w io.Writer) error {
	if len(r.Simulated) == 0 {
		return nil
	}
	s0 := r.Simulated[0]
	fmt.Fprintf(w, "measured on this host / simulated (kernel era %s, %d CPUs):\n", s0.Host.Kernel, s0.Host.CPUs)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "scenario\tthrottled\tCPU used\tp99\tp99.9\tagree")
	agree := 0
	for i, m := range r.Traces {
		if i >= len(r.Simulated) {
			break
		}
		figs := Agree(m, r.Simulated[i])
		row := m.Scenario.Name
		for _, f := range figs {
			mark := ""
			if !f.OK {
				mark = " !"
			}
			row += "\t" + f.String() + mark
		}
		word := "no"
		if Agrees(figs) {
			word = "yes"
			agree++
		}
		fmt.Fprintf(tw, "%s\t%s\n", row, word)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(w, "%d of %d scenarios agree (throttled within %.0f points, CPU used within %.0f%%, p99 and p99.9 within %.0f%% or %v; ! marks a figure outside)\n",
		agree, len(r.Simulated), 100*ThrottledPoints, 100*CPUShare, 100*LatencyShare, LatencyFloor)
	return nil
}
