package report

import (
	"fmt"
	"strings"
	"time"

	"github.com/cfsprobe/cfsprobe/internal/trace"
)

// row is one run as the comparison table, the markdown and the run
// headers show it: every figure formatted once, the same everywhere.
type row struct {
	ID       string // HTML anchor: run-1, run-2, ...
	Name     string // scenario name (with repetition), else the trace's label
	Desc     string // scenario description
	Workload string // workload and arguments
	Limit    string // "0.5 CPUs" or "none"
	Limits   string // LimitsLine
	Limited  bool
	Host     string // hostLine

	CPUUsed       string // "0.49 CPUs"
	QuotaShare    string // "98% of the quota", "" when unlimited
	Wall          string
	Usage         string
	Throttled     string // "6/43", "-" when unlimited
	ThrottledPct  string // "14%", "-" when unlimited
	ThrottledTime string
	WallShare     string // throttled time / wall time
	Ops           string
	Op            string
	P50, P90      string
	P99, P999     string
	Max           string

	Expectations []expectation
	Verdict      string // "pass", "fail", "none", "" outside a suite
	FailedChecks []string
}

type expectation struct {
	OK    bool
	Text  string
	Value string
}

// rows formats the runs. A scenario run is named after its scenario, with
// its repetition when the set holds the scenario more than once.
func rows(runs []Named) []row {
	reps := map[string]int{}
	for _, r := range runs {
		if sc := r.Trace.Scenario; sc != nil {
			reps[repKey(r.Trace)]++
		}
	}
	out := make([]row, len(runs))
	for i, r := range runs {
		out[i] = newRow(r, reps)
		out[i].ID = fmt.Sprintf("run-%d", i+1)
	}
	return out
}

// repKey tells the scenarios of runs apart: a simulated run of a
// scenario is not a repetition of its measured one.
func repKey(t *trace.Trace) string {
	sc := t.Scenario
	return fmt.Sprintf("%s\x00%s\x00%t", sc.Suite, sc.Name, t.Spec.Simulated != nil)
}

func newRow(r Named, reps map[string]int) row {
	t, s := r.Trace, r.Trace.Summary
	w := row{
		Name:          r.Name,
		Workload:      workloadLine(t),
		Limit:         "none",
		Limits:        LimitsLine(t.Limits),
		Limited:       !t.Limits.Unlimited(),
		Host:          hostLine(t),
		CPUUsed:       fmt.Sprintf("%.2f CPUs", s.CPURatio),
		Wall:          dur(s.WallNs),
		Usage:         dur(s.UsageNs),
		Throttled:     "-",
		ThrottledPct:  "-",
		ThrottledTime: dur(s.ThrottledNs),
		WallShare:     "-",
		Ops:           "-",
		P50:           "-",
		P90:           "-",
		P99:           "-",
		P999:          "-",
		Max:           "-",
	}
	if sc := t.Scenario; sc != nil {
		w.Name = sc.Name
		if reps[repKey(t)] > 1 {
			w.Name = fmt.Sprintf("%s #%d", sc.Name, sc.Repetition)
		}
		w.Desc = sc.Description
		w.Verdict = sc.Verdict
		for _, e := range sc.Expectations {
			w.Expectations = append(w.Expectations, expectation{OK: e.OK, Text: e.Text, Value: expectValue(e)})
		}
	}
	w.Name = shownName(w.Name, t)
	if w.Limited {
		w.Limit = CPUs(cpus(t.Limits))
		w.Throttled = fmt.Sprintf("%d/%d", s.NrThrottled, s.NrPeriods)
		w.ThrottledPct = fmt.Sprintf("%.0f%%", 100*s.ThrottledRatio)
		if cpus(t.Limits) > 0 {
			w.QuotaShare = fmt.Sprintf("%.0f%% of the quota", 100*s.CPURatio/cpus(t.Limits))
		}
	}
	if s.WallNs > 0 {
		w.WallShare = pct(float64(s.ThrottledNs) / float64(s.WallNs))
	}
	if s.Ops > 0 {
		w.Ops = fmt.Sprint(s.Ops)
	}
	if t.Latency != nil {
		w.Op = t.Latency.Op
	}
	if p := s.LatencyNs; p != nil {
		w.P50, w.P90, w.P99, w.P999, w.Max = dur(p.P50), dur(p.P90), dur(p.P99), dur(p.P999), dur(p.Max)
	}
	for _, c := range t.Checks {
		if !c.OK {
			w.FailedChecks = append(w.FailedChecks, c.Detail)
		}
	}
	return w
}

