package cpuview

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// Write encodes the view as indented JSON.
func (v *View) Write(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// WriteText prints the view for people: one labelled line per fact, the
// levels and the rules as aligned tables. Warnings are not printed here
// (they are diagnostics: the command prints them on stderr).
func (v *View) WriteText(w io.Writer) error {
	var b strings.Builder
	line := func(label, format string, a ...any) {
		fmt.Fprintf(&b, "%-10s %s\n", label, fmt.Sprintf(format, a...))
	}
	cont := func(s string) { fmt.Fprintf(&b, "%-10s %s\n", "", s) }

	who := "this process"
	if v.Cgroup != "" {
		who = "group " + v.Cgroup
	}
	if v.PID > 0 {
		who = fmt.Sprintf("pid %d", v.PID)
		if v.Cgroup != "" {
			who += ", group " + v.Cgroup
		}
	}
	if v.CgroupVersion > 0 {
		who += fmt.Sprintf(" (cpu controller v%d)", v.CgroupVersion)
	}
	line("process", "%s", who)
	line("online", "%s", listText(&v.Online))
	if v.PID > 0 || v.Affinity != nil {
		line("affinity", "%s", listText(v.Affinity))
	}
	line("cpuset", "%s", listText(v.Cpuset))
	line("usable", "%d %s (online, affinity and cpuset together)", v.UsableCPUs, plural(v.UsableCPUs, "CPU"))

	if len(v.Levels) == 0 {
		line("quota", "unknown (no group of the cpu controller could be read)")
	} else {
		rows := [][]string{{"group", "quota", "period", "CPUs", "burst", weightName(v.CgroupVersion), ""}}
		for _, l := range v.Levels {
			r := []string{l.Cgroup, "none", "", "", fmtDur(l.BurstNs), "", ""}
			if l.PeriodNs > 0 {
				r[2] = fmtDur(l.PeriodNs)
			}
			if q, _, ok := l.quota(); ok {
				r[1], r[3] = fmtDur(q), fmtCPUs(*l.CPUs)
			}
			if l.Error != "" {
				r[1], r[4] = "unreadable", ""
			}
			if w := max(l.Shares, l.Weight); w > 0 {
				r[5] = fmt.Sprint(w)
			}
			if l.Tightest {
				r[6] = "<- tightest"
			}
			rows = append(rows, r)
		}
		for i, s := range table(rows) {
			if i == 0 {
				line("quota", "%s", s)
			} else {
				cont(s)
			}
		}
		switch {
		case v.AncestorsHidden && v.MountRoot == "/":
			cont("(a cgroup namespace: the root seen from here is a group; those above it are not visible)")
		case v.AncestorsHidden:
			cont(fmt.Sprintf("(the hierarchy is mounted at %s: groups above it are not visible from here)", v.MountRoot))
		}
	}

	eff := cpusText(v.EffectiveCPUs)
	switch v.LimitedBy {
	case "quota":
		for _, l := range v.Levels {
			if l.Tightest {
				eff += fmt.Sprintf(" (the quota of %s; %d usable CPUs)", l.Cgroup, v.UsableCPUs)
			}
		}
	default:
		eff += fmt.Sprintf(" (%s", map[string]string{"online": "the online CPUs", "affinity": "the affinity", "cpuset": "the cpuset"}[v.LimitedBy])
		if v.QuotaCPUs != nil {
			eff += fmt.Sprintf("; the tightest quota is %s", cpusText(*v.QuotaCPUs))
		} else {
			eff += "; no quota"
		}
		eff += ")"
	}
	line("effective", "%s", eff)

	rows := make([][]string, 0, len(v.Rules))
	for _, r := range v.Rules {
		rows = append(rows, []string{r.Rule, fmt.Sprint(r.Threads), strings.Join(r.Runtimes, ", ")})
	}
	for i, s := range table(rows) {
		if i == 0 {
			line("threads", "%s", s)
		} else {
			cont(s)
		}
	}
	rec := fmt.Sprintf("%d %s (%s, at least 1): %s", v.Recommendation.Threads, plural(v.Recommendation.Threads, "thread"), v.Recommendation.Rule, v.Recommendation.Reason)
	for i, s := range wrap(rec, 80-11) {
		if i == 0 {
			line("recommend", "%s", s)
		} else {
			cont(s)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func weightName(version int) string {
	if version == 2 {
		return "weight"
	}
	return "shares"
}

func listText(l *CPUList) string {
	if l == nil || l.Count == 0 {
		return "unknown"
	}
	s := fmt.Sprintf("%s (%d %s", l.List, l.Count, plural(l.Count, "CPU"))
	if l.Source != "" {
		s += ", " + l.Source
	}
	return s + ")"
}

func plural(n int, word string) string {
	if n == 1 {
		return word
	}
	return word + "s"
}

// table aligns rows into columns two spaces apart, trailing blanks cut.
func table(rows [][]string) []string {
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	for _, r := range rows {
		fmt.Fprintln(tw, strings.Join(r, "\t"))
	}
	tw.Flush()
	lines := strings.Split(strings.TrimRight(b.String(), "\n"), "\n")
	for i := range lines {
		lines[i] = strings.TrimRight(lines[i], " ")
	}
	return lines
}

// wrap breaks text into lines of at most width characters at spaces (a
// longer word stays whole).
func wrap(text string, width int) []string {
	var lines []string
	cur := ""
	for _, w := range strings.Fields(text) {
		switch {
		case cur == "":
			cur = w
		case len(cur)+1+len(w) > width:
			lines = append(lines, cur)
			cur = w
		default:
			cur += " " + w
		}
	}
	return append(lines, cur)
}
