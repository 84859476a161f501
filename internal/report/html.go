package report

import (
	"bytes"
	_ "embed"
	"fmt"
	"html/template"
	"io"
	"strconv"
	"strings"
)

// The page's template, style and script are compiled in: a report is one
// file that needs nothing but a browser, also without a network.
var (
	//go:embed assets/report.html.tmpl
	pageTemplate string
	//go:embed assets/report.css
	pageCSS string
	//go:embed assets/report.js
	pageJS string
)

var pageTmpl = template.Must(template.New("page").Funcs(template.FuncMap{
	"f": svgNum,
}).Parse(pageTemplate))

// svgNum formats a coordinate: one decimal, no trailing zeros.
func svgNum(v float64) string {
	s := strconv.FormatFloat(v, 'f', 1, 64)
	s = strings.TrimSuffix(s, ".0")
	if s == "-0" {
		s = "0"
	}
	return s
}

// htmlPage is what the template sees.
type htmlPage struct {
	Title   string
	Common  common
	CSS     template.CSS
	JS      template.JS
	Compare *compareView
	Runs    []runView
}

type compareView struct {
	Heading  string // "scenario" or "run"
	Rows     []row
	Chart    *chart
	AnyScen  bool
	AnyLimit bool
}

type runView struct {
	row
	ShowHost bool // when the runs come from several hosts
	Timeline *chart
	Latency  *chart
	Profile  *chart
}

// HTML writes a report of the runs as one self-contained HTML page:
// inline style, charts as inline SVG, a few lines of script for tooltips,
// and no reference to anything outside the file. Several runs get a
// comparison (table and bars) above the runs; each run gets its key
// numbers, a per-period timeline, a latency histogram and, when the trace
// has throughput, its in-period profile. The output depends only on the
// runs and the title.
func HTML(w io.Writer, title string, runs []Named) error {
	if len(runs) == 0 {
		return fmt.Errorf("report: no runs")
	}
	rs := rows(runs)
	p := htmlPage{
		Title:  title,
		Common: commonOf(runs),
		CSS:    template.CSS(pageCSS),
		JS:     template.JS(pageJS),
	}
	if p.Title == "" {
		p.Title = defaultTitle(p.Common, runs)
	}
	if len(runs) > 1 || runs[0].Trace.Scenario != nil {
		cv := &compareView{Heading: "run", Rows: rs, Chart: compareChart("compare", runs, rs)}
		for _, r := range runs {
			cv.AnyScen = cv.AnyScen || r.Trace.Scenario != nil
			cv.AnyLimit = cv.AnyLimit || !r.Trace.Limits.Unlimited()
		}
		if cv.AnyScen {
			cv.Heading = "scenario"
		}
		p.Compare = cv
	}
	for i, r := range runs {
		v := runView{
			row:      rs[i],
			Timeline: timelineChart(rs[i].ID+"-timeline", r.Trace),
			Profile:  profileChart(rs[i].ID+"-profile", r.Trace),
		}
		v.Latency = latencyChart(rs[i].ID+"-latency", r.Trace, v.Profile == nil)
		if p.Common.Host == "" {
			v.ShowHost = true
		}
		p.Runs = append(p.Runs, v)
	}
	// Render into memory first: a template error leaves w untouched.
	var b bytes.Buffer
	if err := pageTmpl.Execute(&b, p); err != nil {
		return fmt.Errorf("report: %w", err)
	}
	_, err := w.Write(b.Bytes())
	return err
}

// defaultTitle names a report after its suite (c is commonOf(runs)), or
// its single run.
func defaultTitle(c common, runs []Named) string {
	switch {
	case c.Suite != "":
		return "cfsprobe suite " + c.Suite
	case len(runs) == 1:
		return "cfsprobe run " + runs[0].Name
	default:
		return fmt.Sprintf("cfsprobe: %d runs", len(runs))
	}
}
