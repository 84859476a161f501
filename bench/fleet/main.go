// Command fleet measures cfsprobe recommend --prometheus at fleet scale
// (run by bench/run.sh fleet): it writes a week of the exporter's series
// for 1,000 groups on 50 nodes in OpenMetrics text, backfills them into a
// fresh TSDB with promtool tsdb create-blocks-from openmetrics, starts
// Debian's prometheus on it (loopback, a free port, nothing scraped), and
// times what cfsprobe recommend --prometheus does: reading every group and
// synthesizing its trace (internal/recommend/fleet), then the recommender
// (recommend.RecommendAll) on all of them, reporting a markdown section
// for bench/RESULTS.md.
//
// The groups' patterns vary (seeded by the group's number): quotas from
// 0.1 to 4 CPUs; per-period demand drawn from a log-normal around 0.01
// to 1.5 CPUs, with bursts on 1 to 8 CPUs in 0 to 20 % of the periods;
// active in 5 to 100 % of the periods, following a daily cycle; some
// with burst. Every process it starts and every file it writes is
// removed on exit.
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cfsprobe/cfsprobe/bench/internal/host"
	"github.com/cfsprobe/cfsprobe/internal/exporter"
	"github.com/cfsprobe/cfsprobe/internal/recommend"
	"github.com/cfsprobe/cfsprobe/internal/recommend/fleet"
	"github.com/cfsprobe/cfsprobe/internal/testenv"
	"github.com/cfsprobe/cfsprobe/internal/tied"
)

var (
	groupsFlag   = flag.Int("groups", 1000, "groups of the fleet")
	nodesFlag    = flag.Int("nodes", 50, "nodes they run on")
	daysFlag     = flag.Int("days", 7, "days of series")
	intervalFlag = flag.Duration("interval", time.Hour, "sample interval of the exporter's series")
	keepFlag     = flag.String("keep", "", "write the OpenMetrics text and TSDB here and keep them (default: a temporary directory, removed)")
	saveFlag     = flag.String("save", "", "write every group's synthetic trace into this directory (GROUP.json), to advise them again offline with cfsprobe recommend")
)

const (
	period  = 100 * time.Millisecond
	hostCPU = 16
)

func main() {
	flag.Parse()
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "bench fleet:", err)
		os.Exit(1)
	}
}

