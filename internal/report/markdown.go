package report

import (
	"bytes"
	"fmt"
	"io"
	"strings"
	"unicode"
)

// Markdown writes the runs as GitHub markdown: a title, what the runs
// share (host, date), the comparison table, and each run's key numbers.
// The output depends only on the runs and the title.
func Markdown(w io.Writer, title string, runs []Named) error {
	if len(runs) == 0 {
		return fmt.Errorf("report: no runs")
	}
	rs, c := rows(runs), commonOf(runs)
	if title == "" {
		title = defaultTitle(c, runs)
	}
	anyScen := false
	for _, r := range runs {
		anyScen = anyScen || r.Trace.Scenario != nil
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "# %s\n\n", mdText(title))
	if c.Recorded != "" || c.Tool != "" {
		b.WriteString("Recorded")
		if c.Recorded != "" {
			b.WriteString(" " + c.Recorded)
		}
		if c.Tool != "" {
			b.WriteString(" by " + mdText(c.Tool))
		}
		b.WriteString(".")
		if c.Host != "" {
			b.WriteString(" Host " + mdText(c.Host) + ".")
		}
		b.WriteString("\n\n")
	} else if c.Host != "" {
		fmt.Fprintf(&b, "Host %s.\n\n", mdText(c.Host))
	}

	head := []string{"run", "limit", "CPU used", "throttled", "throttled time", "of wall time", "p50", "p99", "p99.9", "max"}
	align := []string{":--", "--:", "--:", "--:", "--:", "--:", "--:", "--:", "--:", "--:"}
	if anyScen {
		head[0] = "scenario"
		head = append(head, "expectations", "verdict")
		align = append(align, ":--", ":--")
	}
	mdRow(&b, head)
	mdRow(&b, align)
	for _, r := range rs {
		throttled := "-"
		if r.Limited {
			throttled = fmt.Sprintf("%s (%s)", r.Throttled, r.ThrottledPct)
		}
		cells := []string{mdText(r.Name), r.Limit, r.CPUUsed, throttled, r.ThrottledTime, r.WallShare, r.P50, r.P99, r.P999, r.Max}
		if anyScen {
			var es []string
			for _, e := range r.Expectations {
				es = append(es, fmt.Sprintf("%s %s (%s)", checkMark(e.OK), mdText(e.Text), e.Value))
			}
			cells = append(cells, strings.Join(es, "<br>"), verdictText(r.Verdict))
		}
		mdRow(&b, cells)
	}
	if len(rs) > 0 {
		b.WriteString("\nThrottled time is the kernel's, summed over CPUs: it can exceed the wall time.\n")
	}
	for _, r := range rs {
		fmt.Fprintf(&b, "\n## %s\n\n", mdText(r.Name))
		if r.Desc != "" {
			fmt.Fprintf(&b, "%s\n\n", mdText(r.Desc))
		}
		fmt.Fprintf(&b, "- workload: `%s`\n", strings.ReplaceAll(r.Workload, "`", "'"))
		fmt.Fprintf(&b, "- limits: %s\n", mdText(r.Limits))
		if c.Host == "" {
			fmt.Fprintf(&b, "- host: %s\n", mdText(r.Host))
		}
		use := fmt.Sprintf("- wall time %s, CPU used %s (%s", r.Wall, r.Usage, r.CPUUsed)
		if r.QuotaShare != "" {
			use += ", " + r.QuotaShare
		}
		b.WriteString(use + ")\n")
		if r.Limited {
			fmt.Fprintf(&b, "- throttled %s periods (%s), throttled time %s (%s of the wall time)\n", r.Throttled, r.ThrottledPct, r.ThrottledTime, r.WallShare)
		} else {
			b.WriteString("- no quota: never throttled\n")
		}
		if r.Ops != "-" {
			fmt.Fprintf(&b, "- %s %s operations: p50 %s, p90 %s, p99 %s, p99.9 %s, max %s\n", r.Ops, r.Op, r.P50, r.P90, r.P99, r.P999, r.Max)
		}
		for _, e := range r.Expectations {
			fmt.Fprintf(&b, "- %s %s (measured %s)\n", checkMark(e.OK), mdText(e.Text), e.Value)
		}
		if r.Verdict != "" {
			fmt.Fprintf(&b, "- verdict: %s\n", verdictText(r.Verdict))
		}
		for _, f := range r.FailedChecks {
			fmt.Fprintf(&b, "- **check failed:** %s\n", mdText(f))
		}
	}
	_, err := w.Write(b.Bytes())
	return err
}

func mdRow(b *bytes.Buffer, cells []string) {
	b.WriteString("|")
	for _, c := range cells {
		b.WriteString(" " + mdCell(c) + " |")
	}
	b.WriteString("\n")
}

// mdCell keeps a table cell in its cell.
func mdCell(s string) string {
	s = strings.ReplaceAll(s, "|", `\|`)
	return strings.ReplaceAll(s, "\n", " ")
}

// mdText escapes what would start markup in running text: backslashes,
// emphasis, code, links, and < before what could be an HTML tag. An
// underscore inside a word (cpu_ratio) is left alone: it starts nothing.
func mdText(s string) string {
	rs := []rune(s)
	var b strings.Builder
	word := func(i int) bool {
		return i >= 0 && i < len(rs) && (unicode.IsLetter(rs[i]) || unicode.IsDigit(rs[i]))
	}
	for i, r := range rs {
		switch {
		case strings.ContainsRune("\\*`[]", r):
			b.WriteByte('\\')
		case r == '_' && !(word(i-1) && word(i+1)):
			b.WriteByte('\\')
		case r == '<' && i+1 < len(rs) && (unicode.IsLetter(rs[i+1]) || strings.ContainsRune("/!?", rs[i+1])):
			b.WriteString("&lt;")
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

func checkMark(ok bool) string {
	if ok {
		return "✓"
	}
	return "✗"
}

func verdictText(v string) string {
	switch v {
	case "pass":
		return "✓ pass"
	case "fail":
		return "✗ **fail**"
	}
	return v
}
