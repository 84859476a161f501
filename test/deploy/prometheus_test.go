package deploy

// The deploy files against real components: a private dockerd runs seed
// 003's bursty workload (50 ms busy, 50 ms idle) in two containers of
// cfsprobe's image, one under --cpus 0.1 (seed 003's "aggressive" limit)
// and one under --cpus 1.0 (its "control"); cfsprobe's exporter, the binary
// in the image, watches the host's cgroups; Prometheus scrapes it every
// second and evaluates a time-compressed copy of rules.yaml (shortRules).

import (
	"fmt"
	"maps"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"

	"github.com/cfsprobe/cfsprobe/internal/testenv"
	"github.com/cfsprobe/cfsprobe/internal/testenv/dockerd"
)

// The containers of seed 003's runs C and D, by the names the docs use.
const (
	aggressiveName = "seed003-aggressive" // --cpus 0.1
	controlName    = "seed003-control"    // --cpus 1.0
)

// imageBinary is the cfsprobe the Makefile built for the image
// (dockerd's Image builds it).
func imageBinary(t *testing.T) string {
	t.Helper()
	p, err := filepath.Abs(repoPath("bin/cfsprobe"))
	if err == nil {
		_, err = os.Stat(p)
	}
	if err != nil {
		t.Fatalf("%v (make image builds it)", err)
	}
	return p
}

// container is one started with runBursty.
type container struct {
	name, id string
	cpus     string
	started  time.Time
}

// cgroup is the container's group as the exporter labels it (dockerd's
// cgroupfs driver on cgroup v1).
func (c container) cgroup() string { return "/docker/" + c.id }

// runBursty starts seed 003's workload in cfsprobe's image (its hidden
// entry point of the workloads, as test/docker runs it: one worker, 50 ms
// of CPU, then 50 ms idle, for 10 minutes; the daemon's teardown removes
// it) in a container limited to cpus.
func runBursty(t *testing.T, d *dockerd.Daemon, name, cpus string) container {
	t.Helper()
	out := d.Docker(t, "run", "-d", "--name", name, "--cpus", cpus, d.Image(t),
		"__workload", "bursty", "--on-cpu", "50ms", "--off", "50ms", "--duration", "600s")
	return container{name: name, id: strings.TrimSpace(out), cpus: cpus, started: time.Now()}
}

// alertsAbout lists the alerts (pending or firing) Prometheus has now about
// the group, and the others.
func alertsAbout(alerts []promv1.Alert, cgroup string) (about, others []promv1.Alert) {
	for _, a := range alerts {
		if string(a.Labels["cgroup"]) == cgroup {
			about = append(about, a)
		} else {
			others = append(others, a)
		}
	}
	return about, others
}

// exporterHealthAlerts are the alerts about the exporter itself.
var exporterHealthAlerts = []string{"CFSProbeExporterDown", "CFSProbeExporterReadErrors", "CFSProbeSamplerStarved", "CFSProbeSamplerCapped"}

// How long the stack test waits for the alert, and watches the control
// container at least (several times promFor and the scrapes a rate needs).
const (
	alertTimeout = 90 * time.Second
	controlWatch = 30 * time.Second
)