func run() error {
	for _, bin := range []string{"prometheus", "promtool"} {
		if _, err := exec.LookPath(bin); err != nil {
			return fmt.Errorf("%s is not installed: make deps installs Debian's prometheus", bin)
		}
	}
	dir := *keepFlag
	if dir == "" {
		d, err := os.MkdirTemp("", "cfsprobe-bench-fleet-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(d)
		dir = d
	}
	var out strings.Builder
	printf := func(f string, a ...any) { fmt.Fprintf(&out, f, a...) }
	hostFacts(printf)

	end := time.Now().Truncate(time.Minute).Add(-time.Minute)
	window := time.Duration(*daysFlag) * 24 * time.Hour
	text := filepath.Join(dir, "series.om")
	t0 := time.Now()
	st, err := generate(text, end.Add(-window), end)
	if err != nil {
		return err
	}
	genTook := time.Since(t0)
	tsdb := filepath.Join(dir, "tsdb")
	t0 = time.Now()
	cmd := exec.Command("promtool", "tsdb", "create-blocks-from", "openmetrics", "--max-block-duration=1000h", text, tsdb)
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("promtool: %w: %s", err, b)
	}
	backfillTook := time.Since(t0)
	os.Remove(text)
	du := dirSize(tsdb)

	url, stop, err := startPrometheus(dir, tsdb)
	if err != nil {
		return err
	}
	defer stop()

	printf("### A week of 1,000 groups, backfilled\n\n")
	printf("%d groups on %d nodes, %d days to %s: the exporter's series that the recommender reads (the settings, the usage, period, throttled-period and throttled-stretch counters, `cfsprobe_period_demand_cpus`, `cfsprobe_period_pair_demand_cpus` and `cfsprobe_period_stopped_cpus`: %d series a group) every %v, and the recording rule `cgroup:cfsprobe_cpu_usage:rate1m` every minute; %.1fM samples, %.2f GB of OpenMetrics text written in %.0fs, backfilled by `promtool tsdb create-blocks-from openmetrics` in %.0fs into %.0f MB of blocks.\n\n",
		*groupsFlag, *nodesFlag, *daysFlag, end.UTC().Format("2006-01-02 15:04 MST"), st.seriesPerGroup, *intervalFlag,
		float64(st.samples)/1e6, float64(st.bytes)/1e9, genTook.Seconds(), backfillTook.Seconds(), float64(du)/1e6)

	// Read and synthesize, as recommend --prometheus does.
	ctx := context.Background()
	cpu0 := host.SelfCPU()
	t0 = time.Now()
	series, err := fleet.Query(ctx, fleet.Options{URL: url, Since: window, End: end})
	if err != nil {
		return err
	}
	queryTook := time.Since(t0)
	t0 = time.Now()
	groups := fleet.SynthesizeAll(series, fleet.SynthOptions{})
	failed := 0
	for _, g := range groups {
		if g.Err != nil {
			failed++
		}
	}
	synthTook := time.Since(t0)
	readCPU := host.SelfCPU() - cpu0
	if *saveFlag != "" {
		if err := save(*saveFlag, groups); err != nil {
			return err
		}
	}

	// The recommender on every group, as recommend --prometheus runs it.
	var ins []recommend.Input
	periods := 0
	for _, g := range groups {
		if g.Err == nil {
			ins = append(ins, recommend.Input{Name: g.Key.String(), Trace: g.Trace, MinuteUsage: g.MinuteUsage})
			periods += len(g.Trace.Periods)
		}
	}
	t0 = time.Now()
	cpu0 = host.SelfCPU()
	advice, err := recommend.RecommendAll(ins, recommend.Options{})
	recTook, recCPU := time.Since(t0), host.SelfCPU()-cpu0
	if err != nil {
		return err
	}
	sims, most := 0, 0
	kinds := map[recommend.Kind]int{}
	for _, a := range advice {
		sims += a.Model.Simulations
		most = max(most, a.Model.Simulations)
		kinds[a.Recommended.Kind]++
	}

	printf("### Reading the fleet from Prometheus\n\n")
	printf("| step | wall | what |\n|---|---|---|\n")
	printf("| queries | **%.1fs** | %d instant queries over %s, run at once (docs/recommend-fleet.md), %d groups returned |\n", queryTook.Seconds(), fleet.QueryCount, model(window), len(series))
	printf("| synthesis | %.2fs | a synthetic trace (at most %d active periods, laid out by the pairs' histogram) and minute usage per group, on %d goroutines; %d groups without periods |\n", synthTook.Seconds(), fleet.DefaultMaxPeriods, runtime.GOMAXPROCS(0), failed)
	printf("| read in all | **%.1fs** | cfsprobe's own CPU in it: %.1fs (the rest is Prometheus's, on the same 2 CPUs) |\n", (queryTook + synthTook).Seconds(), readCPU.Seconds())
	printf("| recommender | **%.1fs** | `recommend.RecommendAll` on %d groups (%d periods in all): %.1fs of CPU on %d workers; %d simulations, %.1f a group (at most %d), %.2f ms of CPU each; advised %s |\n",
		recTook.Seconds(), len(ins), periods, recCPU.Seconds(), runtime.GOMAXPROCS(0), sims, float64(sims)/float64(max(len(ins), 1)), most,
		float64(recCPU.Microseconds())/1000/float64(max(sims, 1)), kindCounts(kinds))
	printf("| in all | **%.1fs** | read, synthesized and advised: the target is 60 s |\n\n", (queryTook + synthTook + recTook).Seconds())
	printf("Load after: %s\n", host.LoadAvg())
	fmt.Print(out.String())
	return nil
}

func model(d time.Duration) string { return strings.TrimSuffix(d.String(), "0m0s") }

// save writes every group's synthetic trace into dir.
func save(dir string, groups []fleet.Group) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for i, g := range groups {
		if g.Err == nil {
			if err := g.Trace.WriteFile(filepath.Join(dir, fmt.Sprintf("group%04d.json", i))); err != nil {
				return err
			}
		}
	}
	return nil
}

