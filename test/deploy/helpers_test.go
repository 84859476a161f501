// Package deploy tests the files in deploy/ without a cluster: Kubernetes
// manifests are decoded strictly into the API types, every PromQL
// expression of the rules and the dashboard is parsed, and every metric
// they use must be documented in docs/metrics.md, so the three cannot
// drift apart. The rules and the dashboard also run: promtool's unit tests
// of every alert (deploy/prometheus/tests), and a real Prometheus scraping
// a real exporter while containers are throttled (TestPrometheusStack).
package deploy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/prometheus/promql/parser"
	"sigs.k8s.io/yaml"
)

// root is the repository's root, relative to this package.
const root = "../.."

func repoPath(p string) string { return filepath.Join(root, filepath.FromSlash(p)) }

func readFile(t *testing.T, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(repoPath(p))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// yamlDoc is one document of a multi-document YAML file.
type yamlDoc struct {
	File string
	Line int // 1-based line of the document's first line
	Text []byte
}

func (d yamlDoc) String() string { return fmt.Sprintf("%s:%d", d.File, d.Line) }

var docSep = regexp.MustCompile(`(?m)^---[ \t]*$`)

// splitYAML splits a file at its "---" lines and drops documents that hold
// only comments and blank lines.
func splitYAML(t *testing.T, p string) []yamlDoc {
	t.Helper()
	return splitDocs(p, readFile(t, p))
}

// splitDocs is splitYAML of b, named name.
func splitDocs(name string, b []byte) []yamlDoc {
	var docs []yamlDoc
	start, line := 0, 1
	add := func(end int) {
		text := b[start:end]
		if hasContent(text) {
			docs = append(docs, yamlDoc{File: name, Line: line, Text: text})
		}
	}
	for _, m := range docSep.FindAllIndex(b, -1) {
		add(m[0])
		line += bytes.Count(b[start:m[1]], []byte("\n"))
		start = m[1]
	}
	add(len(b))
	return docs
}

func hasContent(b []byte) bool {
	for _, l := range strings.Split(string(b), "\n") {
		l = strings.TrimSpace(l)
		if l != "" && !strings.HasPrefix(l, "#") {
			return true
		}
	}
	return false
}

// decodeStrict converts YAML to JSON (refusing duplicate keys) and decodes
// it into v, refusing fields v does not have: what the API server does
// with kubectl's strict field validation.
func decodeStrict(doc yamlDoc, v any) error {
	j, err := yaml.YAMLToJSONStrict(doc.Text)
	if err != nil {
		return fmt.Errorf("%s: %w", doc, err)
	}
	return decodeJSONStrict(j, v, doc.String())
}

// decodeOneDoc decodes the file p, which must hold one YAML document,
// strictly into v.
func decodeOneDoc(t *testing.T, p string, v any) {
	t.Helper()
	docs := splitYAML(t, p)
	if len(docs) != 1 {
		t.Fatalf("%s: want one YAML document, got %d", p, len(docs))
	}
	if err := decodeStrict(docs[0], v); err != nil {
		t.Fatal(err)
	}
}

func decodeJSONStrict(j []byte, v any, where string) error {
	dec := json.NewDecoder(bytes.NewReader(j))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("%s: %w", where, err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return fmt.Errorf("%s: data after the first value", where)
	}
	return nil
}

// promql parses an expression as a default Prometheus would.
func promql(expr string) (parser.Expr, error) {
	return parser.NewParser(parser.Options{}).ParseExpr(expr)
}

// selector is a metric named in an expression, with the labels it matches
// on.
type selector struct {
	Name   string
	Labels []string
}

// selectors lists the metrics an expression reads.
func selectors(e parser.Expr) []selector {
	var out []selector
	parser.Inspect(e, func(n parser.Node, _ []parser.Node) error {
		vs, ok := n.(*parser.VectorSelector)
		if !ok {
			return nil
		}
		s := selector{Name: vs.Name}
		for _, m := range vs.LabelMatchers {
			if m.Name == "__name__" {
				if s.Name == "" {
					s.Name = m.Value
				}
				continue
			}
			s.Labels = append(s.Labels, m.Name)
		}
		out = append(out, s)
		return nil
	})
	return out
}

// joinedLabels lists, for every "group_left (labels) metric{...}" (or
// group_right with the metric on the left) in an expression, the metric
// and the labels copied from it.
func joinedLabels(e parser.Expr) []selector {
	var out []selector
	parser.Inspect(e, func(n parser.Node, _ []parser.Node) error {
		be, ok := n.(*parser.BinaryExpr)
		if !ok || be.VectorMatching == nil || len(be.VectorMatching.Include) == 0 {
			return nil
		}
		one := be.RHS
		if be.VectorMatching.Card == parser.CardOneToMany {
			one = be.LHS
		}
		if vs, ok := unparen(one).(*parser.VectorSelector); ok {
			out = append(out, selector{Name: vs.Name, Labels: be.VectorMatching.Include})
		}
		return nil
	})
	return out
}

func unparen(e parser.Expr) parser.Expr {
	for {
		p, ok := e.(*parser.ParenExpr)
		if !ok {
			return e
		}
		e = p.Expr
	}
}

// documented is what docs/metrics.md's metric tables say.
type documented struct {
	Metrics map[string]docMetric // cfsprobe's own: counter, gauge, histogram
	Records map[string]docMetric // recording rules
	Extern  map[string]docMetric // metrics of other programs
	Buckets map[string][]string  // histogram -> its le values as written
	Text    string
}

type docMetric struct {
	Name, Type, Help string
	Labels           []string
	Line             int
	Section          string // the heading (## ...) it is documented under
}

// targetLabels are the labels Prometheus (and the Prometheus Operator, and
// exporter-servicemonitor.yaml's relabeling) put on every scraped series.
var targetLabels = []string{"job", "instance", "node", "namespace", "pod", "service", "endpoint", "container"}

const metricTableHeader = "| metric | type | labels | HELP |"

var backticked = regexp.MustCompile("`([^`]+)`")

// loadMetricsDoc parses every metric table (header metricTableHeader) and
// the bucket table of docs/metrics.md.
func loadMetricsDoc(t *testing.T) documented {
	t.Helper()
	text := string(readFile(t, "docs/metrics.md"))
	d := documented{
		Metrics: map[string]docMetric{}, Records: map[string]docMetric{}, Extern: map[string]docMetric{},
		Buckets: map[string][]string{}, Text: text,
	}
	lines := strings.Split(text, "\n")
	section := ""
	for i := 0; i < len(lines); i++ {
		if h, ok := strings.CutPrefix(lines[i], "## "); ok {
			section = strings.TrimSpace(h)
		}
		switch strings.TrimSpace(lines[i]) {
		case metricTableHeader:
			for i += 2; i < len(lines) && strings.HasPrefix(lines[i], "|"); i++ {
				cells := tableCells(lines[i])
				if len(cells) != 4 {
					t.Fatalf("docs/metrics.md:%d: want 4 cells, got %d: %s", i+1, len(cells), lines[i])
				}
				m := docMetric{Name: strings.Trim(cells[0], "`"), Type: cells[1], Help: cells[3], Line: i + 1, Section: section}
				if !strings.HasPrefix(cells[0], "`") {
					t.Fatalf("docs/metrics.md:%d: the metric name must be in backticks: %s", i+1, lines[i])
				}
				for _, l := range backticked.FindAllStringSubmatch(cells[2], -1) {
					m.Labels = append(m.Labels, l[1])
				}
				var into map[string]docMetric
				switch m.Type {
				case "counter", "gauge", "histogram":
					into = d.Metrics
				case "recording":
					into = d.Records
				case "external":
					into = d.Extern
				default:
					t.Fatalf("docs/metrics.md:%d: unknown type %q (counter, gauge, histogram, recording, external)", i+1, m.Type)
				}
				if _, dup := d.Metrics[m.Name]; dup {
					t.Errorf("docs/metrics.md:%d: %s documented twice", i+1, m.Name)
				}
				if _, dup := d.Records[m.Name]; dup {
					t.Errorf("docs/metrics.md:%d: %s documented twice", i+1, m.Name)
				}
				if _, dup := d.Extern[m.Name]; dup {
					t.Errorf("docs/metrics.md:%d: %s documented twice", i+1, m.Name)
				}
				into[m.Name] = m
			}
		case "| histogram | buckets | why |":
			for i += 2; i < len(lines) && strings.HasPrefix(lines[i], "|"); i++ {
				cells := tableCells(lines[i])
				name := strings.Trim(cells[0], "`")
				for _, b := range strings.Split(cells[1], ",") {
					d.Buckets[name] = append(d.Buckets[name], strings.TrimSpace(b))
				}
			}
		}
	}
	if len(d.Metrics) == 0 {
		t.Fatalf("docs/metrics.md: no metric table (a header line %q)", metricTableHeader)
	}
	return d
}

func tableCells(line string) []string {
	line = strings.TrimSpace(line)
	line = strings.TrimPrefix(line, "|")
	line = strings.TrimSuffix(line, "|")
	var cells []string
	for _, c := range strings.Split(line, "|") {
		cells = append(cells, strings.TrimSpace(c))
	}
	return cells
}

var histogramSuffixes = []string{"_bucket", "_sum", "_count"}

// lookup finds the documented metric a series name belongs to: a metric,
// one of a histogram's series, a recording rule or another program's
// metric.
func (d documented) lookup(name string) (docMetric, bool) {
	if m, ok := d.Metrics[name]; ok && m.Type != "histogram" {
		return m, true
	}
	for _, s := range histogramSuffixes {
		if base, ok := strings.CutSuffix(name, s); ok {
			if m, ok := d.Metrics[base]; ok && m.Type == "histogram" {
				if s == "_bucket" {
					m.Labels = append(slices.Clone(m.Labels), "le")
				}
				return m, true
			}
		}
	}
	if m, ok := d.Records[name]; ok {
		return m, true
	}
	m, ok := d.Extern[name]
	return m, ok
}

// checkExpr checks that every metric an expression reads is documented,
// and that the labels it matches on or copies from cfsprobe's metrics are
// theirs (or target labels).
func (d documented) checkExpr(t *testing.T, where string, e parser.Expr) {
	t.Helper()
	for _, s := range selectors(e) {
		m, ok := d.lookup(s.Name)
		if !ok {
			t.Errorf("%s: metric %q is not documented in docs/metrics.md", where, s.Name)
			continue
		}
		d.checkLabels(t, where, m, s.Name, s.Labels, "matches on")
	}
	for _, s := range joinedLabels(e) {
		if m, ok := d.lookup(s.Name); ok {
			d.checkLabels(t, where, m, s.Name, s.Labels, "copies")
		}
	}
}

func (d documented) checkLabels(t *testing.T, where string, m docMetric, name string, labels []string, verb string) {
	t.Helper()
	if m.Type == "external" || m.Type == "recording" {
		return // their labels are another program's, or follow from the rule
	}
	for _, l := range labels {
		if !slices.Contains(m.Labels, l) && !slices.Contains(targetLabels, l) {
			t.Errorf("%s: %s label %q of %s, which docs/metrics.md does not give it (labels: %v)", where, verb, l, name, m.Labels)
		}
	}
}
