package exporter

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/cfsprobe/cfsprobe/internal/golden"
	"github.com/cfsprobe/cfsprobe/internal/hostfs"
	"github.com/cfsprobe/cfsprobe/internal/monitor"
	"github.com/cfsprobe/cfsprobe/internal/trace"
)

// fixtures are monitor's fixture trees, each a node's cgroup root.
const fixtures = "../monitor/testdata"

func fixtureNames(t *testing.T) []string {
	t.Helper()
	ents, err := os.ReadDir(fixtures)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		if e.IsDir() {
			out = append(out, e.Name())
		}
	}
	if len(out) < 5 {
		t.Fatalf("only %d fixture trees in %s", len(out), fixtures)
	}
	return out
}

// fakePeriods hands out fixed histograms for the groups it is given: the
// sampler's figures without its clock.
type fakePeriods struct{ groups []monitor.GroupPeriods }

func (f *fakePeriods) Snapshot(dst []monitor.GroupPeriods) []monitor.GroupPeriods {
	return append(dst, f.groups...)
}
func (f *fakePeriods) Groups() int      { return len(f.groups) }
func (f *fakePeriods) Overruns() uint64 { return 3 }

// newFakePeriods makes histograms for every other limited group of the
// scanner whose usage can be read (the sampler follows no other): i
// periods at 0.2 (demand 0.1 CPUs), one at 0.95 throttled 80 ms on 2 CPUs
// (demand 1.9), one at 1.2 (demand 0.6).
func newFakePeriods(s *monitor.Scanner) *fakePeriods {
	ts, _ := s.Targets(nil)
	f := &fakePeriods{}
	for i, tg := range ts {
		if i%2 == 1 || tg.Limits.Unlimited() || tg.Group.UsageUnknown() != "" {
			continue
		}
		h := monitor.NewPeriodHistograms(UsageRatioBuckets, DemandBuckets, StallBuckets, StoppedBuckets)
		for j := 0; j < i; j++ {
			h.Usage.Observe(0.2)
			h.Demand.Observe(0.1)
		}
		h.Usage.Observe(0.95)
		h.Demand.Observe(1.9)
		h.Usage.Observe(1.2)
		h.Demand.Observe(0.6)
		for j := 0; j < i; j++ {
			h.Pairs.Observe(0.1)
		}
		h.Pairs.Observe(1.0)
		h.Pairs.Observe(1.25)
		h.Stall.Observe(0.08)
		h.Stopped.Observe(2)
		h.UnderQuota = uint64(i / 2)
		f.groups = append(f.groups, monitor.GroupPeriods{Path: tg.Group.Path, PeriodHistograms: h})
	}
	return f
}

// testHost is the node of a fixture tree: its kernel, CPUs and slice
// from the host fixture (6.1.0-test-amd64, 8 CPUs, 5 ms).
func testHost(r *monitor.Root) trace.Host { return r.HostFacts(hostfs.New("testdata/host")) }

// fixtureRegistry is a registry with cfsprobe's collector over a fixture
// tree, walked once, with fake sampler figures.
func fixtureRegistry(t *testing.T, name string, all bool) *Exporter {
	t.Helper()
	r, err := monitor.OpenRoot(filepath.Join(fixtures, name))
	if err != nil {
		t.Fatal(err)
	}
	e := newPedantic(Options{Root: r, All: all, Host: testHost(r), Version: "v0-test", GoVersion: "go-test", NoRuntimeMetrics: true})
	if err := e.Rescan(); err != nil {
		t.Fatal(err)
	}
	swapPeriods(e, newFakePeriods(e.scanner))
	t.Cleanup(e.scanner.Close)
	return e
}

// swapPeriods gives e a collector of the same scanner and info with
// per-period figures from p.
func swapPeriods(e *Exporter, p periodsSource) {
	e.reg.Unregister(e.collector)
	e.node.Unregister(e.collector.NodeCollector())
	e.collector = NewCollector(e.scanner, p, e.scanner.Errors(), e.collector.names, e.collector.info)
	e.reg.MustRegister(e.collector)
	e.node.MustRegister(e.collector.NodeCollector())
}

// newPedantic is New with a pedantic registry: every exporter of the
// tests gathers through one.
func newPedantic(opts Options) *Exporter {
	return newExporter(opts, prometheus.NewPedanticRegistry())
}