// kindCounts says how many groups were advised each kind.
func kindCounts(k map[recommend.Kind]int) string {
	var parts []string
	for _, kind := range append(recommend.Kinds, recommend.KindNoLimit) {
		if k[kind] > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", k[kind], kind.Words()))
		}
	}
	return strings.Join(parts, ", ")
}

// pattern is a group's demand: per active period, log-normal around
// median CPUs with the given spread, and with probability spike a burst
// on par CPUs (30 to 100 % of them busy).
type pattern struct {
	quota, burst  float64 // CPUs, seconds
	median, sigma float64
	spike         float64
	par           int
	active        float64 // share of periods with work
	phase         float64 // of the daily cycle
}

func patternOf(i int) pattern {
	r := rand.New(rand.NewPCG(uint64(i), 7))
	quotas := []float64{0.1, 0.2, 0.25, 0.5, 1, 2, 4}
	p := pattern{
		quota:  quotas[r.IntN(len(quotas))],
		median: math.Exp(math.Log(0.01) + r.Float64()*(math.Log(1.5)-math.Log(0.01))),
		sigma:  0.1 + 0.7*r.Float64(),
		spike:  []float64{0, 0, 0.01, 0.05, 0.2}[r.IntN(5)],
		par:    []int{1, 2, 4, 8}[r.IntN(4)],
		active: 0.05 + 0.95*r.Float64(),
		phase:  2 * math.Pi * r.Float64(),
	}
	if r.IntN(10) == 0 {
		p.burst = p.quota * period.Seconds() / 2
	}
	return p
}

// dist is what a pattern gives per active period: the share of periods in
// each demand bucket (the exporter's, and +Inf), the mean demand, the
// share throttled under the quota and the mean usage (demand capped at
// the quota, as the kernel caps it), from 20,000 drawn periods.
type dist struct {
	demand    []float64
	mean      float64
	throttled float64
	usage     float64
}

func distOf(i int, p pattern) dist {
	r := rand.New(rand.NewPCG(uint64(i), 11))
	bounds := exporter.DemandBuckets
	d := dist{demand: make([]float64, len(bounds)+1)}
	const n = 20000
	for range n {
		v := p.median * math.Exp(p.sigma*r.NormFloat64())
		if r.Float64() < p.spike {
			v = float64(p.par) * (0.3 + 0.7*r.Float64())
		}
		v = min(v, hostCPU)
		b, _ := slices.BinarySearch(bounds, v)
		d.demand[b]++
		d.mean += v
		if v > p.quota {
			d.throttled++
		}
		d.usage += min(v, p.quota)
	}
	for b := range d.demand {
		d.demand[b] /= n
	}
	d.mean /= n
	d.throttled /= n
	d.usage /= n
	return d
}

type genStats struct {
	samples, bytes int64
	seriesPerGroup int
}

