package recommend

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/cfsprobe/cfsprobe/internal/cgroup"
	"github.com/cfsprobe/cfsprobe/internal/cpuview"
	"github.com/cfsprobe/cfsprobe/internal/report"
	"github.com/cfsprobe/cfsprobe/internal/sim"
	"github.com/cfsprobe/cfsprobe/internal/suite"
	"github.com/cfsprobe/cfsprobe/internal/trace"
)

// Format is an output of the advice.
type Format string

// The formats.
const (
	FormatTable    Format = "table"
	FormatJSON     Format = "json"
	FormatK8s      Format = "k8s"
	FormatMarkdown Format = "markdown"
)

// Formats lists the formats.
var Formats = []Format{FormatTable, FormatJSON, FormatK8s, FormatMarkdown}

// ParseFormat reads a format's name.
func ParseFormat(s string) (Format, error) {
	for _, f := range Formats {
		if string(f) == s {
			return f, nil
		}
	}
	return "", fmt.Errorf("unknown format %q: use table, json, k8s or markdown", s)
}

// Write renders the groups in the format.
func Write(w io.Writer, f Format, groups []*Group) error {
	switch f {
	case FormatTable:
		return Table(w, groups)
	case FormatJSON:
		return JSON(w, groups)
	case FormatK8s:
		return K8s(w, groups)
	case FormatMarkdown:
		return Markdown(w, groups)
	}
	return fmt.Errorf("unknown format %q", f)
}

// Schema names the JSON document's version.
const Schema = "cfsprobe.recommend/v1"

// Document is the JSON output: docs/recommend.md describes every field.
type Document struct {
	Schema string   `json:"schema"`
	Groups []*Group `json:"groups"`
}

// JSON writes the groups as one indented JSON document.
func JSON(w io.Writer, groups []*Group) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(Document{Schema: Schema, Groups: groups})
}

// MarshalJSON writes a setting as the trace writes limits (trace.Limits:
// microseconds, a null quota for none) with the thread cap, Kubernetes'
// millicores (null without a limit) and the setting for people.
func (s Setting) MarshalJSON() ([]byte, error) {
	var milli *int64
	if m := s.Millicores(); m > 0 {
		milli = &m
	}
	return json.Marshal(struct {
		Limits     trace.Limits `json:"limits"`
		Threads    int          `json:"threads"`
		Millicores *int64       `json:"millicores"`
		Text       string       `json:"text"`
	}{trace.LimitsOf(s.Limits), s.Threads, milli, s.String()})
}