// lint gathers e's metrics, which the pedantic registry checks against
// their descriptions, and fails the test on an error or on anything
// promlint finds.
func lint(t testing.TB, e *Exporter) {
	t.Helper()
	if err := lintProblems(e.reg); err != nil {
		t.Error(err)
	}
}

// lintProblems gathers g and lints the families; nil if all is well.
func lintProblems(g prometheus.Gatherer) error {
	problems, err := testutil.GatherAndLint(g)
	if err != nil {
		return err
	}
	return problemsError(problems)
}

// problemsError lists promlint's problems; nil when there are none.
func problemsError(problems []promlint.Problem) error {
	if len(problems) == 0 {
		return nil
	}
	var b strings.Builder
	for _, p := range problems {
		fmt.Fprintf(&b, "\n%s: %s", p.Metric, p.Text)
	}
	return fmt.Errorf("promlint:%s", b.String())
}

// lintText fails the test on anything promlint finds in a text
// exposition, as Prometheus' promtool check metrics would.
func lintText(t testing.TB, text string) {
	t.Helper()
	problems, err := promlint.New(strings.NewReader(text)).Lint()
	if err == nil {
		err = problemsError(problems)
	}
	if err != nil {
		t.Error(err)
	}
}

// scrape gets /metrics from e as Prometheus does, after gathering and
// linting its metrics (lint), and returns the text and, for the text
// format (no accept), the families, after checking that it parses and
// linting it.
func scrape(t testing.TB, e *Exporter, accept string) (string, map[string]*dto.MetricFamily) {
	t.Helper()
	lint(t, e)
	req := httptest.NewRequest("GET", "/metrics", nil)
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	rec := httptest.NewRecorder()
	e.Handler().ServeHTTP(rec, req)
	if rec.Code != 200 {
		t.Fatalf("GET /metrics: %d %s", rec.Code, rec.Body)
	}
	body := rec.Body.String()
	if accept != "" {
		return body, nil
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(body))
	if err != nil {
		t.Fatalf("exposition does not parse: %v\n%s", err, body)
	}
	lintText(t, body)
	if a, b := cfsprobeLines(stable(body)), cfsprobeLines(stable(registryText(t, e))); a != b {
		t.Errorf("the text exposition differs from the registry's:\n%s", lineDiff(a, b))
	}
	return body, fams
}

// registryText is e's exposition as the registry gathers and expfmt
// writes it.
func registryText(t testing.TB, e *Exporter) string {
	t.Helper()
	mfs, err := e.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	enc := expfmt.NewEncoder(&b, Text)
	for _, mf := range mfs {
		if err := enc.Encode(mf); err != nil {
			t.Fatal(err)
		}
	}
	return b.String()
}

// cfsprobeLines is the lines of cfsprobe's own series (not the Go
// runtime's) of an exposition, sorted.
func cfsprobeLines(text string) string {
	var lines []string
	for _, l := range strings.Split(text, "\n") {
		if strings.HasPrefix(strings.TrimPrefix(strings.TrimPrefix(l, "# HELP "), "# TYPE "), "cfsprobe_") {
			lines = append(lines, l)
		}
	}
	slices.Sort(lines)
	return strings.Join(lines, "\n")
}

// lineDiff lists the lines of a not in b (-) and of b not in a (+), the
// first 20.
func lineDiff(a, b string) string {
	count := map[string]int{}
	for _, l := range strings.Split(a, "\n") {
		count[l]++
	}
	for _, l := range strings.Split(b, "\n") {
		count[l]--
	}
	var out []string
	for l, n := range count {
		switch {
		case n > 0:
			out = append(out, "- "+l)
		case n < 0:
			out = append(out, "+ "+l)
		}
	}
	slices.Sort(out)
	return strings.Join(out[:min(len(out), 20)], "\n")
}

// The lint helpers fail on what promlint and the pedantic registry
// reject: a counter without _total, a unit not in base units, a metric
// that does not match its description.
func TestLintCatches(t *testing.T) {
	bad := prometheus.NewPedanticRegistry()
	bad.MustRegister(prometheus.NewCounter(prometheus.CounterOpts{Name: "cfsprobe_scrapes", Help: "Scrapes."}))
	bad.MustRegister(prometheus.NewGauge(prometheus.GaugeOpts{Name: "cfsprobe_stall_milliseconds", Help: "Stall."}))
	err := lintProblems(bad)
	if err == nil || !strings.Contains(err.Error(), "cfsprobe_scrapes: counter metrics should have \"_total\" suffix") ||
		!strings.Contains(err.Error(), "cfsprobe_stall_milliseconds: use base unit \"seconds\" instead of \"milliseconds\"") {
		t.Errorf("lint of bad metrics: %v", err)
	}

	inconsistent := prometheus.NewPedanticRegistry()
	inconsistent.MustRegister(undescribed{prometheus.NewDesc("cfsprobe_a", "A.", nil, nil)})
	if err := lintProblems(inconsistent); err == nil || !strings.Contains(err.Error(), "cfsprobe_b") {
		t.Errorf("lint of a collector that sends an undescribed metric: %v", err)
	}
}

