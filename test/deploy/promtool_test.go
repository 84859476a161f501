package deploy

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/model"

	"github.com/cfsprobe/cfsprobe/internal/testenv"
)

// promtoolTestsDir holds promtool's unit tests of rules.yaml: one file per
// alert, named after it, and recordTests for the recording rules.
const (
	promtoolTestsDir = "deploy/prometheus/tests"
	recordTests      = "recording-rules.yaml"
)

// promtoolTests mirrors promtool's unit test file (promtool test rules).
type promtoolTests struct {
	RuleFiles          []string           `json:"rule_files"`
	EvaluationInterval string             `json:"evaluation_interval,omitempty"`
	GroupEvalOrder     []string           `json:"group_eval_order,omitempty"`
	Tests              []promtoolTestCase `json:"tests"`
}

type promtoolTestCase struct {
	Name        string `json:"name"`
	Interval    string `json:"interval,omitempty"`
	InputSeries []struct {
		Series string `json:"series"`
		Values string `json:"values"`
	} `json:"input_series"`
	AlertRuleTests []struct {
		EvalTime  string `json:"eval_time"`
		Alertname string `json:"alertname"`
		ExpAlerts []struct {
			ExpLabels      map[string]string `json:"exp_labels"`
			ExpAnnotations map[string]string `json:"exp_annotations"`
		} `json:"exp_alerts"`
	} `json:"alert_rule_test,omitempty"`
	PromqlExprTests []struct {
		Expr       string `json:"expr"`
		EvalTime   string `json:"eval_time"`
		ExpSamples []struct {
			Labels string  `json:"labels"`
			Value  float64 `json:"value"`
		} `json:"exp_samples"`
	} `json:"promql_expr_test,omitempty"`
	ExternalLabels map[string]string `json:"external_labels,omitempty"`
	ExternalURL    string            `json:"external_url,omitempty"`
}

// needTool returns the path of an installed program, or skips the test
// (fails it under CFSPROBE_REQUIRE_CGROUPS=1: make deps installs it).
func needTool(t *testing.T, name, pkg string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		if testenv.Required() {
			t.Fatalf("%s=1 but %s is not installed (apt-get install %s, or make deps)", testenv.RequireEnv, name, pkg)
		}
		t.Skipf("%s is not installed (apt-get install %s); set %s=1 to make this a failure", name, pkg, testenv.RequireEnv)
	}
	return p
}

// Every alert of rules.yaml has promtool unit tests in which it fires and
// in which it stays quiet although its for: has passed, every recording
// rule one of its values, and promtool runs them (and checks the rule
// file) without a failure.
func TestPromtoolRules(t *testing.T) {
	promtool := needTool(t, "promtool", "prometheus")
	rf := loadRules(t)
	forOf := map[string]time.Duration{}
	records := map[string]int{} // record -> expression tests of it
	for _, g := range rf.Groups {
		for _, r := range g.Rules {
			if r.Record != "" {
				records[r.Record] = 0
				continue
			}
			d, err := model.ParseDuration(r.For)
			if err != nil {
				t.Fatalf("%s: %s: for: %v", rulesFile, r.Alert, err)
			}
			forOf[r.Alert] = time.Duration(d)
		}
	}

	files, err := filepath.Glob(filepath.Join(repoPath(promtoolTestsDir), "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("%s: no unit tests (*.yaml): %v", promtoolTestsDir, err)
	}
	fires := map[string]int{} // cases in which the alert fires
	quiet := map[string]int{} // cases past its for: in which it does not
	var rel []string
	for _, f := range files {
		name := filepath.ToSlash(filepath.Join(promtoolTestsDir, filepath.Base(f)))
		rel = append(rel, name)
		var pt promtoolTests
		decodeOneDoc(t, name, &pt)
		// The tests run against the file users load, not a copy.
		if !slices.Equal(pt.RuleFiles, []string{"../rules.yaml"}) {
			t.Errorf("%s: rule_files %v, want [../rules.yaml]", name, pt.RuleFiles)
		}
		if filepath.Base(f) == recordTests {
			for _, tc := range pt.Tests {
				if len(tc.AlertRuleTests) > 0 {
					t.Errorf("%s: test %q tests alerts; they have files of their own", name, tc.Name)
				}
				for _, et := range tc.PromqlExprTests {
					if _, ok := records[et.Expr]; ok && len(et.ExpSamples) > 0 {
						records[et.Expr]++
					}
				}
			}
			continue
		}
		alert := strings.TrimSuffix(filepath.Base(f), ".yaml")
		if _, ok := forOf[alert]; !ok {
			t.Errorf("%s: named after no alert of %s (nor %s)", name, rulesFile, recordTests)
		}
		for _, tc := range pt.Tests {
			for _, at := range tc.AlertRuleTests {
				where := fmt.Sprintf("%s: test %q at %s", name, tc.Name, at.EvalTime)
				if at.Alertname != alert {
					t.Errorf("%s: tests %s; this file is %s's", where, at.Alertname, alert)
					continue
				}
				d, err := model.ParseDuration(at.EvalTime)
				if err != nil {
					t.Errorf("%s: eval_time: %v", where, err)
					continue
				}
				if len(at.ExpAlerts) > 0 {
					fires[alert]++
				} else if time.Duration(d) > forOf[alert] {
					quiet[alert]++
				}
			}
		}
	}
	for alert, d := range forOf {
		if fires[alert] == 0 {
			t.Errorf("%s: no unit test in %s/%s.yaml in which %s fires", rulesFile, promtoolTestsDir, alert, alert)
		}
		if quiet[alert] == 0 {
			t.Errorf("%s: no unit test in %s/%s.yaml in which %s stays quiet after its for: (%v)", rulesFile, promtoolTestsDir, alert, alert, d)
		}
	}

	for record, n := range records {
		if n == 0 {
			t.Errorf("%s: no promql_expr_test in %s/%s with samples of %s", rulesFile, promtoolTestsDir, recordTests, record)
		}
	}

	check := exec.Command(promtool, "check", "rules", rulesFile)
	check.Dir = root
	if out, err := check.CombinedOutput(); err != nil {
		t.Errorf("promtool check rules: %v\n%s", err, out)
	}
	run := exec.Command(promtool, append([]string{"test", "rules"}, rel...)...)
	run.Dir = root
	out, err := run.CombinedOutput()
	if err != nil {
		t.Fatalf("promtool test rules %s: %v\n%s", strings.Join(rel, " "), err, out)
	}
	if n := strings.Count(string(out), "SUCCESS"); n != len(rel) {
		t.Errorf("promtool test rules: %d of %d files report SUCCESS:\n%s", n, len(rel), out)
	}
	t.Logf("promtool test rules: %d files, %d alerts (%d cases firing, %d quiet after for:), %d recording rules (%d expression tests)",
		len(rel), len(forOf), sum(fires), sum(quiet), len(records), sum(records))
}

func sum(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}