// TestPrometheusStack is issue 12's Must show 4 with real components, and
// issue 13's Must show 1: Prometheus scrapes the exporter over TLS with
// basic auth (checkScrapeSecurity), and with a
// throttled container running CFSProbeCPULimitTooLow fires (and
// CFSProbeLongThrottlingStalls), read from /api/v1/alerts, with the
// container's name; nothing fires about the well-sized one; every rule
// evaluates without error; deploy/README.md's seed 003 throttle-rate query
// returns each container by name; every query of the Grafana dashboard
// returns data; and when the exporter stops, CFSProbeExporterDown fires.
func TestPrometheusStack(t *testing.T) {
	promBin := needTool(t, "prometheus", "prometheus")
	testenv.NeedCgroups(t)
	begin := time.Now()
	d := dockerd.Start(t)
	d.Image(t)
	bin := imageBinary(t)
	web := testenv.NewWebTLS(t)
	exporter, expAddr := testenv.StartExporterTLS(t, bin, web, "--cgroup-root", "/sys/fs/cgroup", "--docker-host", d.Host())
	prom := startPrometheus(t, promBin, expAddr, web, shortRules(t))
	t.Logf("setup (dockerd, make image, exporter over TLS with basic auth, prometheus): %.1fs", time.Since(begin).Seconds())
	checkScrapeSecurity(t, prom)

	aggressive := runBursty(t, d, aggressiveName, "0.1")
	control := runBursty(t, d, controlName, "1.0")

	const alert = "CFSProbeCPULimitTooLow"
	w := watchAlerts(t, prom, alert, aggressive, control)
	for _, a := range w.others {
		t.Logf("other alert: %s %s value %s", a.State, a.Labels, a.Value)
		if slices.Contains(exporterHealthAlerts, string(a.Labels[model.AlertNameLabel])) && string(a.Labels["instance"]) == expAddr {
			t.Errorf("%s about the exporter: %s %s", a.Labels[model.AlertNameLabel], a.State, a.Labels)
		}
	}
	pendingAt, firingAt, fired := w.pendingAt, w.firingAt, w.fired
	if firingAt.IsZero() {
		t.Fatalf("%s (--cpus %s): %s did not fire within %v of its start (pending: %v)", aggressive.name, aggressive.cpus, alert, alertTimeout, !pendingAt.IsZero())
	}
	t.Logf("%s (--cpus %s): %s pending %.1fs and firing %.1fs after docker run (for: %s, interval %s, ranges /%d); value %s %.0fs after",
		aggressive.name, aggressive.cpus, alert, pendingAt.Sub(aggressive.started).Seconds(), firingAt.Sub(aggressive.started).Seconds(), promFor, promInterval, rangeScale,
		fired.Value, time.Since(aggressive.started).Seconds())
	t.Logf("  labels %s\n  summary: %s", fired.Labels, fired.Annotations["summary"])
	if got := string(fired.Labels["container_id"]); got != aggressive.id {
		t.Errorf("%s: container_id %q, want %s", alert, got, aggressive.id)
	}
	if got := string(fired.Labels["kind"]); got != "docker" {
		t.Errorf("%s: kind %q, want docker", alert, got)
	}
	for k, v := range fired.Annotations {
		if strings.Contains(string(v), "<no value>") || strings.TrimSpace(string(v)) == "" {
			t.Errorf("%s: annotation %s renders as %q", alert, k, v)
		}
	}
	// The alert names the container as Docker does.
	if got := string(fired.Labels["container_name"]); got != aggressive.name {
		t.Errorf("%s: container_name %q, want %s", alert, got, aggressive.name)
	}
	if got := string(fired.Labels["name"]); !strings.HasPrefix(got, aggressive.name+" ") || !strings.HasPrefix(string(fired.Annotations["summary"]), got+" ") {
		t.Errorf("%s: name %q and summary %q do not start with the container's name %s", alert, got, fired.Annotations["summary"], aggressive.name)
	}
	// --cpus 0.1 and a thread that wants 0.5 CPU: throttled most of
	// every period, on one CPU, so several seconds per second of limit.
	if v, err := strconv.ParseFloat(fired.Value, 64); err != nil || v <= 1 {
		t.Errorf("%s: value %s, want well over the alert's 0.5 (%v)", alert, fired.Value, err)
	}
	// Under 10 ms of quota a period, each 50 ms burst stands still for
	// most of the rest of the period: CFSProbeLongThrottlingStalls fires
	// too.
	if a, ok := waitAlert(prom, alertTimeout, func(a promv1.Alert) bool {
		return a.Labels[model.AlertNameLabel] == "CFSProbeLongThrottlingStalls" && string(a.Labels["cgroup"]) == aggressive.cgroup() && a.State == promv1.AlertStateFiring
	}); !ok {
		t.Errorf("%s (--cpus %s): CFSProbeLongThrottlingStalls did not fire within %v", aggressive.name, aggressive.cpus, alertTimeout)
	} else {
		t.Logf("%s (--cpus %s): CFSProbeLongThrottlingStalls firing, pending from %.1fs after docker run, p99 stall %s s",
			aggressive.name, aggressive.cpus, a.ActiveAt.Sub(aggressive.started).Seconds(), a.Value)
	}
	for _, a := range w.control {
		t.Errorf("%s (--cpus %s): %s is %s: %s value %s", control.name, control.cpus, a.Labels[model.AlertNameLabel], a.State, a.Labels, a.Value)
	}
	if len(w.control) == 0 {
		t.Logf("%s (--cpus %s): no alert in %.0fs", control.name, control.cpus, time.Since(control.started).Seconds())
	}

	logSeed003Runs(t, prom, aggressive, control)
	checkRulesHealthy(t, prom)
	checkSeed003Query(t, prom, aggressive, control)
	checkDashboardQueries(t, prom)

	// The exporter stops: CFSProbeExporterDown fires for it.
	stopped := time.Now()
	if err := exporter.Stop(); err != nil {
		t.Fatalf("stop the exporter: %v", err)
	}
	if _, ok := waitAlert(prom, alertTimeout, func(a promv1.Alert) bool {
		return a.Labels[model.AlertNameLabel] == "CFSProbeExporterDown" && string(a.Labels["instance"]) == expAddr && a.State == promv1.AlertStateFiring
	}); !ok {
		t.Errorf("CFSProbeExporterDown did not fire within %v of the exporter's exit", alertTimeout)
	} else {
		t.Logf("CFSProbeExporterDown firing %.1fs after the exporter stopped", time.Since(stopped).Seconds())
	}
	t.Logf("wall time so far %.1fs", time.Since(begin).Seconds())
}

