package deploy

// Prometheus as the stack test starts it (testenv.StartDaemon: stopped by
// its PID when the test ends, also when it fails), with a time-compressed
// copy of rules.yaml, and the calls of its API the test makes.

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/api"
	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/promql/parser"
	"sigs.k8s.io/yaml"

	"github.com/cfsprobe/cfsprobe/internal/testenv"
)

// The stack test compresses time: Prometheus scrapes and evaluates every
// promInterval, every alert of its copy of rules.yaml waits promFor, and
// every range of the rules' expressions is rangeScale times shorter (5m
// becomes 10s, 10m 20s), so that a rate covers as many scrapes as in
// production, relative to how long the series have existed.
const (
	promInterval = "1s"
	promFor      = "5s"
	rangeScale   = 30
)

// shortRules is rules.yaml with every alert's for: set to promFor, and
// every range of its expressions and every group's own interval divided
// by rangeScale (the recommender's group, evaluated every minute, would
// otherwise have its first evaluation after the test's checks); the
// thresholds, joins, labels and annotations are the file's.
func shortRules(t *testing.T) []byte {
	t.Helper()
	rf := loadRules(t)
	for gi := range rf.Groups {
		g := &rf.Groups[gi]
		if g.Interval != "" {
			d, err := model.ParseDuration(g.Interval)
			if err != nil {
				t.Fatalf("%s: group %s: interval: %v", rulesFile, g.Name, err)
			}
			g.Interval = (time.Duration(d) / rangeScale).String()
		}
		for i := range g.Rules {
			r := &g.Rules[i]
			if r.Alert != "" {
				r.For = promFor
			}
			e, err := promql(r.Expr)
			if err != nil {
				t.Fatalf("%s: %s: %v", rulesFile, r.Alert+r.Record, err)
			}
			parser.Inspect(e, func(n parser.Node, _ []parser.Node) error {
				if ms, ok := n.(*parser.MatrixSelector); ok {
					ms.Range /= rangeScale
				}
				return nil
			})
			r.Expr = e.String()
		}
	}
	b, err := yaml.Marshal(rf)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// prometheus is a Prometheus server a test started.
type prometheus struct {
	*testenv.Daemon
	api promv1.API
}

// Jobs of the stack test's Prometheus besides exporterJob: they scrape
// the same exporter without credentials and without TLS, and must fail.
const (
	noCredentialsJob = "cfsprobe-exporter-no-credentials"
	plainHTTPJob     = "cfsprobe-exporter-plain-http"
)

// startPrometheus starts Prometheus on a free loopback port with its
// storage in a temporary directory, scraping the exporter at exporterAddr
// over TLS with basic auth as web's user (trusting web's CA) as job
// cfsprobe-exporter (labelled with this host's name as node, as
// exporter-servicemonitor.yaml's relabeling does) every promInterval, and
// evaluating rules (a rule file's contents) as often. It also scrapes the
// exporter as noCredentialsJob (TLS, no basic auth) and plainHTTPJob.
func startPrometheus(t *testing.T, bin, exporterAddr string, web testenv.WebTLS, rules []byte) *prometheus {
	t.Helper()
	dir := t.TempDir()
	host, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	targets := []any{map[string]any{
		"targets": []string{exporterAddr},
		"labels":  map[string]string{"node": host},
	}}
	tlsConfig := map[string]any{"ca_file": web.CAFile}
	cfg := map[string]any{
		"global": map[string]any{
			"scrape_interval":     promInterval,
			"scrape_timeout":      promInterval,
			"evaluation_interval": promInterval,
		},
		"rule_files": []string{"rules.yaml"},
		"scrape_configs": []any{
			map[string]any{
				"job_name":       exporterJob,
				"scheme":         "https",
				"tls_config":     tlsConfig,
				"basic_auth":     map[string]any{"username": web.User, "password": web.Password},
				"static_configs": targets,
			},
			map[string]any{"job_name": noCredentialsJob, "scheme": "https", "tls_config": tlsConfig, "static_configs": targets},
			map[string]any{"job_name": plainHTTPJob, "scheme": "http", "static_configs": targets},
		},
	}
	b, err := yaml.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string][]byte{"prometheus.yml": b, "rules.yaml": rules} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	addr := testenv.FreeAddr(t)
	d := testenv.StartDaemon(t, "prometheus", exec.Command(bin,
		"--config.file="+filepath.Join(dir, "prometheus.yml"),
		"--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+addr,
		"--log.level=warn"))
	u := "http://" + addr
	d.WaitReady(t, u+"/-/ready", 60*time.Second)
	c, err := api.NewClient(api.Config{Address: u})
	if err != nil {
		t.Fatal(err)
	}
	return &prometheus{Daemon: d, api: promv1.NewAPI(c)}
}

// callTimeout bounds one call of Prometheus' API.
const callTimeout = 10 * time.Second

func (p *prometheus) alerts() ([]promv1.Alert, error) {
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	r, err := p.api.Alerts(ctx)
	return r.Alerts, err
}

// query evaluates expr now and returns the samples of its instant vector
// (a scalar becomes one sample without labels).
func (p *prometheus) query(expr string) (model.Vector, error) {
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	v, _, err := p.api.Query(ctx, expr, time.Now())
	if err != nil {
		return nil, fmt.Errorf("query %s: %w", oneLine(expr), err)
	}
	switch v := v.(type) {
	case model.Vector:
		return v, nil
	case *model.Scalar:
		return model.Vector{{Value: v.Value, Timestamp: v.Timestamp}}, nil
	}
	return nil, fmt.Errorf("query %s: a %s, want an instant vector", oneLine(expr), v.Type())
}

// labelValues is what Grafana's label_values(match, label) lists over the
// last hour.
func (p *prometheus) labelValues(label, match string) (model.LabelValues, error) {
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	v, _, err := p.api.LabelValues(ctx, label, []string{match}, time.Now().Add(-time.Hour), time.Now())
	return v, err
}

func (p *prometheus) rules() (promv1.RulesResult, error) {
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	return p.api.Rules(ctx, nil)
}

// oneLine shortens an expression for messages.
func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

func (p *prometheus) targets() (promv1.TargetsResult, error) {
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	return p.api.Targets(ctx)
}
