package deploy

import (
	"bytes"
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"text/template"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/promql/parser"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cfsprobe/cfsprobe/internal/golden"
)

const (
	rulesFile     = "deploy/prometheus/rules.yaml"
	ruleCRFile    = "deploy/prometheus/prometheusrule.yaml"
	deployReadme  = "deploy/README.md"
	runbookPrefix = "https://github.com/cfsprobe/cfsprobe/blob/main/deploy/README.md#"
)

// ruleFile is a Prometheus rule file (rule_files:), with the fields of
// Prometheus' rulefmt.
type ruleFile struct {
	Groups []ruleGroup `json:"groups"`
}

// ruleGroup holds the fields rulefmt and the Prometheus Operator's
// RuleGroup have in common (monitoring.coreos.com/v1).
type ruleGroup struct {
	Name        string            `json:"name"`
	Interval    string            `json:"interval,omitempty"`
	QueryOffset string            `json:"query_offset,omitempty"`
	Limit       int               `json:"limit,omitempty"`
	Labels      map[string]string `json:"labels,omitempty"`
	Rules       []rule            `json:"rules"`
}

type rule struct {
	Record        string            `json:"record,omitempty"`
	Alert         string            `json:"alert,omitempty"`
	Expr          string            `json:"expr"`
	For           string            `json:"for,omitempty"`
	KeepFiringFor string            `json:"keep_firing_for,omitempty"`
	Labels        map[string]string `json:"labels,omitempty"`
	Annotations   map[string]string `json:"annotations,omitempty"`
}

// prometheusRule mirrors the PrometheusRule custom resource.
type prometheusRule struct {
	metav1.TypeMeta `json:",inline"`
	Metadata        metav1.ObjectMeta `json:"metadata"`
	Spec            struct {
		Groups []ruleGroup `json:"groups"`
	} `json:"spec"`
}

func loadRules(t *testing.T) ruleFile {
	t.Helper()
	var rf ruleFile
	decodeOneDoc(t, rulesFile, &rf)
	if len(rf.Groups) == 0 {
		t.Fatalf("%s: no groups", rulesFile)
	}
	return rf
}

// The PrometheusRule is rules.yaml's groups under spec:, textually (so
// comments carry over) and as decoded.
func TestPrometheusRuleMatchesRulesFile(t *testing.T) {
	plain := readFile(t, rulesFile)
	cr := readFile(t, ruleCRFile)
	i := bytes.Index(plain, []byte("\ngroups:\n"))
	j := bytes.Index(cr, []byte("\nspec:\n"))
	if i < 0 || j < 0 {
		t.Fatalf("want a top-level groups: in %s and spec: in %s", rulesFile, ruleCRFile)
	}
	var want bytes.Buffer
	want.Write(cr[:j+len("\nspec:\n")])
	for _, l := range strings.SplitAfter(string(plain[i+1:]), "\n") {
		if strings.TrimSpace(l) != "" {
			want.WriteString("  ")
		}
		want.WriteString(l)
	}
	golden.Check(t, repoPath(ruleCRFile), want.Bytes())

	var pr prometheusRule
	decodeOneDoc(t, ruleCRFile, &pr)
	if pr.APIVersion != "monitoring.coreos.com/v1" || pr.Kind != "PrometheusRule" {
		t.Errorf("%s: apiVersion/kind %s/%s, want monitoring.coreos.com/v1/PrometheusRule", ruleCRFile, pr.APIVersion, pr.Kind)
	}
	if pr.Metadata.Name == "" || pr.Metadata.Namespace != namespace {
		t.Errorf("%s: metadata name %q namespace %q, want a name in namespace %s", ruleCRFile, pr.Metadata.Name, pr.Metadata.Namespace, namespace)
	}
	if rf := loadRules(t); !reflect.DeepEqual(pr.Spec.Groups, rf.Groups) {
		t.Errorf("%s: spec.groups differ from %s's groups", ruleCRFile, rulesFile)
	}
}

var severities = []string{"critical", "warning", "info"}