// alertWatch is what watchAlerts saw.
type alertWatch struct {
	pendingAt, firingAt time.Time      // when the alert about the throttled container was first seen so
	fired               promv1.Alert   // that alert, as last evaluated
	control             []promv1.Alert // every alert about the control container
	others              []promv1.Alert // every other alert, about anything
}

// watchAlerts polls Prometheus' alerts until the alert about the throttled
// container fires and the control has run for controlWatch, or until
// alertTimeout.
func watchAlerts(t *testing.T, prom *prometheus, alert string, throttled, control container) alertWatch {
	t.Helper()
	var w alertWatch
	controlSeen, othersSeen := map[string]promv1.Alert{}, map[string]promv1.Alert{}
	for deadline := time.Now().Add(alertTimeout); ; time.Sleep(250 * time.Millisecond) {
		alerts, err := prom.alerts()
		if err != nil {
			t.Fatal(err)
		}
		mine, rest := alertsAbout(alerts, throttled.cgroup())
		c, rest := alertsAbout(rest, control.cgroup())
		for _, a := range c {
			controlSeen[a.Labels.String()+string(a.State)] = a
		}
		for _, a := range mine {
			if string(a.Labels[model.AlertNameLabel]) != alert {
				rest = append(rest, a)
				continue
			}
			if w.pendingAt.IsZero() {
				w.pendingAt = time.Now()
			}
			if a.State == promv1.AlertStateFiring {
				if w.firingAt.IsZero() {
					w.firingAt = time.Now()
				}
				w.fired = a
			}
		}
		for _, a := range rest {
			othersSeen[a.Labels.String()] = a
		}
		if !w.firingAt.IsZero() && time.Since(control.started) > controlWatch || time.Now().After(deadline) {
			break
		}
	}
	for _, k := range slices.Sorted(maps.Keys(controlSeen)) {
		w.control = append(w.control, controlSeen[k])
	}
	for _, k := range slices.Sorted(maps.Keys(othersSeen)) {
		w.others = append(w.others, othersSeen[k])
	}
	return w
}