// generate writes the fleet's series from start to end in OpenMetrics
// text: each family's series in turn, each series' samples in time order.
func generate(path string, start, end time.Time) (genStats, error) {
	f, err := os.Create(path)
	if err != nil {
		return genStats{}, err
	}
	w := bufio.NewWriterSize(f, 1<<20)
	var st genStats
	n := *groupsFlag
	pats := make([]pattern, n)
	dists := make([]dist, n)
	labels := make([]string, n)
	for i := range pats {
		pats[i] = patternOf(i)
		dists[i] = distOf(i, pats[i])
		labels[i] = fmt.Sprintf(`cgroup="/kubepods/pod%04d/c%04d",instance="node-%02d:9750",job="cfsprobe"`, i, i, i%*nodesFlag)
	}
	step := *intervalFlag
	var times []int64
	for t := start; !t.After(end); t = t.Add(step) {
		times = append(times, t.Unix())
	}
	// active periods of group i in the interval ending at times[k]
	// (a daily cycle between 40 % and 100 % of its share).
	activeIn := func(i, k int) float64 {
		if k == 0 {
			return 0
		}
		p := pats[i]
		day := 2 * math.Pi * float64(times[k]%86400) / 86400
		return p.active * (0.7 + 0.3*math.Sin(day+p.phase)) * float64(step) / float64(period)
	}
	var b []byte
	sample := func(name, lbl, le string, v float64, ts int64) {
		b = append(b[:0], name...)
		b = append(b, '{')
		b = append(b, lbl...)
		if le != "" {
			b = append(b, `,le="`...)
			b = append(b, le...)
			b = append(b, '"')
		}
		b = append(b, "} "...)
		b = strconv.AppendFloat(b, v, 'g', 10, 64)
		b = append(b, ' ')
		b = strconv.AppendInt(b, ts, 10)
		b = append(b, '\n')
		w.Write(b)
		st.samples++
		st.bytes += int64(len(b))
	}
	family := func(name, typ string) {
		fmt.Fprintf(w, "# TYPE %s %s\n", name, typ)
	}
	gauge := func(name string, v func(i int) (float64, bool)) {
		family(name, "gauge")
		st.seriesPerGroup++
		for i := range n {
			if x, ok := v(i); ok {
				for _, ts := range times {
					sample(name, labels[i], "", x, ts)
				}
			}
		}
	}
	counter := func(name string, per func(i int) float64) {
		family(name, "counter")
		st.seriesPerGroup++
		for i := range n {
			c := 0.0
			for k, ts := range times {
				c += activeIn(i, k) * per(i)
				sample(name+"_total", labels[i], "", c, ts)
			}
		}
	}
	hist := func(name string, bounds []float64, shares func(i int) (counts []float64, sum float64)) {
		family(name, "histogram")
		st.seriesPerGroup += len(bounds) + 3
		les := make([]string, len(bounds)+1)
		for j, bd := range bounds {
			les[j] = strconv.FormatFloat(bd, 'g', -1, 64)
		}
		les[len(bounds)] = "+Inf"
		for i := range n {
			counts, sum := shares(i)
			for j := range les {
				cum := 0.0
				for _, c := range counts[:j+1] {
					cum += c
				}
				c := 0.0
				for k, ts := range times {
					c += math.Round(activeIn(i, k) * cum)
					sample(name+"_bucket", labels[i], les[j], c, ts)
				}
			}
			total := 0.0
			for _, c := range counts {
				total += c
			}
			cs := 0.0
			for k, ts := range times {
				cs += activeIn(i, k) * sum
				sample(name+"_sum", labels[i], "", cs, ts)
			}
			cc := 0.0
			for k, ts := range times {
				cc += math.Round(activeIn(i, k) * total)
				sample(name+"_count", labels[i], "", cc, ts)
			}
		}
	}
	gauge("cfsprobe_cpu_quota_cpus", func(i int) (float64, bool) { return pats[i].quota, true })
	gauge("cfsprobe_cpu_period_seconds", func(i int) (float64, bool) { return period.Seconds(), true })
	gauge("cfsprobe_cpu_burst_limit_seconds", func(i int) (float64, bool) { return pats[i].burst, true })
	counter("cfsprobe_cpu_usage_seconds", func(i int) float64 { return dists[i].usage * period.Seconds() })
	counter("cfsprobe_cpu_periods", func(i int) float64 { return 1 })
	counter("cfsprobe_cpu_throttled_periods", func(i int) float64 { return dists[i].throttled })
	// Stretches of two throttled periods on average; every other group a
	// closed loop (it catches up after each), the others loops that run
	// for a time (never).
	counter("cfsprobe_throttled_stretches", func(i int) float64 { return dists[i].throttled / 2 })
	counter("cfsprobe_throttled_stretches_caught_up", func(i int) float64 { return float64(1-i%2) * dists[i].throttled / 2 })
	hist("cfsprobe_period_demand_cpus", exporter.DemandBuckets, func(i int) ([]float64, float64) { return dists[i].demand, dists[i].mean })
	// Two periods in a row as alike as one: the pairs' histogram is the
	// periods' own, so that the heavy periods come in pairs.
	hist("cfsprobe_period_pair_demand_cpus", exporter.DemandBuckets, func(i int) ([]float64, float64) { return dists[i].demand, dists[i].mean })
	hist("cfsprobe_period_stopped_cpus", exporter.StoppedBuckets, func(i int) ([]float64, float64) {
		c := make([]float64, len(exporter.StoppedBuckets)+1)
		par := min(pats[i].par, hostCPU)
		j, _ := slices.BinarySearch(exporter.StoppedBuckets, float64(par))
		c[j] = dists[i].throttled
		return c, dists[i].throttled * float64(par)
	})
	// The node's figures.
	family("cfsprobe_host_cpus", "gauge")
	for node := range *nodesFlag {
		for _, ts := range times {
			sample("cfsprobe_host_cpus", fmt.Sprintf(`instance="node-%02d:9750",job="cfsprobe"`, node), "", hostCPU, ts)
		}
	}
	family("cfsprobe_host_info", "gauge")
	for node := range *nodesFlag {
		for _, ts := range times {
			sample("cfsprobe_host_info", fmt.Sprintf(`cgroup_mode="v2",cpu_controller="v2",instance="node-%02d:9750",job="cfsprobe",kernel="%s"`, node, host.KernelRelease()), "", 1, ts)
		}
	}
	// The minute rule, as Prometheus records it: usage in CPUs over the
	// last minute, with noise around the daily cycle.
	family("cgroup:cfsprobe_cpu_usage:rate1m", "gauge")
	for i := range n {
		r := rand.New(rand.NewPCG(uint64(i), 13))
		p := pats[i]
		for t := start.Add(time.Minute); !t.After(end); t = t.Add(time.Minute) {
			day := 2 * math.Pi * float64(t.Unix()%86400) / 86400
			v := p.active * (0.7 + 0.3*math.Sin(day+p.phase)) * dists[i].usage * math.Exp(0.3*r.NormFloat64())
			sample("cgroup:cfsprobe_cpu_usage:rate1m", labels[i], "", v, t.Unix())
		}
	}
	fmt.Fprintln(w, "# EOF")
	if err := w.Flush(); err != nil {
		f.Close()
		return st, fmt.Errorf("write %s: %w", path, err)
	}
	return st, f.Close()
}