// Every rule parses, alerts say how long, how bad, what and what to do, and
// every metric they read is documented.
func TestRules(t *testing.T) {
	rf := loadRules(t)
	doc := loadMetricsDoc(t)
	anchors := readmeAnchors(t)
	records := map[string]bool{}
	alerts := map[string]bool{}
	groups := map[string]bool{}
	for _, g := range rf.Groups {
		if g.Name == "" || groups[g.Name] {
			t.Errorf("%s: group name %q is empty or repeated", rulesFile, g.Name)
		}
		groups[g.Name] = true
		if g.Interval != "" {
			if _, err := model.ParseDuration(g.Interval); err != nil {
				t.Errorf("%s: group %s: interval: %v", rulesFile, g.Name, err)
			}
		}
		if len(g.Rules) == 0 {
			t.Errorf("%s: group %s has no rules", rulesFile, g.Name)
		}
		for _, r := range g.Rules {
			name := r.Record + r.Alert
			where := fmt.Sprintf("%s: group %s: %s", rulesFile, g.Name, name)
			if (r.Record == "") == (r.Alert == "") {
				t.Errorf("%s: a rule is a record or an alert, not both or neither", where)
				continue
			}
			e, err := promql(r.Expr)
			if err != nil {
				t.Errorf("%s: expr does not parse: %v\n%s", where, err, r.Expr)
				continue
			}
			if e.Type() != parser.ValueTypeVector {
				t.Errorf("%s: expr is a %s, want an instant vector", where, e.Type())
			}
			doc.checkExpr(t, where, e)
			if r.Record != "" {
				if records[r.Record] {
					t.Errorf("%s: recorded twice", where)
				}
				records[r.Record] = true
				if !recordNameRE.MatchString(r.Record) {
					t.Errorf("%s: a recording rule is named level:metric:operations", where)
				}
				if r.For != "" || len(r.Annotations) > 0 {
					t.Errorf("%s: a recording rule has no for: or annotations", where)
				}
				continue
			}
			if alerts[r.Alert] {
				t.Errorf("%s: alert defined twice", where)
			}
			alerts[r.Alert] = true
			checkAlert(t, where, r, anchors)
		}
	}
	// Recording rules and the doc's table of them are the same set.
	for name := range records {
		if _, ok := doc.Records[name]; !ok {
			t.Errorf("%s: recording rule %s is not in docs/metrics.md's recording-rule table", rulesFile, name)
		}
	}
	for name, m := range doc.Records {
		if !records[name] {
			t.Errorf("docs/metrics.md:%d: recording rule %s is not in %s", m.Line, name, rulesFile)
		}
	}
	// A selector of a recording rule's name reads a rule that exists.
	for _, g := range rf.Groups {
		for _, r := range g.Rules {
			e, err := promql(r.Expr)
			if err != nil {
				continue
			}
			for _, s := range selectors(e) {
				if strings.Contains(s.Name, ":") && !records[s.Name] {
					t.Errorf("%s: %s reads %s, which no rule records", rulesFile, r.Record+r.Alert, s.Name)
				}
			}
		}
	}
	// Every alert has its runbook section in deploy/README.md.
	if len(alerts) == 0 {
		t.Errorf("%s: no alerts", rulesFile)
	}
}

func checkAlert(t *testing.T, where string, r rule, anchors map[string]bool) {
	t.Helper()
	if r.For == "" {
		t.Errorf("%s: no for: (an alert on one evaluation pages on noise)", where)
	} else if d, err := model.ParseDuration(r.For); err != nil || d == 0 {
		t.Errorf("%s: for: %q is not a positive duration", where, r.For)
	}
	if !slices.Contains(severities, r.Labels["severity"]) {
		t.Errorf("%s: labels.severity %q, want one of %v", where, r.Labels["severity"], severities)
	}
	for _, a := range []string{"summary", "description", "runbook", "runbook_url"} {
		if strings.TrimSpace(r.Annotations[a]) == "" {
			t.Errorf("%s: no %s annotation", where, a)
		}
	}
	for _, a := range []string{"summary", "runbook", "runbook_url"} {
		if strings.Contains(strings.TrimSpace(r.Annotations[a]), "\n") {
			t.Errorf("%s: the %s annotation is one line", where, a)
		}
	}
	u := r.Annotations["runbook_url"]
	anchor, ok := strings.CutPrefix(u, runbookPrefix)
	switch {
	case !ok:
		t.Errorf("%s: runbook_url %q is not a section of %s (%s...)", where, u, deployReadme, runbookPrefix)
	case anchor != strings.ToLower(r.Alert):
		t.Errorf("%s: runbook_url points at #%s, want the alert's own section #%s", where, anchor, strings.ToLower(r.Alert))
	case !anchors[anchor]:
		t.Errorf("%s: %s has no section #%s (a heading %q)", where, deployReadme, anchor, r.Alert)
	}
	for k, v := range r.Annotations {
		if err := parseAlertTemplate(v); err != nil {
			t.Errorf("%s: annotation %s: %v", where, k, err)
		}
	}
}

// parseAlertTemplate parses an annotation as Prometheus does (text/template
// with its header and functions); it does not run it.
func parseAlertTemplate(text string) error {
	stub := func(...any) string { return "" }
	funcs := template.FuncMap{}
	for _, f := range []string{"humanize", "humanize1024", "humanizeDuration", "humanizePercentage",
		"humanizeTimestamp", "toUpper", "toLower", "title", "first", "label", "value", "query",
		"reReplaceAll", "match", "safeHtml", "graphLink", "tableLink", "externalURL", "pathPrefix",
		"strvalue", "sortByLabel", "args", "parseDuration", "toTime", "toDuration", "now", "urlQueryEscape"} {
		funcs[f] = stub
	}
	const header = "{{$labels := .Labels}}{{$externalLabels := .ExternalLabels}}{{$externalURL := .ExternalURL}}{{$value := .Value}}"
	_, err := template.New("annotation").Option("missingkey=zero").Funcs(funcs).Parse(header + text)
	return err
}

var headingRE = regexp.MustCompile(`(?m)^#{1,6}\s+(.+?)\s*$`)

// readmeAnchors lists the anchors GitHub makes for deploy/README.md's
// headings: lower case, spaces to dashes, punctuation dropped.
func readmeAnchors(t *testing.T) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	for _, m := range headingRE.FindAllStringSubmatch(string(readFile(t, deployReadme)), -1) {
		var b strings.Builder
		for _, r := range strings.ToLower(m[1]) {
			switch {
			case r == ' ':
				b.WriteRune('-')
			case r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9':
				b.WriteRune(r)
			}
		}
		out[b.String()] = true
	}
	return out
}