// waitAlert polls Prometheus' alerts until one satisfies ok, and returns
// it, or until timeout.
func waitAlert(prom *prometheus, timeout time.Duration, ok func(promv1.Alert) bool) (promv1.Alert, bool) {
	for deadline := time.Now().Add(timeout); time.Now().Before(deadline); time.Sleep(250 * time.Millisecond) {
		alerts, err := prom.alerts()
		if i := slices.IndexFunc(alerts, ok); err == nil && i >= 0 {
			return alerts[i], true
		}
	}
	return promv1.Alert{}, false
}

// seriesDelay bounds how long a container's series take to appear in
// Prometheus: the exporter's walk (500 ms) and a scrape (1 s), with margin.
const seriesDelay = 5 * time.Second

// firstScrapeDelay bounds the wait for Prometheus's first scrape of each
// job after it started: its scrape manager takes in discovered targets
// (static ones too) on a 5 s tick, so for up to 5 s it has none, and then
// a scrape interval more.
const firstScrapeDelay = 15 * time.Second

// logSeed003Runs logs, for each container, seed 003's table row over its
// life so far (less seriesDelay), from Prometheus: CPU used, throttle
// rate, time throttled.
func logSeed003Runs(t *testing.T, prom *prometheus, cs ...container) {
	t.Helper()
	for _, c := range cs {
		// A window the container's series fill (they appear within a walk
		// and a scrape of its start): rate does not extrapolate far
		// beyond a series' first sample, so a longer window would read
		// low.
		age := (time.Since(c.started) - seriesDelay).Truncate(time.Second)
		row := map[string]float64{}
		for name, expr := range map[string]string{
			"cpu":       "rate(cfsprobe_cpu_usage_seconds_total{cgroup=%q}[%s])",
			"periods":   "increase(cfsprobe_cpu_periods_total{cgroup=%q}[%s])",
			"throttled": "increase(cfsprobe_cpu_throttled_periods_total{cgroup=%q}[%s])",
			"seconds":   "increase(cfsprobe_cpu_throttled_seconds_total{cgroup=%q}[%s])",
		} {
			v, err := prom.query(fmt.Sprintf(expr, c.cgroup(), model.Duration(age)))
			if err != nil || len(v) != 1 {
				t.Errorf("%s: %s: %v %v", c.name, name, v, err)
				continue
			}
			row[name] = float64(v[0].Value)
		}
		t.Logf("seed 003 run, %s (--cpus %s) over the last %v: CPU %.1f %%, throttle rate %.1f %% (%.0f/%.0f), %.2fs throttled",
			c.name, c.cpus, age, 100*row["cpu"], 100*row["throttled"]/row["periods"], row["throttled"], row["periods"], row["seconds"])
	}
}

// checkRulesHealthy: Prometheus loaded every rule of the copy, and the
// last evaluation of each, on the exporter's real series, had no error
// (such as many-to-many matching in a join).
func checkRulesHealthy(t *testing.T, prom *prometheus) {
	t.Helper()
	want := 0
	for _, g := range loadRules(t).Groups {
		want += len(g.Rules)
	}
	r, err := prom.rules()
	if err != nil {
		t.Fatal(err)
	}
	got := 0
	for _, g := range r.Groups {
		for _, rule := range g.Rules {
			got++
			switch rule := rule.(type) {
			case promv1.AlertingRule:
				if rule.Health != promv1.RuleHealthGood {
					t.Errorf("alert %s: health %s: %s", rule.Name, rule.Health, rule.LastError)
				}
			case promv1.RecordingRule:
				if rule.Health != promv1.RuleHealthGood {
					t.Errorf("record %s: health %s: %s", rule.Name, rule.Health, rule.LastError)
				}
			}
		}
	}
	if got != want {
		t.Errorf("Prometheus has %d rules, %s %d", got, rulesFile, want)
	}
}

var promqlBlockRE = regexp.MustCompile("(?s)```promql\n(.*?)```")