// undescribed describes one metric and collects another.
type undescribed struct{ d *prometheus.Desc }

func (u undescribed) Describe(ch chan<- *prometheus.Desc) { ch <- u.d }
func (u undescribed) Collect(ch chan<- prometheus.Metric) {
	ch <- prometheus.MustNewConstMetric(prometheus.NewDesc("cfsprobe_b", "B.", nil, nil), prometheus.GaugeValue, 1)
}

// volatile are the families whose values change from scrape to scrape.
var volatile = []string{"cfsprobe_scrape_duration_seconds"}

// stable drops the volatile families from an exposition.
func stable(text string) string {
	var b strings.Builder
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		drop := false
		for _, v := range volatile {
			if strings.HasPrefix(line, v) || strings.HasPrefix(line, "# HELP "+v+" ") || strings.HasPrefix(line, "# TYPE "+v+" ") {
				drop = true
			}
		}
		if !drop {
			b.WriteString(line + "\n")
		}
	}
	return b.String()
}

// The exposition of every fixture tree is fixed by a golden file
// (testdata/golden/<tree>.prom; go test -run TestGolden -update rewrites
// them), less cfsprobe_scrape_duration_seconds.
func TestGolden(t *testing.T) {
	for _, name := range fixtureNames(t) {
		t.Run(name, func(t *testing.T) {
			e := fixtureRegistry(t, name, false)
			text, fams := scrape(t, e, "")
			if _, ok := fams["cfsprobe_scrape_duration_seconds"]; !ok {
				t.Error("no cfsprobe_scrape_duration_seconds")
			}
			golden.Check(t, filepath.Join("testdata", "golden", name+".prom"), []byte(stable(text)))
		})
	}
}

// docMetric is a row of a metric table of docs/metrics.md.
type docMetric struct {
	typ    string
	labels []string
	help   string
}

var (
	docRowRE    = regexp.MustCompile("^\\| `(cfsprobe_[a-z0-9_]+)` \\| ([a-z]+) \\|([^|]*)\\| (.*) \\|$")
	docBucketRE = regexp.MustCompile("^\\| `(cfsprobe_[a-z0-9_]+)` \\| ([0-9., +Inf]+) \\|")
	docLabelRE  = regexp.MustCompile("`([a-z_]+)`")
)

// readDoc reads the metric and bucket tables of docs/metrics.md.
func readDoc(t *testing.T) (map[string]docMetric, map[string][]string) {
	t.Helper()
	b, err := os.ReadFile("../../docs/metrics.md")
	if err != nil {
		t.Fatal(err)
	}
	metrics, buckets := map[string]docMetric{}, map[string][]string{}
	for _, line := range strings.Split(string(b), "\n") {
		if m := docRowRE.FindStringSubmatch(line); m != nil {
			var labels []string
			for _, l := range docLabelRE.FindAllStringSubmatch(m[3], -1) {
				labels = append(labels, l[1])
			}
			metrics[m[1]] = docMetric{typ: m[2], labels: labels, help: m[4]}
			continue
		}
		if m := docBucketRE.FindStringSubmatch(line); m != nil {
			buckets[m[1]] = strings.Split(m[2], ", ")
		}
	}
	if len(metrics) < 20 || len(buckets) != 5 {
		t.Fatalf("docs/metrics.md: read %d metrics and %d bucket rows; has its table format changed?", len(metrics), len(buckets))
	}
	return metrics, buckets
}

