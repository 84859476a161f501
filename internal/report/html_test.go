package report

import (
	"bytes"
	"encoding/xml"
	"io"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/cfsprobe/cfsprobe/internal/trace"
)

// node is a parsed element: enough of a DOM to count bars.
type node struct {
	Name     string
	Attr     map[string]string
	Children []*node
	Text     string
}

func (n *node) class(c string) bool {
	for _, f := range strings.Fields(n.Attr["class"]) {
		if f == c {
			return true
		}
	}
	return false
}

// all returns the descendants (and n itself) that match.
func (n *node) all(match func(*node) bool) []*node {
	var out []*node
	if match(n) {
		out = append(out, n)
	}
	for _, c := range n.Children {
		out = append(out, c.all(match)...)
	}
	return out
}

func elem(name string, classes ...string) func(*node) bool {
	return func(n *node) bool {
		if n.Name != name {
			return false
		}
		for _, c := range classes {
			if !n.class(c) {
				return false
			}
		}
		return true
	}
}

// parseXML parses a well-formed fragment strictly.
func parseXML(t *testing.T, s string) *node {
	t.Helper()
	d := xml.NewDecoder(strings.NewReader(s))
	root := &node{Name: "#root"}
	stack := []*node{root}
	for {
		tok, err := d.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("SVG is not well-formed XML: %v\n%.300s", err, s)
		}
		switch tk := tok.(type) {
		case xml.StartElement:
			n := &node{Name: tk.Name.Local, Attr: map[string]string{}}
			for _, a := range tk.Attr {
				n.Attr[a.Name.Local] = a.Value
			}
			top := stack[len(stack)-1]
			top.Children = append(top.Children, n)
			stack = append(stack, n)
		case xml.EndElement:
			stack = stack[:len(stack)-1]
		case xml.CharData:
			stack[len(stack)-1].Text += string(tk)
		}
	}
	return root
}

var svgRE = regexp.MustCompile(`(?s)<svg\b.*?</svg>`)

// svgs parses every inline SVG of a page, by id.
func svgs(t *testing.T, page string) map[string]*node {
	t.Helper()
	out := map[string]*node{}
	for _, frag := range svgRE.FindAllString(page, -1) {
		root := parseXML(t, frag)
		svg := root.Children[0]
		id := svg.Attr["id"]
		if id == "" || out[id] != nil {
			t.Fatalf("SVG without a unique id: %q", id)
		}
		if _, ok := svg.Attr["viewBox"]; !ok {
			t.Errorf("%s: no viewBox (the chart would not scale)", id)
		}
		out[id] = svg
	}
	return out
}