// seed003Query is deploy/README.md's example of seed 003's throttle-rate
// query by container name: the PromQL block naming aggressiveName.
func seed003Query(t *testing.T) string {
	t.Helper()
	for _, m := range promqlBlockRE.FindAllStringSubmatch(string(readFile(t, deployReadme)), -1) {
		if strings.Contains(m[1], aggressiveName) {
			return m[1]
		}
	}
	t.Fatalf("%s: no promql block with seed 003's throttle rate of %s", deployReadme, aggressiveName)
	return ""
}

// checkSeed003Query runs the README's seed 003 query for both containers:
// each is returned by its name, the aggressive one with most of its
// periods throttled (the seed: 100 %), the control with fewer than the
// seed's alert threshold (10 %; the seed: 0 %).
func checkSeed003Query(t *testing.T, prom *prometheus, aggressive, control container) {
	t.Helper()
	q := seed003Query(t)
	for _, c := range []struct {
		container
		ok   func(float64) bool
		want string
	}{
		{aggressive, func(v float64) bool { return v > 50 }, "> 50"},
		{control, func(v float64) bool { return v < 10 }, "< 10"},
	} {
		expr := strings.ReplaceAll(q, aggressiveName, c.name)
		v, err := prom.query(expr)
		if err != nil {
			t.Error(err)
			continue
		}
		if len(v) != 1 {
			t.Errorf("seed 003 query for %s returned %d series, want 1: %v", c.name, len(v), v)
			continue
		}
		got := float64(v[0].Value)
		t.Logf("seed 003 throttle rate of %s (--cpus %s): %.1f %% %s", c.name, c.cpus, got, v[0].Metric)
		if string(v[0].Metric["container_name"]) != c.name || string(v[0].Metric["cgroup"]) != c.cgroup() {
			t.Errorf("seed 003 query for %s returned %s, want container_name %q and cgroup %s", c.name, v[0].Metric, c.name, c.cgroup())
		}
		if math.IsNaN(got) || !c.ok(got) {
			t.Errorf("seed 003 throttle rate of %s (--cpus %s) is %.1f %%, want %s", c.name, c.cpus, got, c.want)
		}
	}
}

// dataTimeout is how long a dashboard query may take to return data (rates
// need two scrapes; histograms a stall).
const dataTimeout = 30 * time.Second

// checkDashboardQueries runs every query of the Grafana dashboard, as
// Grafana would with every variable at All: each returns data.
func checkDashboardQueries(t *testing.T, prom *prometheus) {
	t.Helper()
	d := loadDashboard(t)
	vars := map[string]variable{}
	for _, v := range d.Templating.List {
		vars[v.Name] = v
	}
	type query struct {
		where, expr string
		run         func() (int, error)
	}
	var qs []query
	for _, v := range d.Templating.List {
		m := labelValuesRE.FindStringSubmatch(v.Query)
		if v.Type != "query" || m == nil {
			continue
		}
		match, _ := substitute(m[1], vars)
		label := m[2]
		qs = append(qs, query{fmt.Sprintf("variable %s", v.Name), v.Query, func() (int, error) {
			vals, err := prom.labelValues(label, match)
			return len(vals), err
		}})
	}
	nvars := len(qs)
	for _, p := range flatten(d.Panels) {
		for _, tg := range p.Targets {
			expr, _ := substitute(tg.Expr, vars)
			qs = append(qs, query{fmt.Sprintf("panel %d %q %s", p.ID, p.Title, tg.RefID), expr, func() (int, error) {
				v, err := prom.query(expr)
				return len(v), err
			}})
		}
	}
	// Throttling under quota is a kernel defect: on a kernel without it
	// the queries about it that keep only groups with some are empty, and
	// must be.
	under, err := prom.query("sum(cfsprobe_throttled_under_quota_periods_total)")
	if err != nil || len(under) != 1 {
		t.Fatalf("throttled-under-quota periods on this host: %v %v", under, err)
	}
	t.Logf("periods throttled under quota on this host since the exporter started: %v", under[0].Value)
	noDefect := func(q query) bool {
		return under[0].Value == 0 && strings.Contains(q.expr, "cfsprobe_throttled_under_quota_periods_total")
	}
	deadline := time.Now().Add(dataTimeout)
	pending := qs
	for time.Now().Before(deadline) && slices.ContainsFunc(pending, func(q query) bool { return !noDefect(q) }) {
		var empty []query
		for _, q := range pending {
			n, err := q.run()
			if err != nil {
				t.Errorf("%s: %v", q.where, err)
				continue
			}
			if n == 0 {
				empty = append(empty, q)
			}
		}
		pending = empty
		if len(pending) > 0 {
			time.Sleep(time.Second)
		}
	}
	for _, q := range pending {
		if noDefect(q) {
			t.Logf("dashboard %s returned no data, as it should: this kernel throttled no group under quota", q.where)
			continue
		}
		t.Errorf("dashboard %s returned no data within %v: %s", q.where, dataTimeout, oneLine(q.expr))
	}
	t.Logf("dashboard: %d of %d queries (%d variables, %d panel targets) returned data", len(qs)-len(pending), len(qs), nvars, len(qs)-nvars)
}