// The exporter exposes exactly the metrics of docs/metrics.md: every one
// of them (on a tree whose kernel has burst, with sampler figures, and on
// one with groups whose usage is unknown), each with the documented type,
// labels, HELP text and buckets, and nothing else under cfsprobe_.
func TestMatchesMetricsDoc(t *testing.T) {
	doc, docBuckets := readDoc(t)
	e := fixtureRegistry(t, "k8s-systemd-v2-containerd", false)
	_, fams := scrape(t, e, "")
	_, unknown := scrape(t, fixtureRegistry(t, "cpu-only-v1-apart", false), "")
	for name, f := range unknown {
		if _, ok := fams[name]; !ok {
			fams[name] = f
		}
	}
	for name, d := range doc {
		f, ok := fams[name]
		if !ok {
			t.Errorf("%s: documented, not exposed", name)
			continue
		}
		if got := strings.ToLower(f.GetType().String()); got != d.typ {
			t.Errorf("%s: type %s, documented %s", name, got, d.typ)
		}
		if f.GetHelp() != d.help {
			t.Errorf("%s: HELP %q\ndocumented   %q", name, f.GetHelp(), d.help)
		}
		for _, m := range f.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, l.GetName())
			}
			slices.Sort(labels)
			want := slices.Sorted(slices.Values(d.labels))
			if !slices.Equal(labels, want) {
				t.Errorf("%s: labels %v, documented %v", name, labels, want)
				break
			}
			if h := m.GetHistogram(); h != nil {
				var got []string
				for _, b := range h.GetBucket() {
					got = append(got, model.SampleValue(b.GetUpperBound()).String())
				}
				if want := docBuckets[name]; !slices.Equal(got, want) {
					t.Errorf("%s: buckets %v, documented %v", name, got, want)
					break
				}
			}
		}
	}
	for name := range fams {
		if _, ok := doc[name]; !ok && strings.HasPrefix(name, "cfsprobe_") {
			t.Errorf("%s: exposed, not documented in docs/metrics.md", name)
		}
	}
}

// A kernel without CPU burst (a v1 tree without cpu.cfs_burst_us) has no
// burst series, not zeros; --all adds the unlimited groups' counters and
// info, without settings or per-period figures.
func TestBurstlessAndAll(t *testing.T) {
	e := fixtureRegistry(t, "k8s-cgroupfs-v1-docker", false)
	_, fams := scrape(t, e, "")
	for _, name := range []string{"cfsprobe_cpu_burst_limit_seconds", "cfsprobe_cpu_bursts_total", "cfsprobe_cpu_burst_seconds_total"} {
		if _, ok := fams[name]; ok {
			t.Errorf("%s exposed for a kernel without burst", name)
		}
	}
	limited := len(fams["cfsprobe_cgroup_info"].GetMetric())

	e = fixtureRegistry(t, "k8s-cgroupfs-v1-docker", true)
	_, fams = scrape(t, e, "")
	if n := len(fams["cfsprobe_cgroup_info"].GetMetric()); n <= limited || n != len(fams["cfsprobe_cpu_usage_seconds_total"].GetMetric()) {
		t.Errorf("--all: %d info series (%d without), %d usage series", n, limited, len(fams["cfsprobe_cpu_usage_seconds_total"].GetMetric()))
	}
	if n := len(fams["cfsprobe_cpu_quota_cpus"].GetMetric()); n != limited {
		t.Errorf("--all: %d quota series, want the %d limited groups'", n, limited)
	}
}