// workloadLine is the workload as it was given to cfsprobe run: a
// built-in workload with its flags, or -- and the command line, quoted for
// a shell where needed.
func workloadLine(t *trace.Trace) string {
	args := make([]string, len(t.Spec.Args))
	for i, a := range t.Spec.Args {
		args[i] = shellQuote(a)
	}
	w := t.Spec.Workload
	if w == "command" {
		w = "--"
	}
	return strings.TrimSpace(w + " " + strings.Join(args, " "))
}

// shellQuote quotes an argument for a POSIX shell when it needs it.
func shellQuote(a string) string {
	if a != "" && strings.Trim(a, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.,:/=+%@") == "" {
		return a
	}
	return "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
}

// expectValue formats the measured value of an expectation: durations for
// *_ns metrics, a ratio for relative ones, else 3 significant digits.
func expectValue(e trace.Expectation) string {
	switch {
	case e.Relative != "":
		return fmt.Sprintf("%.3g× %s", e.Value, e.Relative)
	case e.Unit == "ns":
		return dur(int64(e.Value))
	default:
		return fmt.Sprintf("%.3g", e.Value)
	}
}

// pct formats a ratio as a percentage: whole numbers, one decimal below 10 %.
func pct(r float64) string {
	switch {
	case r == 0:
		return "0%"
	case r < 0.1:
		return fmt.Sprintf("%.1f%%", 100*r)
	default:
		return fmt.Sprintf("%.0f%%", 100*r)
	}
}

// dur is Dur with the micro sign, for formats that are not a terminal's.
func dur(ns int64) string {
	s := Dur(ns)
	if strings.HasSuffix(s, "us") {
		return strings.TrimSuffix(s, "us") + "µs"
	}
	return s
}

// shownName is the name a run is shown under: a simulated run says it is
// one, in every format.
func shownName(name string, t *trace.Trace) string {
	if t.Spec.Simulated != nil {
		return name + " (simulated)"
	}
	return name
}

// hostLine describes the machine in one line; for a simulated run, the
// simulated one.
func hostLine(t *trace.Trace) string {
	h := t.Host
	s, ok := SimulatedHost(t)
	if !ok {
		s = fmt.Sprintf("%s: Linux %s %s, %d CPUs, cgroup %s (cpu controller v%d)", h.Hostname, h.Kernel, h.Arch, h.CPUs, h.CgroupMode, h.CPUController)
	}
	if h.SliceUs > 0 {
		s += ", bandwidth slice " + dur(h.SliceUs*1000)
	}
	return s
}

// SimulatedHost says, of a simulated run (cfsprobe simulate), that it
// was: "simulated, kernel era 4.18, 64 CPUs", where a measured run's host
// is named. ok is false for a measured run.
func SimulatedHost(t *trace.Trace) (line string, ok bool) {
	if t.Spec.Simulated == nil {
		return "", false
	}
	return fmt.Sprintf("simulated, kernel era %s, %d CPUs", t.Spec.Simulated.Era, t.Host.CPUs), true
}

// common is what all runs share and is said once, at the top: the host
// (when there is only one), when the runs were recorded, the suite and the
// tool that wrote them.
type common struct {
	Host     string // "" when the runs come from several hosts
	Recorded string
	Suite    string // when every run is part of the same suite
	Tool     string
}

func commonOf(runs []Named) common {
	var c common
	hosts, suites, tools := map[string]bool{}, map[string]bool{}, map[string]bool{}
	var first, last time.Time
	for _, r := range runs {
		t := r.Trace
		c.Host = hostLine(t)
		hosts[c.Host] = true
		if t.Scenario != nil {
			suites[t.Scenario.Suite] = true
			c.Suite = t.Scenario.Suite
		} else {
			suites[""] = true
		}
		if t.Tool.Name != "" {
			c.Tool = strings.TrimSpace(t.Tool.Name + " " + t.Tool.Version)
			tools[c.Tool] = true
		}
		if !t.Started.IsZero() {
			end := t.Started.Add(time.Duration(t.Summary.WallNs))
			if first.IsZero() || t.Started.Before(first) {
				first = t.Started
			}
			if end.After(last) {
				last = end
			}
		}
	}
	if len(hosts) > 1 {
		c.Host = ""
	}
	if len(suites) > 1 {
		c.Suite = ""
	}
	if len(tools) > 1 {
		c.Tool = ""
	}
	if !first.IsZero() {
		first, last = first.UTC(), last.UTC()
		c.Recorded = first.Format("2006-01-02 15:04")
		switch {
		case last.Format("2006-01-02") != first.Format("2006-01-02"):
			c.Recorded += " – " + last.Format("2006-01-02 15:04")
		case last.Format("15:04") != first.Format("15:04"):
			c.Recorded += "–" + last.Format("15:04")
		}
		c.Recorded += " UTC"
	}
	return c
}
