package exporter

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/cfsprobe/cfsprobe/internal/cgroup"
	"github.com/cfsprobe/cfsprobe/internal/hostfs"
	"github.com/cfsprobe/cfsprobe/internal/monitor"
	"github.com/cfsprobe/cfsprobe/internal/testenv"
	"github.com/cfsprobe/cfsprobe/internal/tied"
)

// realTree makes groups under a parent of this test's own in every
// hierarchy of the machine's cgroup root, and removes them all (children
// first) when the test ends, also when it fails.
type realTree struct {
	t      testing.TB
	root   *monitor.Root
	parent string   // "cfsprobe-<what>-<pid>"
	hier   []string // the cpu hierarchy and, apart, cpuacct
	mu     sync.Mutex
	live   map[string]bool // children made and not yet removed
}

func newRealTree(t testing.TB, what string) *realTree {
	t.Helper()
	testenv.NeedCgroups(t)
	r, err := monitor.OpenRoot(hostfs.Default().CgroupDir())
	if err != nil {
		t.Fatal(err)
	}
	rt := &realTree{t: t, root: r, parent: fmt.Sprintf("cfsprobe-%s-%d", what, os.Getpid()), hier: []string{r.CPUDir}, live: map[string]bool{}}
	if r.AcctDir != r.CPUDir {
		rt.hier = append(rt.hier, r.AcctDir)
	}
	t.Cleanup(rt.removeAll)
	for _, h := range rt.hier {
		if err := os.Mkdir(filepath.Join(h, rt.parent), 0o755); err != nil {
			t.Fatalf("create cgroup: %v", err)
		}
	}
	if r.Version == 2 {
		for _, d := range []string{r.CPUDir, filepath.Join(r.CPUDir, rt.parent)} {
			b, err := os.ReadFile(filepath.Join(d, "cgroup.subtree_control"))
			if err == nil && !slices.Contains(strings.Fields(string(b)), "cpu") {
				err = cgroup.WriteFile(filepath.Join(d, "cgroup.subtree_control"), "+cpu")
			}
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	return rt
}

// add makes the child name with a quota per 100 ms period.
func (rt *realTree) add(name string, quota time.Duration) error {
	rt.mu.Lock()
	rt.live[name] = true
	rt.mu.Unlock()
	for _, h := range rt.hier {
		if err := os.Mkdir(filepath.Join(h, rt.parent, name), 0o755); err != nil {
			return err
		}
	}
	dir := filepath.Join(rt.root.CPUDir, rt.parent, name)
	us := strconv.FormatInt(quota.Microseconds(), 10)
	if rt.root.Version == 2 {
		return cgroup.WriteFile(filepath.Join(dir, "cpu.max"), us+" 100000")
	}
	return cgroup.WriteFile(filepath.Join(dir, "cpu.cfs_quota_us"), us)
}

// remove removes the child name.
func (rt *realTree) remove(name string) error {
	for _, h := range rt.hier {
		if err := cgroup.Rmdir(filepath.Join(h, rt.parent, name)); err != nil {
			return err
		}
	}
	rt.mu.Lock()
	delete(rt.live, name)
	rt.mu.Unlock()
	return nil
}

// enter moves pid into the child name in every hierarchy.
func (rt *realTree) enter(name string, pid int) error {
	for _, h := range rt.hier {
		if err := cgroup.WriteFile(filepath.Join(h, rt.parent, name, "cgroup.procs"), strconv.Itoa(pid)); err != nil {
			return err
		}
	}
	return nil
}

func (rt *realTree) removeAll() {
	rt.mu.Lock()
	names := make([]string, 0, len(rt.live))
	for n := range rt.live {
		names = append(names, n)
	}
	rt.mu.Unlock()
	for _, n := range names {
		if err := rt.remove(n); err != nil {
			rt.t.Errorf("remove cgroup: %v", err)
		}
	}
	for _, h := range rt.hier {
		d := filepath.Join(h, rt.parent)
		if err := cgroup.Rmdir(d); err != nil {
			rt.t.Errorf("remove cgroup: %v", err)
		}
		if _, err := os.Stat(d); err == nil {
			rt.t.Errorf("cgroup %s left behind", d)
		}
	}
}

// serve runs an Exporter on a free local port until the test ends and
// returns the base URL.
func serve(t testing.TB, e *Exporter) string {
	t.Helper()
	return "http://" + serveAddr(t, e)
}

// serveAddr runs an Exporter on a free local port until the test ends and
// returns its address.
func serveAddr(t testing.TB, e *Exporter) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.Run(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	return ln.Addr().String()
}

// get scrapes url/metrics, parses it and lints it.
func get(url string) (map[string]*dto.MetricFamily, error) {
	resp, err := http.Get(url + "/metrics")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != 200 {
		return nil, fmt.Errorf("status %d: %s", resp.StatusCode, b)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	problems, err := promlint.New(bytes.NewReader(b)).Lint()
	if err == nil {
		err = problemsError(problems)
	}
	return fams, err
}

// series finds the metric of family name with cgroup path.
func series(fams map[string]*dto.MetricFamily, name, path string) *dto.Metric {
	for _, m := range fams[name].GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == "cgroup" && l.GetValue() == path {
				return m
			}
		}
	}
	return nil
}

// A busy loop under a 20 ms per 100 ms quota: the exporter's counters are
// the kernel's (cfsprobe_cpu_throttled_periods_total between cpu.stat's
// nr_throttled read before and after the scrape), and its sampler sees
// periods used up to the quota and stalls of about 80 ms, none under
// quota on this kernel.
func TestRealThrottledGroup(t *testing.T) {
	rt := newRealTree(t, "exporter")
	if err := rt.add("q20", 20*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	busy := exec.Command("/bin/sh", "-c", "while :; do :; done")
	if err := tied.Start(busy); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { // before the groups are removed (cleanups run last first)
		_ = busy.Process.Kill()
		_ = busy.Wait()
	})
	if err := rt.enter("q20", busy.Process.Pid); err != nil {
		t.Fatal(err)
	}
	e := newPedantic(Options{Root: rt.root, ScanInterval: 200 * time.Millisecond, SamplerMaxGroups: 100, Host: rt.root.HostFacts(hostfs.Default()), Version: "test"})
	url := serve(t, e)
	// 8 s: the sampler counts a group's periods once it has learnt the
	// group's period grid to 2 ms (docs/trace.md: blurred periods), a
	// few seconds at ten readings a period.
	time.Sleep(8 * time.Second)

	path := "/" + rt.parent + "/q20"
	g := monitor.Group{CPUDir: filepath.Join(rt.root.CPUDir, rt.parent, "q20"), AcctDir: filepath.Join(rt.root.AcctDir, rt.parent, "q20"), Version: rt.root.Version}
	before, err := g.Stat()
	if err != nil {
		t.Fatal(err)
	}
	fams, err := get(url)
	if err != nil {
		t.Fatal(err)
	}
	after, err := g.Stat()
	if err != nil {
		t.Fatal(err)
	}
	lint(t, e)
	value := func(name string) float64 {
		m := series(fams, name, path)
		if m == nil {
			t.Fatalf("no %s for %s", name, path)
		}
		return m.GetCounter().GetValue() + m.GetGauge().GetValue()
	}
	for _, c := range []struct {
		name       string
		lo, hi, v  float64
		kernelName string
	}{
		{"cfsprobe_cpu_throttled_periods_total", float64(before.NrThrottled), float64(after.NrThrottled), 0, "nr_throttled"},
		{"cfsprobe_cpu_periods_total", float64(before.NrPeriods), float64(after.NrPeriods), 0, "nr_periods"},
		{"cfsprobe_cpu_usage_seconds_total", seconds(before.UsageNs), seconds(after.UsageNs), 0, "usage"},
		{"cfsprobe_cpu_throttled_seconds_total", seconds(before.ThrottledNs), seconds(after.ThrottledNs), 0, "throttled time"},
	} {
		if v := value(c.name); v < c.lo || v > c.hi {
			t.Errorf("%s = %v, but the kernel's %s went from %v to %v during the scrape", c.name, v, c.kernelName, c.lo, c.hi)
		}
	}
	if before.NrThrottled < 20 {
		t.Errorf("only %d throttled periods in 8 s under a 20%% quota", before.NrThrottled)
	}
	if q := value("cfsprobe_cpu_quota_cpus"); q != 0.2 {
		t.Errorf("quota %v CPUs, want 0.2", q)
	}

	usage := series(fams, "cfsprobe_period_usage_ratio", path).GetHistogram()
	stall := series(fams, "cfsprobe_stall_seconds", path).GetHistogram()
	under := value("cfsprobe_throttled_under_quota_periods_total")
	bucket := func(h *dto.Histogram, le float64) uint64 {
		for _, b := range h.GetBucket() {
			if b.GetUpperBound() == le {
				return b.GetCumulativeCount()
			}
		}
		t.Fatalf("no bucket %v", le)
		return 0
	}
	t.Logf("sampler: %d periods (kernel counted %d), usage ratio buckets %v, stall buckets %v, %v under quota",
		usage.GetSampleCount(), before.NrPeriods, usage.GetBucket(), stall.GetBucket(), under)
	n := usage.GetSampleCount()
	if n < 25 || float64(n) > float64(before.NrPeriods) {
		t.Errorf("sampler attributed %d periods, the kernel counted %d: want most", n, before.NrPeriods)
	}
	// Usage at the quota: the kernel lets a period overrun by a slice.
	if atQuota := bucket(usage, 1.5) - bucket(usage, 0.75); float64(atQuota) < 0.8*float64(n) {
		t.Errorf("%d of %d periods used 0.75 to 1.5 of the quota, want most", atQuota, n)
	}
	if st := stall.GetSampleCount(); float64(st) < 0.8*float64(n) {
		t.Errorf("%d stalls in %d periods, want one in almost every period", st, n)
	}
	if s80 := bucket(stall, 0.1) - bucket(stall, 0.05); float64(s80) < 0.7*float64(stall.GetSampleCount()) {
		t.Errorf("%d of %d stalls between 50 and 100 ms, want most (80 ms each)", s80, stall.GetSampleCount())
	}
	if under > 0.1*float64(stall.GetSampleCount()) {
		t.Errorf("%v of %d throttled periods under quota on a busy loop at its quota", under, stall.GetSampleCount())
	}
	if m := fams["cfsprobe_sampler_groups"].GetMetric(); len(m) != 1 || m[0].GetGauge().GetValue() < 1 {
		t.Errorf("cfsprobe_sampler_groups = %v", m)
	}
}

// heapInUse is the heap in use after garbage collection: the spans that
// hold objects (runtime.MemStats.HeapInuse) and the live objects in them
// (HeapAlloc).
func heapInUse() (spans, live uint64) {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse, m.HeapAlloc
}

// heapReading is what heapInUse read, in bytes.
type heapReading struct{ spans, live int }

func openFDs(t testing.TB) int {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

// Real groups with quotas are created and removed in a loop, 20 alive at
// a time, while the exporter walks every 20 ms and is scraped without a
// pause (the churn waits for a scrape every 200 groups, so that at least
// 50 fall within it on a slow machine too): no scrape fails, and after
// 10,000 groups came and went its live objects are within 10 % of what
// they were after 1,000 (about 75 KiB, 8 bytes for each group gone; a
// group's path alone is longer), and its heap in use within 25 % (spans
// are kept by the page, so fragmentation moves them: 2,136 KiB after
// 1,000 groups and 2,360 after 10,000 in one CI run, with live objects
// 803 and 824 KiB). Both are taken at a pause of the churn and the
// scrapes, after a walk and two collections. When the groups are gone
// the exporter holds as many descriptors as before.
func TestRealChurn(t *testing.T) {
	if testing.Short() {
		t.Skip("creates 10,000 cgroups")
	}
	rt := newRealTree(t, "churn")
	e := newPedantic(Options{Root: rt.root, ScanInterval: 20 * time.Millisecond, SamplerMaxGroups: 100, Host: rt.root.HostFacts(hostfs.Default()), Version: "test"})
	url := serve(t, e)
	if _, err := get(url); err != nil {
		t.Fatal(err)
	}
	http.DefaultClient.CloseIdleConnections()
	time.Sleep(50 * time.Millisecond)
	fds0 := openFDs(t) // the listener and the poller open

	var scrapes, failed atomic.Int64
	var firstErr atomic.Value
	var pause sync.RWMutex // held by the scraper around each scrape
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			// The parsed scrape is dropped before the pause, so that
			// the heap measured holds only the exporter's.
			err := func() error {
				pause.RLock()
				defer pause.RUnlock()
				fams, err := get(url)
				if err == nil && fams["cfsprobe_groups_scanned"] == nil {
					err = errors.New("no cfsprobe_groups_scanned")
				}
				return err
			}()
			scrapes.Add(1)
			if err != nil {
				failed.Add(1)
				firstErr.CompareAndSwap(nil, err)
			}
		}
	}()
	stopScrapes := sync.OnceFunc(func() { close(stop); wg.Wait() })
	t.Cleanup(stopScrapes)

	// heap pauses the scrapes, lets a walk see the groups as they are,
	// and measures the heap in use.
	start := time.Now()
	heap := func(label string) heapReading {
		pause.Lock()
		defer pause.Unlock()
		if err := e.Rescan(); err != nil {
			t.Fatal(err)
		}
		lint(t, e)
		e.mu.Lock() // and no walk meanwhile
		defer e.mu.Unlock()
		// The least of three readings: what a sampling pass or a
		// connection holds for a moment is not the exporter's heap.
		spans, live := uint64(math.MaxUint64), uint64(math.MaxUint64)
		for range 3 {
			time.Sleep(20 * time.Millisecond)
			s, l := heapInUse()
			spans, live = min(spans, s), min(live, l)
		}
		t.Logf("after %s groups (%v): heap in use %d KiB (live objects %d KiB), %d scrapes", label, time.Since(start), spans>>10, live>>10, scrapes.Load())
		return heapReading{int(spans), int(live)}
	}

	const window = 20
	total := 10000
	if s := os.Getenv("CFSPROBE_CHURN_GROUPS"); s != "" { // longer runs by hand
		total, _ = strconv.Atoi(s)
	}
	var heap1k heapReading
	for i := 0; i < total; i++ {
		if err := rt.add(fmt.Sprintf("g%05d", i), time.Duration(10+i%50)*time.Millisecond); err != nil {
			t.Fatal(err)
		}
		if i >= window {
			if err := rt.remove(fmt.Sprintf("g%05d", i-window)); err != nil {
				t.Fatal(err)
			}
		}
		// The churn waits for the scraper now and then, so that
		// scrapes interleave with it however fast either runs.
		if i%200 == 199 {
			waitScrape(t, &scrapes, 10*time.Second)
		}
		switch {
		case i == 999:
			heap1k = heap("1000")
		case i%5000 == 4999 && i+1 < total:
			heap(strconv.Itoa(i + 1))
		}
	}
	heapN := heap(strconv.Itoa(total))
	stopScrapes()

	if n := failed.Load(); n > 0 {
		t.Errorf("%d of %d scrapes failed; first: %v", n, scrapes.Load(), firstErr.Load())
	}
	if d := heapN.live - heap1k.live; d > heap1k.live/10 || -d > heap1k.live/10 {
		t.Errorf("live objects %d KiB after %d groups, %d KiB after 1,000: more than 10%% apart", heapN.live>>10, total, heap1k.live>>10)
	}
	if d := heapN.spans - heap1k.spans; d > heap1k.spans/4 || -d > heap1k.spans/4 {
		t.Errorf("heap in use %d KiB after %d groups, %d KiB after 1,000: more than 25%% apart", heapN.spans>>10, total, heap1k.spans>>10)
	}
	if errs := e.scanner.Errors().Counts(); len(errs) > 0 {
		t.Errorf("read errors during the churn (vanished groups are not errors): %v", errs)
	}

	// All gone: the exporter lets go of every file.
	for i := max(total-window, 0); i < total; i++ {
		if err := rt.remove(fmt.Sprintf("g%05d", i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.Rescan(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond) // the sampler drops what it follows at its next pass
	http.DefaultClient.CloseIdleConnections()
	n := 0
	for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if n = openFDs(t); n <= fds0 {
			break // connections close a moment after the client's
		}
	}
	if n > fds0 {
		t.Errorf("%d descriptors open once the groups are gone, %d before any group", n, fds0)
	}
}

// waitScrape waits until the scraper finishes another scrape, and fails
// the test when none finishes within d.
func waitScrape(t *testing.T, scrapes *atomic.Int64, d time.Duration) {
	t.Helper()
	n := scrapes.Load()
	for deadline := time.Now().Add(d); scrapes.Load() == n; {
		if time.Now().After(deadline) {
			t.Fatalf("no scrape finished in %v during the churn (%d so far)", d, n)
		}
		time.Sleep(time.Millisecond)
	}
}