func renderHTML(t *testing.T, runs []Named) string {
	t.Helper()
	var b bytes.Buffer
	if err := HTML(&b, "", runs); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

func sumN(t *testing.T, bars []*node) int64 {
	t.Helper()
	var s int64
	for _, b := range bars {
		n, err := strconv.ParseInt(b.Attr["data-n"], 10, 64)
		if err != nil {
			t.Fatalf("bar without data-n: %v", b.Attr)
		}
		s += n
	}
	return s
}

// checkTimeline: every period is in exactly one bar (split bins count
// their throttled and unthrottled periods apart), the throttled ones are
// the warm bars, one bar per period unless binned, and the quota line is
// drawn for limited runs only.
func checkTimeline(t *testing.T, svg *node, tr *trace.Trace) {
	t.Helper()
	if svg == nil {
		t.Fatal("no timeline")
	}
	used := svg.all(elem("rect", "bar", "used"))
	hot := svg.all(elem("rect", "bar", "throttled"))
	stall := svg.all(elem("rect", "bar", "stall"))
	if got, want := sumN(t, used)+sumN(t, hot), int64(len(tr.Periods)); got != want {
		t.Errorf("timeline bars hold %d periods, the trace has %d", got, want)
	}
	if got, want := sumN(t, hot), tr.Summary.TimelineThrottled; got != want {
		t.Errorf("throttled bars hold %d periods, the timeline has %d throttled", got, want)
	}
	xs := map[string]bool{}
	for _, b := range append(used, hot...) {
		xs[b.Attr["x"]] = true
	}
	if len(tr.Periods) <= MaxTimelineBars {
		if len(xs) != len(tr.Periods) {
			t.Errorf("%d bar positions for %d periods", len(xs), len(tr.Periods))
		}
		var withStall int
		for _, p := range tr.Periods {
			if p.ThrottledNs > 0 {
				withStall++
			}
		}
		if len(stall) != withStall {
			t.Errorf("%d stall bars for %d periods with stall time", len(stall), withStall)
		}
	} else if len(xs) > MaxTimelineBars || len(xs) < MaxTimelineBars/2 {
		t.Errorf("%d periods binned into %d bars, want at most %d and not far fewer", len(tr.Periods), len(xs), MaxTimelineBars)
	}
	quota := svg.all(elem("g", "mark", "quota"))
	if tr.Limits.Unlimited() != (len(quota) == 0) {
		t.Errorf("unlimited %v, but %d quota lines", tr.Limits.Unlimited(), len(quota))
	}
	if len(quota) == 1 {
		want := "quota " + num(float64(tr.Limits.Cgroup().Quota)/1e6) + " ms"
		if txt := quota[0].all(elem("text")); len(txt) != 1 || txt[0].Text != want {
			t.Errorf("quota label: want %q", want)
		}
	}
	for _, b := range svg.all(elem("rect", "bar")) {
		for _, a := range []string{"x", "y", "width", "height"} {
			v, err := strconv.ParseFloat(b.Attr[a], 64)
			if err != nil || v < 0 && a != "x" || v > 960 {
				t.Fatalf("bar %s=%q out of the chart", a, b.Attr[a])
			}
		}
	}
}

// checkLatency: the bars hold every operation and all five percentiles
// are labelled.
func checkLatency(t *testing.T, svg *node, tr *trace.Trace) {
	t.Helper()
	if svg == nil {
		t.Fatal("no latency histogram")
	}
	if got := sumN(t, svg.all(elem("rect", "bar", "latency"))); got != tr.Latency.Count {
		t.Errorf("histogram holds %d operations, the trace %d", got, tr.Latency.Count)
	}
	var labels []string
	for _, m := range svg.all(elem("g", "mark", "pct")) {
		for _, txt := range m.all(elem("text")) {
			labels = append(labels, txt.Text)
		}
	}
	all := strings.Join(labels, " | ")
	for _, p := range []string{"p50 ", "p90", "p99 ", "p99.9", "max"} {
		if !strings.Contains(all+" ", p) && !strings.Contains(all, strings.TrimSpace(p)+" ·") {
			t.Errorf("percentile %q not labelled: %s", p, all)
		}
	}
	if !strings.Contains(all, dur(tr.Summary.LatencyNs.P999)) {
		t.Errorf("p99.9 value %s not in the labels: %s", dur(tr.Summary.LatencyNs.P999), all)
	}
}

func TestHTMLSuite(t *testing.T) {
	runs := loadDir(t, suiteDir)
	page := renderHTML(t, runs)
	charts := svgs(t, page)

	cmp := charts["compare"]
	if cmp == nil {
		t.Fatal("no comparison chart")
	}
	// CPU used for every run, throttled % for the limited ones, p99.9 for
	// every run with latencies.
	var want int
	for _, r := range runs {
		want += 2
		if !r.Trace.Limits.Unlimited() {
			want++
		}
	}
	if got := len(cmp.all(elem("rect", "bar"))); got != want {
		t.Errorf("comparison has %d bars, want %d", got, want)
	}
	if got := len(cmp.all(elem("rect", "bar", "throttled"))); got != 3 {
		t.Errorf("comparison has %d throttled bars, want 3", got)
	}
	var names []string
	for _, l := range cmp.all(elem("text", "row-label")) {
		names = append(names, l.Text)
	}
	if got := strings.Join(names, ","); got != "A-unlimited,B-cpus0.5,C-cpus0.1,D-cpus1" {
		t.Errorf("comparison rows %s", got)
	}

	for i, r := range runs {
		id := "run-" + strconv.Itoa(i+1)
		checkTimeline(t, charts[id+"-timeline"], r.Trace)
		checkLatency(t, charts[id+"-latency"], r.Trace)
		if charts[id+"-profile"] != nil {
			t.Errorf("%s: bursty runs have no throughput, but a profile is drawn", id)
		}
		if !strings.Contains(page, `id="`+id+`"`) {
			t.Errorf("no section %s", id)
		}
	}

	// The table: a row per scenario, expectations marked, verdicts.
	if n := strings.Count(page, `<td class="name"><a href="#run-`); n != len(runs) {
		t.Errorf("table has %d rows, want %d", n, len(runs))
	}
	if n := strings.Count(page, `<div class="bad">✗`); n != 1 {
		t.Errorf("%d failed expectations in the table, want 1 (D-cpus1's cpu_ratio)", n)
	}
	if n := strings.Count(page, `<div class="ok">✓`); n != 6 {
		t.Errorf("%d met expectations in the table, want 6", n)
	}
	if !strings.Contains(page, `<span class="verdict fail">✗ fail</span>`) {
		t.Error("no fail verdict")
	}
	// Said once: the host at the top, not per run.
	if n := strings.Count(page, "6.18.44-fc-v669"); n != 1 {
		t.Errorf("the host is shown %d times, want once", n)
	}
	noNetwork(t, page)
}

func TestHTMLRuns(t *testing.T) {
	runs := loadDir(t, runsDir)
	page := renderHTML(t, runs)
	charts := svgs(t, page)
	if charts["compare"] == nil {
		t.Error("several runs without a suite: no comparison")
	}
	if !strings.Contains(page, `<th class="name">run</th>`) {
		t.Error("runs without a scenario: the table is not labelled by run")
	}
	if strings.Contains(page, "expectations</th>") {
		t.Error("runs without a scenario: an expectations column")
	}
	for i, r := range runs {
		id := "run-" + strconv.Itoa(i+1)
		t.Run(r.Name, func(t *testing.T) {
			checkTimeline(t, charts[id+"-timeline"], r.Trace)
			if r.Trace.Latency == nil {
				if charts[id+"-latency"] != nil {
					t.Error("a latency histogram for a run without latencies")
				}
			} else {
				checkLatency(t, charts[id+"-latency"], r.Trace)
			}
			prof := charts[id+"-profile"]
			switch {
			case r.Trace.Throughput != nil && r.Trace.Limits.PeriodUs == 100000:
				// 100 ms period, 20 ms slots.
				if prof == nil {
					t.Fatal("no in-period profile")
				}
				if n := len(prof.all(elem("rect", "bar"))); n != 5 {
					t.Errorf("profile has %d bars, want 5", n)
				}
			case prof != nil:
				t.Errorf("profile drawn for a trace without one (period %dus)", r.Trace.Limits.PeriodUs)
			}
		})
	}
	noNetwork(t, page)
}

func TestHTMLSingleUnlimited(t *testing.T) {
	runs := loadFiles(t, filepath.Join(runsDir, "parallel-free.json"))
	page := renderHTML(t, runs)
	charts := svgs(t, page)
	if charts["compare"] != nil {
		t.Error("one run outside a suite: a comparison chart")
	}
	tl := charts["run-1-timeline"]
	checkTimeline(t, tl, runs[0].Trace)
	if len(tl.all(elem("rect", "bar", "throttled"))) != 0 || len(tl.all(elem("rect", "bar", "stall"))) != 0 {
		t.Error("an unlimited run drawn with throttling")
	}
	if !strings.Contains(page, "wall-clock windows") {
		t.Error("the unlimited timeline does not say what its bars are")
	}
	noNetwork(t, page)
}

var (
	srcHref  = regexp.MustCompile(`(?i)\b(src|href|action|poster|data)\s*=\s*["']?\s*([a-z][a-z0-9+.-]*:|//)`)
	external = regexp.MustCompile(`(?i)https?://|<link\b|@import|url\(`)
)

// noNetwork: a report refers to nothing outside itself: no src or href
// with a scheme (only #anchors), no link elements, imports or url() in
// the style, and no http(s) address at all (there are no xmlns
// attributes: inline SVG in HTML needs none).
func noNetwork(t *testing.T, page string) {
	t.Helper()
	if m := srcHref.FindString(page); m != "" {
		t.Errorf("reference out of the page: %q", m)
	}
	if m := external.FindString(page); m != "" {
		i := strings.Index(page, m)
		t.Errorf("external resource %q in %q", m, page[max(0, i-60):min(len(page), i+60)])
	}
	for _, s := range []string{"<!DOCTYPE html>", `<meta charset="utf-8">`, `<meta name="viewport"`} {
		if !strings.Contains(page, s) {
			t.Errorf("page lacks %s", s)
		}
	}
}

// Names and arguments come from files and command lines: they are
// escaped, in the page and in the SVG.
func TestHTMLEscapes(t *testing.T) {
	runs := loadFiles(t, filepath.Join(runsDir, "periodic-cpus0.2.json"), filepath.Join(runsDir, "parallel-cpus1.json"))
	runs[0].Name = `<script>alert("x")</script>`
	runs[1].Trace.Spec.Args = []string{`--x="<b>&`}
	page := renderHTML(t, runs)
	if strings.Contains(page, `<script>alert`) || strings.Contains(page, `<b>&`) {
		t.Error("unescaped name or argument in the page")
	}
	svgs(t, page) // still well-formed
}

func TestMdText(t *testing.T) {
	for in, want := range map[string]string{
		"cpu_ratio >= 0.5":   "cpu_ratio >= 0.5",
		"p99.9 <= 2 × A":     "p99.9 <= 2 × A",
		"_x_ *y* `z` [a](b)": "\\_x\\_ \\*y\\* \\`z\\` \\[a\\](b)",
		"<script>":           "&lt;script>",
	} {
		if got := mdText(in); got != want {
			t.Errorf("mdText(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestShellQuote(t *testing.T) {
	for in, want := range map[string]string{
		"--threads": "--threads", "50ms": "50ms", "": "''", "a b": "'a b'",
		"it's": `'it'\''s'`, "i=0; done": "'i=0; done'", "/usr/bin/x": "/usr/bin/x",
	} {
		if got := shellQuote(in); got != want {
			t.Errorf("shellQuote(%q) = %s, want %s", in, got, want)
		}
	}
}

// synthetic stretches a real trace's timeline to n periods (repeating its
// periods one after another), to draw 1 to tens of thousands of them.
func synthetic(t *testing.T, n int) *trace.Trace {
	t.Helper()
	tr := loadFiles(t, filepath.Join(runsDir, "parallel-cpus1.json"))[0].Trace
	src := tr.Periods
	periodNs := tr.Limits.PeriodUs * 1000
	var ps []trace.Period
	var throttled int64
	for i := 0; i < n; i++ {
		p := src[1+i%(len(src)-1)]
		p.StartNs, p.EndNs = int64(i)*periodNs, int64(i+1)*periodNs
		if p.Throttled {
			throttled++
		}
		ps = append(ps, p)
	}
	tr.Periods = ps
	tr.Summary.NrPeriods, tr.Summary.NrThrottled, tr.Summary.TimelineThrottled = int64(n), throttled, throttled
	return tr
}

func TestTimelineSizes(t *testing.T) {
	for _, n := range []int{1, 2, MaxTimelineBars, MaxTimelineBars + 1, 5000, 50000} {
		t.Run(strconv.Itoa(n), func(t *testing.T) {
			tr := synthetic(t, n)
			page := renderHTML(t, []Named{{Name: "x", Trace: tr}})
			checkTimeline(t, svgs(t, page)["run-1-timeline"], tr)
			if len(page) > 400_000 {
				t.Errorf("a report of %d periods is %d bytes", n, len(page))
			}
		})
	}
}

func TestBinPeriods(t *testing.T) {
	const p = 100
	ps := []trace.Period{
		{StartNs: -90, EndNs: 10, UsageNs: 5},
		{StartNs: -20, EndNs: 80, UsageNs: 7, Throttled: true, ThrottledNs: 3}, // overlaps the first
		{StartNs: 80, EndNs: 180, UsageNs: 9},
		{StartNs: 580, EndNs: 680, UsageNs: 11, Throttled: true, ThrottledNs: 4}, // after an idle gap
	}
	bins, per := binPeriods(ps, p, 10)
	if per != 1 || len(bins) != 4 {
		t.Fatalf("unbinned: %d bins of %d periods, want 4 of 1", len(bins), per)
	}
	if bins[1].start != -20 || bins[1].throttled != 1 || bins[1].stall != 3 {
		t.Errorf("the overlapping period lost its own bar: %+v", bins[1])
	}
	bins, per = binPeriods(ps, p, 3)
	if per != 3 {
		t.Fatalf("binned %d per bar, want 3 (8 period slots into at most 3 bars)", per)
	}
	var n, hot int
	var use, stall int64
	for _, b := range bins {
		n += b.periods
		hot += b.throttled
		use += b.usage
		stall += b.stall
		if b.end-b.start != 3*p {
			t.Errorf("bin %+v is not 3 periods wide", b)
		}
	}
	if n != 4 || hot != 2 || use != 32 || stall != 7 {
		t.Errorf("bins hold %d periods, %d throttled, usage %d, stall %d; want 4, 2, 32, 7", n, hot, use, stall)
	}
	if len(bins) != 2 {
		t.Errorf("%d bins, want 2 (the gap stays empty)", len(bins))
	}
}