// Groups made in a cgroup v1 cpu hierarchy alone (monitor's fixture
// cpu-only-v1-apart) are reported with their settings and throttling,
// without usage or per-period series (with the real sampler), and with
// cfsprobe_cpu_usage_unknown saying why; --all adds the unlimited one.
func TestUsageUnknown(t *testing.T) {
	r, err := monitor.OpenRoot(filepath.Join(fixtures, "cpu-only-v1-apart"))
	if err != nil {
		t.Fatal(err)
	}
	for _, all := range []bool{false, true} {
		e := newPedantic(Options{Root: r, All: all, SamplerMaxGroups: 10, Host: testHost(r), Version: "v0-test", NoRuntimeMetrics: true})
		if err := e.Rescan(); err != nil {
			t.Fatal(err)
		}
		_, fams := scrape(t, e, "")
		e.scanner.Close()
		// The sampler's files close when it stops running: at once.
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		e.sampler.Run(ctx)
		series := func(name string) map[string]*dto.Metric {
			out := map[string]*dto.Metric{}
			for _, m := range fams[name].GetMetric() {
				for _, l := range m.GetLabel() {
					if l.GetName() == "cgroup" {
						out[l.GetValue()] = m
					}
				}
			}
			return out
		}
		unknown := []string{"/batch", "/batch/job-7", "/tenant/worker"}
		if all {
			unknown = []string{"/batch", "/batch/job-7", "/scratch", "/tenant/worker"}
		}
		const nginx = "/system.slice/nginx.service"
		got := series("cfsprobe_cpu_usage_unknown")
		if keys := slices.Sorted(maps.Keys(got)); !slices.Equal(keys, unknown) {
			t.Errorf("all=%v: cfsprobe_cpu_usage_unknown for %v, want %v", all, keys, unknown)
		}
		for _, g := range unknown {
			m := got[g]
			if m == nil {
				continue
			}
			if m.GetGauge().GetValue() != 1 || len(m.GetLabel()) != 2 || m.GetLabel()[1].GetName() != "reason" || m.GetLabel()[1].GetValue() != "no_cpuacct_group" {
				t.Errorf("%s: %v", g, m)
			}
			for _, name := range []string{"cfsprobe_cpu_usage_seconds_total", "cfsprobe_period_usage_ratio", "cfsprobe_stall_seconds", "cfsprobe_throttled_under_quota_periods_total"} {
				if _, ok := series(name)[g]; ok {
					t.Errorf("%s: %s exposed for a group whose usage is unknown", g, name)
				}
			}
			if _, ok := series("cfsprobe_cgroup_info")[g]; !ok {
				t.Errorf("%s: no info series", g)
			}
		}
		if m := series("cfsprobe_cpu_throttled_periods_total")["/batch"]; m.GetCounter().GetValue() != 150007 {
			t.Errorf("/batch throttled periods %v, want its cpu.stat's 150007", m)
		}
		if m := series("cfsprobe_cpu_throttled_seconds_total")["/batch/job-7"]; m.GetCounter().GetValue() != 6.39992 {
			t.Errorf("/batch/job-7 throttled seconds %v, want its cpu.stat's 6.39992", m)
		}
		if _, ok := got[nginx]; ok {
			t.Errorf("cfsprobe_cpu_usage_unknown for %s, whose usage is read", nginx)
		}
		for _, name := range []string{"cfsprobe_cpu_usage_seconds_total", "cfsprobe_period_usage_ratio", "cfsprobe_stall_seconds"} {
			if _, ok := series(name)[nginx]; !ok {
				t.Errorf("%s: no %s", nginx, name)
			}
		}
		if v := fams["cfsprobe_sampler_groups"].GetMetric()[0].GetGauge().GetValue(); v != 1 {
			t.Errorf("the sampler follows %v groups, want 1 (nginx)", v)
		}
	}
}

// /healthz answers while the process serves; /readyz once a walk
// succeeded and as long as the last one did; /metrics speaks OpenMetrics
// when asked.
func TestEndpoints(t *testing.T) {
	dir, r := fixtureCopy(t, "container-v2")
	e := newPedantic(Options{Root: r, Host: testHost(r), Version: "v0-test"})
	t.Cleanup(e.scanner.Close)
	h := e.Handler()
	get := func(path string) (int, string) {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
		return rec.Code, rec.Body.String()
	}
	if code, _ := get("/healthz"); code != 200 {
		t.Errorf("/healthz: %d", code)
	}
	if code, body := get("/readyz"); code != 503 || !strings.Contains(body, "not been walked") {
		t.Errorf("/readyz before a walk: %d %q, want 503 and why", code, body)
	}
	if err := e.Rescan(); err != nil {
		t.Fatal(err)
	}
	if code, _ := get("/readyz"); code != 200 {
		t.Errorf("/readyz after a walk: %d", code)
	}
	_, fams := scrape(t, e, "")
	for _, name := range []string{"process_cpu_seconds_total", "process_resident_memory_bytes", "go_goroutines"} {
		if _, ok := fams[name]; !ok {
			t.Errorf("%s not exposed", name)
		}
	}
	om, _ := scrape(t, e, "application/openmetrics-text; version=1.0.0")
	if !strings.HasSuffix(om, "# EOF\n") || !strings.Contains(om, "cfsprobe_cpu_throttled_periods_total{") {
		t.Errorf("OpenMetrics exposition without # EOF or counters:\n%.500s", om)
	}

	// The tree goes: the walk fails, /readyz says so, /metrics still serves.
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if err := e.Rescan(); err == nil {
		t.Fatal("Rescan of a removed root succeeded")
	}
	if code, body := get("/readyz"); code != 503 || !strings.Contains(body, dir) {
		t.Errorf("/readyz after a failed walk: %d %q, want 503 naming %s", code, body, dir)
	}
	scrape(t, e, "")
}