// checkScrapeSecurity is issue 13's Must show 1 as Prometheus sees it:
// its scrapes of the exporter over TLS with basic auth succeed and bring
// the exporter's series; those without credentials are refused with 401;
// those over plain HTTP fail.
func checkScrapeSecurity(t *testing.T, prom *prometheus) {
	t.Helper()
	want := map[string]struct {
		health promv1.HealthStatus
		err    string // in the target's last error
	}{
		exporterJob:      {promv1.HealthGood, ""},
		noCredentialsJob: {promv1.HealthBad, "401 Unauthorized"},
		plainHTTPJob:     {promv1.HealthBad, "400 Bad Request"},
	}
	seen := map[string]promv1.ActiveTarget{}
	var last promv1.TargetsResult
	for deadline := time.Now().Add(firstScrapeDelay); len(seen) < len(want) && time.Now().Before(deadline); time.Sleep(250 * time.Millisecond) {
		r, err := prom.targets()
		if err != nil {
			t.Fatal(err)
		}
		last = r
		for _, tg := range r.Active {
			if _, ok := want[tg.ScrapePool]; ok && tg.Health != promv1.HealthUnknown {
				seen[tg.ScrapePool] = tg
			}
		}
	}
	for job, w := range want {
		tg, ok := seen[job]
		if !ok {
			t.Errorf("job %s: no scrape within %v; the targets: %+v", job, firstScrapeDelay, last)
			continue
		}
		t.Logf("job %s: %s %s: health %s, last error %q", job, tg.ScrapeURL, tg.Labels["instance"], tg.Health, tg.LastError)
		if tg.Health != w.health || !strings.Contains(tg.LastError, w.err) || (w.err == "") != (tg.LastError == "") {
			t.Errorf("job %s: health %s, last error %q; want %s and an error with %q", job, tg.Health, tg.LastError, w.health, w.err)
		}
	}
	v, err := prom.query(fmt.Sprintf(`count({job=%q, __name__=~"cfsprobe_.+"})`, exporterJob))
	if err != nil || len(v) != 1 || v[0].Value < 1 {
		t.Errorf("series of the exporter scraped over TLS: %v %v", v, err)
	} else {
		t.Logf("Prometheus holds %v cfsprobe_* series scraped over TLS with basic auth", v[0].Value)
	}
	for _, job := range []string{noCredentialsJob, plainHTTPJob} {
		v, err := prom.query(fmt.Sprintf(`count({job=%q, __name__=~"cfsprobe_.+"}) or vector(0)`, job))
		if err != nil || len(v) != 1 || v[0].Value != 0 {
			t.Errorf("job %s scraped cfsprobe_* series: %v %v", job, v, err)
		}
	}
}