// UnmarshalJSON reads what MarshalJSON writes.
func (s *Setting) UnmarshalJSON(b []byte) error {
	var v struct {
		Limits  trace.Limits `json:"limits"`
		Threads int          `json:"threads"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	*s = Setting{Limits: v.Limits.Cgroup(), Threads: v.Threads}
	return nil
}

// row is one line of the table and the markdown.
type row struct {
	role, setting, throttled, stall, reserved, meets, note string
}

func predictionRow(role string, s Setting, p *Prediction, meets bool, note string) row {
	r := row{role: role, setting: s.String(), note: note, throttled: "-", stall: "-", reserved: "-", meets: "-"}
	if p == nil {
		return r
	}
	r.throttled, r.stall, r.meets = pct(p.ThrottledRatio), report.Dur(p.StallP99Ns), "no"
	if meets {
		r.meets = "yes"
	}
	if p.ReservedCPUs != nil {
		r.reserved = strconv.FormatFloat(*p.ReservedCPUs, 'f', -1, 64)
	}
	return r
}

// headroomWords is the model's headroom for people: "10% of headroom".
func headroomWords(h float64) string {
	if h == 0 {
		return "no headroom"
	}
	return pct(h) + " of headroom"
}

// rows are a group's lines: the current setting (measured and
// predicted), the recommendation, the best of each kind tried, the
// peers.
func (g *Group) rows() []row {
	var rs []row
	if m := g.Current.Measured; m != nil {
		rs = append(rs, predictionRow("current, measured", g.Current.Setting, m, g.Target.Met(*m), "what the trace shows"))
	}
	rs = append(rs, predictionRow("current", g.Current.Setting, &g.Current.Prediction, g.Current.Meets, ""))
	rec := g.Recommended
	rs = append(rs, predictionRow("RECOMMENDED", rec.Setting, rec.Prediction, rec.Meets, rec.Kind.Words()))
	for _, c := range g.Tried {
		note := ""
		if c.Prediction == nil || !c.Meets {
			note = c.Note
		}
		if c.Prediction == nil {
			rs = append(rs, row{role: "best " + c.Kind.Words(), setting: "-", throttled: "-", stall: "-", reserved: "-", meets: "-", note: note})
			continue
		}
		rs = append(rs, predictionRow("best "+c.Kind.Words(), c.Setting, c.Prediction, c.Meets, note))
	}
	for _, p := range g.Peers {
		rs = append(rs, predictionRow("peer "+p.Name, p.Setting, &p.Prediction, p.Meets, p.Rule))
	}
	return rs
}

// about is the group's first line: what it is and how it was modelled.
func (g *Group) about() string {
	m := g.Model
	what := g.Workload
	if g.Synthetic != "" {
		what += ", synthetic: " + g.Synthetic
	}
	return fmt.Sprintf("%s (%s): %d periods, %d throttled; used %s, demand %s (%s, from %s), on up to %s at once (from %s); simulated on kernel era %s, %s, period %v",
		g.Name, what, m.Periods, m.ThrottledPeriods, report.CPUs(m.UsedCPUs), report.CPUs(m.DemandCPUs), m.Demand, m.DemandFrom,
		report.CPUs(float64(m.Parallelism)), m.ParallelismFrom, m.Era, report.CPUs(float64(m.HostCPUs)), time.Duration(m.PeriodNs))
}

// notes are the lines under a group's table: the other reading of a
// recorded closed loop, a current limit cheaper than the advice, the
// model's prediction of the current setting where it is off what was
// measured, the thread cap, the peers' input and the limits their
// predictions use.
func (g *Group) notes() []string {
	var out []string
	if g.demandReadFromTrace() && g.Model.Demand == string(sim.DemandClosed) {
		// Read from its stretches: work that comes at its own times
		// catches up too, and they cannot tell it from a closed loop.
		out = append(out, "read as a closed loop from its throttled stretches; if its work comes at its own times (a job every second, requests that do not wait for the last answer), --demand scheduled keeps them")
	}
	if g.ambiguousTimed() {
		st, closed := g.Model.Stretches, "--demand closed reads it so"
		if c := g.AsClosed; c != nil {
			closed = fmt.Sprintf("%s (--demand closed)", c.Setting)
		}
		out = append(out, fmt.Sprintf("read as a loop that runs for a time: %d of its %d throttled stretches caught up after, at least half but fewer than %.0f%%, which a closed loop whose work ends just past a whole number of quotas shows too. The two readings bound the demand: the advice above takes the work of the stalls for lost (the most the group can have wanted); as a closed loop, its work only delayed (the least), it is %s. A recording under a looser limit, or none, tells which",
			st.CaughtUp, st.Ended, 100*trace.ClosedShare, closed))
	}
	if n := g.censoredThroughout(); n != "" {
		out = append(out, n)
	}
	if n := g.currentCheaper(); n != "" {
		out = append(out, n)
	}
	if n := g.currentApart(); n != "" {
		out = append(out, n)
	}
	if n := g.Recommended.Setting.Threads; n > 0 {
		if g.Model.ParallelismFrom == trace.FromParams {
			out = append(out, fmt.Sprintf("the thread cap: at most %s busy at once, the built-in workload's --threads %d", threads(n), n))
		} else {
			out = append(out, fmt.Sprintf("the thread cap: at most %s busy at once; a program that sizes its pools by the CPU count takes it from cfsprobe exec --cpus %d (or the variables of --format k8s), one that sets the count itself (a --threads or workers flag) from that flag",
				threads(n), n))
		}
	}
	if len(g.Peers) == 0 {
		return out
	}
	n := len(g.Windows.UsageCPUs)
	avg := 0.0
	for _, u := range g.Windows.UsageCPUs {
		avg += u / float64(n)
	}
	out = append(out, fmt.Sprintf("peers read minute-average usage: %s, %s on average", g.Windows.Formed, report.CPUs(avg)))
	for _, p := range g.Peers {
		if p.Why != "" {
			out = append(out, fmt.Sprintf("%s: %s", p.Name, p.Why))
		}
	}
	return out
}

// CensoredShare is the share of a trace's periods throttled above which
// the advice says that the group's demand was hardly seen at all.
const CensoredShare = 0.9

// censoredThroughout says, for a command or a recording throttled in
// nearly every period (CensoredShare) and not read as a closed loop,
// that its demand is known only to exceed what it got, and what the
// replay took it to be ("" otherwise): the advice rests on that reading.
func (g *Group) censoredThroughout() string {
	m := g.Model
	if !g.demandReadFromTrace() || m.Demand == string(sim.DemandClosed) || m.Periods == 0 || float64(m.ThrottledPeriods) < CensoredShare*float64(m.Periods) {
		return ""
	}
	return fmt.Sprintf("throttled in %d of its %d periods, the group's demand is known only to exceed its limit: the replay (%s) took it for %s busy in every throttled period, an upper bound (a service that queued its requests while it stood still wanted less); record it for a while under a looser limit, or none, to see what it wants",
		m.ThrottledPeriods, m.Periods, m.Demand, report.CPUs(float64(m.Parallelism)))
}

// currentCheaper says why the advice reserves more than a current limit
// that meets the target too ("" when it does not): the current setting
// is simulated where the trace's periods fell, since the kernel keeps
// its grid while the limits stay, and a recording has measured it; a
// new setting must meet the target wherever its periods fall (a
// recording's other settings are judged on the worst of phaseCount
// grids, predictor.phases), with the step above it, and with the
// headroom.
func (g *Group) currentCheaper() string {
	cur, rec := g.Current, g.Recommended
	if !cur.Meets || cur.Setting.Limits.Unlimited() || cur.Measured != nil && !g.Target.Met(*cur.Measured) {
		return ""
	}
	if rec.Kind != KindNoLimit && reserved(rec.Candidate) <= cur.Setting.Limits.CPUs() {
		return ""
	}
	if cur.Measured == nil {
		return fmt.Sprintf("the current %s meets the target too (%s throttled, simulated); the advice meets it with the step above it too, and with %s (docs/recommend.md, \"Headroom\"): the current limit meets it without that margin",
			cur.Setting, pct(cur.Prediction.ThrottledRatio), headroomWords(g.Model.Headroom))
	}
	return fmt.Sprintf("the current %s meets the target too, where the recording's periods fell (%s throttled, %s simulated); the advice meets it wherever they fall (the worst of %d grids), with the step above it too, and with %s (docs/recommend.md, \"Where the periods fall\", \"Headroom\"): the current limit is enough while the work falls in the periods as it did when recorded",
		cur.Setting, pct(cur.Measured.ThrottledRatio), pct(cur.Prediction.ThrottledRatio), phaseCount, headroomWords(g.Model.Headroom))
}

// currentApart says which way the model's prediction of the current
// setting is off what the trace measured under it, and why, when it is
// off by more than the simulator is validated to (the suites' bounds,
// suite.Agree: throttled periods within 5 points, a latency within 20 %
// or 2 ms, here the p99 stall); "" otherwise, and for a synthetic trace,
// which measured nothing per period. The predictions of the other
// settings come from the same replay and lean the same way.
func (g *Group) currentApart() string {
	m, p := g.Current.Measured, g.Current.Prediction
	if m == nil {
		return ""
	}
	stallBound := float64(suite.LatencyBound(time.Duration(m.StallP99Ns)))
	dThr, dStall := p.ThrottledRatio-m.ThrottledRatio, float64(p.StallP99Ns-m.StallP99Ns)
	worse := dThr > suite.ThrottledPoints || dStall > stallBound
	better := dThr < -suite.ThrottledPoints || dStall < -stallBound
	if !worse && !better {
		return ""
	}
	apart := fmt.Sprintf("the model puts the current %s at %s of periods throttled and a p99 stall of %s, where the trace measured %s and %s",
		g.Current.Setting, pct(p.ThrottledRatio), report.Dur(p.StallP99Ns), pct(m.ThrottledRatio), report.Dur(m.StallP99Ns))
	switch {
	case worse && !better:
		return apart + ": where the trace cannot tell, the replay takes the worst case (each period's work as one burst on the CPUs it ran on, a throttled period's missed work as all its stopped CPUs could have done: docs/simulate.md, \"Assumptions and limits\"), and every prediction above leans the same way, to the safe side"
	case better && !worse:
		return apart + ": the replay sees less demand than the group had (an open service's backlog, work that other processes took the CPUs from: docs/simulate.md, \"Assumptions and limits\"), and every prediction above leans the same way: the advice may fall short of the target; --verify reruns it where the trace can be rerun, and a recording under a looser limit shows more of the demand"
	}
	return apart + ": off both ways, beyond what the simulator is validated to (docs/simulate.md, \"Assumptions and limits\"); --verify reruns the advice where the trace can be rerun"
}

// Table writes the advice for people: per group, a table of the
// settings with their predictions, why the recommendation was chosen,
// and what the peers read.
func Table(w io.Writer, groups []*Group) error {
	for i, g := range groups {
		if i > 0 {
			fmt.Fprintln(w)
		}
		fmt.Fprintln(w, g.about())
		fmt.Fprintf(w, "target: %s, %s\n\n", g.Target, headroomWords(g.Model.Headroom))
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "\tsetting\tthrottled\tp99 stall\treserved CPUs\tmeets\t")
		for _, r := range g.rows() {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.role, r.setting, r.throttled, r.stall, r.reserved, r.meets, r.note)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		fmt.Fprintf(w, "\nwhy: %s.\n", g.Recommended.Reason)
		for _, n := range g.notes() {
			fmt.Fprintf(w, "  %s.\n", n)
		}
		if v := g.Verified; v != nil {
			fmt.Fprintf(w, "\nverified: each setting rerun on this host (predicted / measured):\n\n")
			tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "\tsetting\tthrottled\tp99 stall\tCPU used\top p99.9\tmeets\t")
			for _, r := range v.rows() {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.role, r.setting, r.throttled, r.stall, r.used, r.latency, r.meets, r.note)
			}
			if err := tw.Flush(); err != nil {
				return err
			}
			fmt.Fprintf(w, "\n%s.\n  the rule: %s.\n", v.Why, v.Rule)
		}
	}
	return nil
}

// verifiedRow is one line of the verified table.
type verifiedRow struct {
	role, setting, throttled, stall, used, latency, meets, note string
}

// rows are the verified table's lines: predicted / measured.
func (v *Verified) rows() []verifiedRow {
	var rs []verifiedRow
	for _, r := range v.Runs {
		p, m := r.Predicted, r.Measured
		row := verifiedRow{role: r.Role, setting: r.Setting.String(), meets: yesNo(r.Meets), note: strings.Join(r.Warnings, "; "),
			throttled: pctOf(p) + " / " + pct(m.ThrottledRatio),
			stall:     stallOf(p) + " / " + report.Dur(m.StallP99Ns),
			used:      "- / " + strconv.FormatFloat(m.UsedCPUs, 'f', 3, 64),
			latency:   "- / " + durPtr(m.LatencyP999Ns)}
		if p != nil {
			row.used = strconv.FormatFloat(p.UsedCPUs, 'f', 3, 64) + " / " + strconv.FormatFloat(m.UsedCPUs, 'f', 3, 64)
			row.latency = durPtr(p.LatencyP999Ns) + " / " + durPtr(m.LatencyP999Ns)
		}
		if r.Role == RoleRecommended {
			row.role = "RECOMMENDED"
		}
		rs = append(rs, row)
	}
	return rs
}

func durPtr(ns *int64) string {
	if ns == nil {
		return "-"
	}
	return report.Dur(*ns)
}

// Markdown writes the advice for a review: a section per group.
func Markdown(w io.Writer, groups []*Group) error {
	fmt.Fprintln(w, "# CPU limits: cfsprobe's recommendations")
	for _, g := range groups {
		fmt.Fprintf(w, "\n## %s\n\n", g.Name)
		fmt.Fprintf(w, "%s.\n\nTarget: %s, %s. **Recommended: %s (%s).** %s.\n\n",
			g.about(), g.Target, headroomWords(g.Model.Headroom), g.Recommended.Setting, g.Recommended.Kind.Words(), capitalize(g.Recommended.Reason))
		fmt.Fprintln(w, "| | setting | throttled | p99 stall | reserved CPUs | meets | |")
		fmt.Fprintln(w, "|---|---|---:|---:|---:|---|---|")
		for _, r := range g.rows() {
			fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s | %s |\n", r.role, r.setting, r.throttled, r.stall, r.reserved, r.meets, r.note)
		}
		fmt.Fprintln(w)
		for _, n := range g.notes() {
			fmt.Fprintf(w, "- %s.\n", n)
		}
		if v := g.Verified; v != nil {
			fmt.Fprintf(w, "\n### Verified: each setting rerun (predicted / measured)\n\n")
			fmt.Fprintln(w, "| | setting | throttled | p99 stall | CPU used | op p99.9 | meets | |")
			fmt.Fprintln(w, "|---|---|---:|---:|---:|---:|---|---|")
			for _, r := range v.rows() {
				fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s | %s | %s |\n", r.role, r.setting, r.throttled, r.stall, r.used, r.latency, r.meets, r.note)
			}
			fmt.Fprintf(w, "\n**%s.** The rule: %s.\n", capitalize(v.Why), v.Rule)
		}
	}
	return nil
}

func capitalize(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// K8s writes a strategic-merge patch per group for the pod template of
// its workload (kubectl patch deployment NAME --patch-file FILE):
// resources.limits.cpu in millicores (null: remove the limit), and the
// thread cap as the environment variables runtimes size their threads
// by (the CPU view's: cpuview.Merge). A burst and a period other than
// Kubernetes' are said in comments: the pod spec has no field for them.
func K8s(w io.Writer, groups []*Group) error {
	for i, g := range groups {
		if i > 0 {
			fmt.Fprintln(w, "---")
		}
		rec := g.Recommended
		fmt.Fprintf(w, "# %s: %s, %s (%s; predicted %s throttled, p99 stall %s)\n",
			g.Name, rec.Kind.Words(), rec.Setting, g.Target, pctOf(rec.Prediction), stallOf(rec.Prediction))
		if v := g.Verified; v != nil {
			fmt.Fprintf(w, "# verified, %s\n", v.Why)
		}
		container := g.Name
		switch n := g.Names; {
		case n.ContainerName != "" && n.PodName != "":
			container = n.ContainerName
			fmt.Fprintf(w, "# pod %s/%s, container %s, as recorded: kubectl patch the workload that owns the pod\n", n.PodNamespace, n.PodName, n.ContainerName)
		case n.ContainerName != "":
			container = n.ContainerName
			fmt.Fprintf(w, "# container %s, as recorded: the pod template's container of that name\n", n.ContainerName)
		case n.PodName != "":
			fmt.Fprintf(w, "# pod %s/%s, as recorded: its group holds all its containers; give the limit to the one that uses the CPU (change the name below to it)\n", n.PodNamespace, n.PodName)
		default:
			fmt.Fprintln(w, "# the container's name is the group's: change it to your container's")
		}
		l := rec.Setting.Limits
		if l.Burst > 0 {
			fmt.Fprintf(w, "# CPU burst has no field in the pod spec: set cpu.cfs_burst_us (cgroup v1) or cpu.max.burst (v2) of the container's group to %d on the node\n", l.Burst.Microseconds())
		}
		if !l.Unlimited() && l.Period != cgroup.DefaultPeriod {
			fmt.Fprintf(w, "# the period is %v: the node's kubelet sets it for every pod (cpuCFSQuotaPeriod), not the pod spec\n", l.Period)
		}
		cpu := "null"
		if m := rec.Setting.Millicores(); m > 0 {
			cpu = fmt.Sprintf("%dm", m)
		}
		fmt.Fprintf(w, "spec:\n  template:\n    spec:\n      containers:\n        - name: %s\n          resources:\n            limits:\n              cpu: %s\n", yamlString(container), cpu)
		if n := rec.Setting.Threads; n > 0 {
			_, changes := cpuview.Merge(nil, cpuview.Settings{CPUs: n})
			fmt.Fprintf(w, "          # the thread cap: what runtimes size their threads by (%s is read by cfsprobe's CPU view library, when the image preloads it); a variable you set already is replaced: merge %s with yours\n", cpuview.EnvCPUs, cpuview.JavaOptions)
			fmt.Fprintln(w, "          env:")
			for _, c := range changes {
				fmt.Fprintf(w, "            - name: %s\n              value: %s\n", c.Name, yamlString(c.Value))
			}
		}
	}
	return nil
}

// yamlString quotes a YAML scalar (JSON strings are YAML).
func yamlString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

func pctOf(p *Prediction) string {
	if p == nil {
		return "-"
	}
	return pct(p.ThrottledRatio)
}

func stallOf(p *Prediction) string {
	if p == nil {
		return "-"
	}
	return report.Dur(p.StallP99Ns)
}