// /metrics is gzipped for clients that ask, as Prometheus does, and
// plain for others.
func TestGzip(t *testing.T) {
	e := fixtureRegistry(t, "k8s-systemd-v2-containerd", false)
	plain, _ := scrape(t, e, "")
	for _, tc := range []struct {
		accept string
		gzip   bool
	}{{"gzip", true}, {"zstd, gzip;q=0.5", true}, {"gzip;q=0", false}, {"identity", false}, {"", false}} {
		req := httptest.NewRequest("GET", "/metrics", nil)
		if tc.accept != "" {
			req.Header.Set("Accept-Encoding", tc.accept)
		}
		rec := httptest.NewRecorder()
		e.Handler().ServeHTTP(rec, req)
		body := rec.Body.Bytes()
		if got := rec.Header().Get("Content-Encoding") == "gzip"; got != tc.gzip {
			t.Errorf("Accept-Encoding %q: Content-Encoding %q", tc.accept, rec.Header().Get("Content-Encoding"))
			continue
		}
		if tc.gzip {
			zr, err := gzip.NewReader(bytes.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			if body, err = io.ReadAll(zr); err != nil {
				t.Fatal(err)
			}
		}
		if stable(string(body)) != stable(plain) {
			t.Errorf("Accept-Encoding %q: body differs from the plain scrape", tc.accept)
		}
	}
}

// /metrics is written as text to every client that takes text, at any
// preference (Prometheus's Accept headers do); the registry speaks to
// the others.
func TestAcceptsText(t *testing.T) {
	for _, tc := range []struct {
		accept string
		text   bool
	}{
		{"", true},
		{"*/*", true},
		{"text/plain;version=0.0.4", true},
		// Prometheus 2.x and 3.x.
		{"application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1", true},
		{"application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited;q=0.6,application/openmetrics-text;version=1.0.0;escaping=allow-utf-8;q=0.5,text/plain;version=1.0.0;escaping=allow-utf-8;q=0.3,*/*;q=0.2", true},
		{"application/openmetrics-text; version=1.0.0", false},
		{"application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited", false},
		{"text/plain;q=0, application/openmetrics-text", false},
		{"text/html", false},
	} {
		if got := acceptsText(tc.accept); got != tc.text {
			t.Errorf("acceptsText(%q) = %v, want %v", tc.accept, got, tc.text)
		}
	}
}

// fakeNamer names containers from a map and counts lookups by container
// ID (or pod UID).
type fakeNamer struct {
	byID    map[string]trace.Names
	lookups map[string]int
	errs    []error
}

func (f *fakeNamer) Errors() []error { return f.errs }

func (f *fakeNamer) Names(id monitor.Identity) (trace.Names, bool) {
	key := id.ContainerID
	if key == "" {
		key = id.PodUID
	}
	f.lookups[key]++
	n, ok := f.byID[key]
	return n, ok
}

// TestNames: the runtime's names go on cfsprobe_cgroup_info (and name
// the group), once they are known; a named group is not looked up again,
// and groups without a container or pod never are.
func TestNames(t *testing.T) {
	const docker = "38b69922967f745481f3d929d82c061c7297930ad37439a48b58b846857439ed"
	const k8s = "a5cfa21bca7c9d98bd05111275fda5dcd2c66b80ccc6491a4f4ee30a6e42d399"
	namer := &fakeNamer{byID: map[string]trace.Names{}, lookups: map[string]int{}}
	e := fixtureRegistry(t, "k8s-cgroupfs-v1-docker", false)
	e.collector.names = namer
	info := func() map[string]map[string]string {
		_, fams := scrape(t, e, "")
		out := map[string]map[string]string{}
		for _, m := range fams["cfsprobe_cgroup_info"].GetMetric() {
			l := map[string]string{}
			for _, p := range m.GetLabel() {
				l[p.GetName()] = p.GetValue()
			}
			out[l["container_id"]] = l
		}
		return out
	}
	if got := info()[docker]; got["name"] != "docker 38b69922967f" || got["container_name"] != "" {
		t.Errorf("before the runtime answered: %v", got)
	}
	namer.byID[docker] = trace.Names{ContainerName: "web", Image: "nginx:1.25"}
	namer.byID[k8s] = trace.Names{ContainerName: "app", Image: "api:2", PodNamespace: "shop", PodName: "api-7d9f"}
	var named int
	for i := range 3 {
		got := info()
		if i == 0 {
			named = namer.lookups[docker]
		}
		if d := got[docker]; d["name"] != "web (nginx:1.25)" || d["container_name"] != "web" || d["image"] != "nginx:1.25" || d["kind"] != "docker" {
			t.Errorf("the Docker container: %v", d)
		}
		if k := got[k8s]; k["name"] != "shop/api-7d9f/app" || k["pod_namespace"] != "shop" || k["pod_name"] != "api-7d9f" || k["container_name"] != "app" || k["pod_uid"] != "09eb5a25-f0ed-4dd0-a16b-6ea82f33edb4" {
			t.Errorf("the Kubernetes container: %v", k)
		}
	}
	if n := namer.lookups[docker]; n != named {
		t.Errorf("the Docker container was looked up %d times more after it was named", n-named)
	}
	if n := namer.lookups[""]; n != 0 {
		t.Errorf("%d lookups of groups without a container or pod", n)
	}
	lint(t, e)
}

// loggedExporter is an exporter of opts (with a test host and version, no
// runtime metrics) whose log goes to the buffer returned, and a function
// that walks its tree.
func loggedExporter(t *testing.T, opts Options) (*bytes.Buffer, func()) {
	t.Helper()
	var buf bytes.Buffer
	opts.Host, opts.Version, opts.GoVersion, opts.NoRuntimeMetrics = testHost(opts.Root), "v0-test", "go-test", true
	opts.Logger = slog.New(slog.NewTextHandler(&buf, nil))
	e := newPedantic(opts)
	t.Cleanup(e.scanner.Close)
	return &buf, func() {
		t.Helper()
		if err := e.Rescan(); err != nil {
			t.Fatal(err)
		}
	}
}

// A runtime that stops answering is logged once, and again when it
// answers; nothing is logged per scan meanwhile.
func TestNamesErrorsLogged(t *testing.T) {
	r, err := monitor.OpenRoot(filepath.Join(fixtures, "docker-v2"))
	if err != nil {
		t.Fatal(err)
	}
	namer := &fakeNamer{byID: map[string]trace.Names{}, lookups: map[string]int{}}
	buf, rescan := loggedExporter(t, Options{Root: r, Names: namer})
	rescan()
	namer.errs = []error{errors.New("docker unix:///var/run/docker.sock: connection refused")}
	rescan()
	rescan()
	namer.errs = nil
	rescan()
	rescan()
	log := buf.String()
	if n := strings.Count(log, "labelled by their cgroup paths only"); n != 1 || !strings.Contains(log, "connection refused") {
		t.Errorf("the runtime's failure was logged %d times, want once:\n%s", n, log)
	}
	if n := strings.Count(log, "every container runtime answers"); n != 1 {
		t.Errorf("the runtime's return was logged %d times, want once:\n%s", n, log)
	}
}

// fixtureCopy copies the fixture tree name to a directory the test may
// change, and opens it as a cgroup root.
func fixtureCopy(t *testing.T, name string) (string, *monitor.Root) {
	t.Helper()
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS(filepath.Join(fixtures, name))); err != nil {
		t.Fatal(err)
	}
	r, err := monitor.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	return dir, r
}

// More groups with a limit than the sampler may follow is logged once,
// and its end once.
func TestSamplerFullLogged(t *testing.T) {
	dir, r := fixtureCopy(t, "docker-v2")
	buf, rescan := loggedExporter(t, Options{Root: r, SamplerMaxGroups: 1})
	rescan()
	rescan()
	if n := strings.Count(buf.String(), "raise --sampler-max-groups"); n != 1 || !strings.Contains(buf.String(), "limited=2") {
		t.Errorf("two limited groups for a sampler of one were logged %d times, want once with limited=2:\n%s", n, buf.String())
	}
	// One of the two goes.
	if err := os.RemoveAll(filepath.Join(dir, "system.slice/docker-8ba8dcdbd62860b96080baec5954ecb41c72d847bec00fcd33a40f8dffb3e481.scope")); err != nil {
		t.Fatal(err)
	}
	rescan()
	rescan()
	if n := strings.Count(buf.String(), "follows every group with a CPU limit again"); n != 1 {
		t.Errorf("the end was logged %d times, want once:\n%s", n, buf.String())
	}
}