// startPrometheus serves the TSDB on a free loopback port, scraping
// nothing; stop ends it by its PID.
func startPrometheus(dir, tsdb string) (string, func(), error) {
	cfg := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(cfg, []byte("global: {}\n"), 0o644); err != nil {
		return "", nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	addr := ln.Addr().String()
	ln.Close()
	logf, err := os.Create(filepath.Join(dir, "prometheus.log"))
	if err != nil {
		return "", nil, err
	}
	cmd := exec.Command("prometheus", "--config.file="+cfg, "--storage.tsdb.path="+tsdb,
		"--storage.tsdb.retention.time=30d", "--web.listen-address="+addr, "--log.level=warn")
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := tied.Start(cmd); err != nil {
		return "", nil, err
	}
	stop := func() {
		_ = testenv.Terminate(cmd, 20*time.Second)
		logf.Close()
	}
	url := "http://" + addr
	for deadline := time.Now().Add(120 * time.Second); ; {
		resp, err := http.Get(url + "/-/ready")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return url, stop, nil
			}
		}
		if time.Now().After(deadline) {
			stop()
			b, _ := os.ReadFile(logf.Name())
			return "", nil, errors.Join(fmt.Errorf("prometheus at %s not ready after 120s", url), err, errors.New(string(b)))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func dirSize(dir string) int64 {
	var n int64
	_ = filepath.Walk(dir, func(_ string, fi os.FileInfo, err error) error {
		if err == nil && !fi.IsDir() {
			n += fi.Size()
		}
		return nil
	})
	return n
}

// hostFacts prints what the numbers depend on.
func hostFacts(printf func(string, ...any)) {
	ver := "?"
	if b, err := exec.Command("prometheus", "--version").CombinedOutput(); err == nil {
		ver = strings.SplitN(string(b), "\n", 2)[0]
	}
	printf("Measured %s by `bench/run.sh fleet` (bench/fleet).\n\n", time.Now().UTC().Format("2006-01-02 15:04 MST"))
	printf("| host | |\n|---|---|\n")
	printf("| CPU | %s, %d online CPUs |\n", host.CPUModel(), runtime.NumCPU())
	printf("| kernel | %s |\n", host.KernelRelease())
	printf("| Prometheus | %s |\n", ver)
	printf("| Go | %s |\n", runtime.Version())
	printf("| load before | %s |\n\n", host.LoadAvg())
}
