// Command exporter measures what cfsprobe exporter costs on this machine's
// real cgroups (run as root by bench/run.sh): it makes a node's worth of
// CPU-limited groups, runs the exporter binary against them and reports,
// as a markdown section for bench/RESULTS.md:
//
//   - one scrape of 1,000 groups: wall time, CPU time and allocations,
//     against the floor of a bare loop that opens and reads the same four
//     files of every group;
//   - the exporter's CPU between scrapes at a 1 s cadence;
//   - the same with every group named by a CRI runtime (names.go);
//   - the per-period sampler's CPU for 100 groups, idle and busy;
//   - memory with 1,000 groups, and while 10,000 groups come and go during
//     scrapes (none may fail);
//   - scrapes of generated trees shaped like busy Kubernetes nodes (v1
//     and v2 layouts, on disk).
//
// Every group and process it makes is removed on exit, also on SIGINT,
// SIGTERM or a failure.
package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"golang.org/x/sys/unix"

	"github.com/cfsprobe/cfsprobe/bench/internal/host"
	"github.com/cfsprobe/cfsprobe/internal/cgroup"
	"github.com/cfsprobe/cfsprobe/internal/monitor"
	"github.com/cfsprobe/cfsprobe/internal/testenv"
	"github.com/cfsprobe/cfsprobe/internal/tied"
)

var (
	binFlag    = flag.String("bin", "bin/cfsprobe", "the cfsprobe binary to measure")
	groupsFlag = flag.Int("groups", 1000, "limited groups of the node")
	churnFlag  = flag.Int("churn", 10000, "groups created and removed during scrapes")
	quickFlag  = flag.Bool("quick", false, "shorter windows (a smoke test of the benchmark)")
	onlyFlag   = flag.String("only", "", "run only these sections, comma-separated: floor, scrapes, names, sampler, memory, fixtures")
)

func want(section string) bool {
	return *onlyFlag == "" || slices.Contains(strings.Split(*onlyFlag, ","), section)
}

func main() {
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	b := &bench{ctx: ctx}
	err := b.run()
	b.cleanup()
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench/exporter:", err)
		os.Exit(1)
	}
}

type bench struct {
	ctx    context.Context
	root   *monitor.Root
	hier   []string // cpu and, apart, cpuacct hierarchy roots
	made   []string // group paths relative to the hierarchies, in order of making
	mu     sync.Mutex
	procs  []*exec.Cmd
	tmp    string
	mounts []string // bind mounts of bindRoot
	out    strings.Builder

	floorCPU, scrapeCPU, samplerIdle1000 time.Duration
}

func (b *bench) printf(format string, a ...any) {
	fmt.Fprintf(&b.out, format, a...)
	fmt.Fprintf(os.Stderr, format, a...)
}

func (b *bench) window(d time.Duration) time.Duration {
	if *quickFlag {
		return d / 5
	}
	return d
}

func (b *bench) run() error {
	if os.Geteuid() != 0 {
		return errors.New("run as root: the benchmark makes cgroups")
	}
	bin, err := filepath.Abs(*binFlag)
	if err != nil {
		return err
	}
	if _, err := os.Stat(bin); err != nil {
		return fmt.Errorf("%w (make build makes it)", err)
	}
	if b.root, err = monitor.OpenRoot("/sys/fs/cgroup"); err != nil {
		return err
	}
	b.hier = []string{b.root.CPUDir}
	if b.root.AcctDir != b.root.CPUDir {
		b.hier = append(b.hier, b.root.AcctDir)
	}
	if b.tmp, err = os.MkdirTemp("", "cfsprobe-bench-"); err != nil {
		return err
	}
	b.hostFacts()

	parent := fmt.Sprintf("cfsprobe-bench-%d", os.Getpid())
	t0 := time.Now()
	paths, err := b.makeNode(parent, *groupsFlag)
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "made %d limited groups (%d directories) in %v\n", len(paths), len(b.made), time.Since(t0).Round(time.Millisecond))

	for _, s := range []struct {
		name string
		run  func() error
	}{
		{"floor", func() error { return b.floor(paths) }},
		{"scrapes", func() error { return b.scrapes(bin, len(paths)) }},
		{"names", func() error { return b.names(bin, paths) }},
		{"sampler", func() error { return b.sampler(bin, parent) }},
		{"memory", func() error { return b.memory(bin, parent) }},
		{"fixtures", func() error { return b.fixtures(bin) }},
	} {
		if !want(s.name) {
			continue
		}
		if err := s.run(); err != nil {
			return fmt.Errorf("%s: %w", s.name, err)
		}
		if b.ctx.Err() != nil {
			return b.ctx.Err()
		}
	}
	b.printf("\nLoad after: %s\n", host.LoadAvg())
	fmt.Print(b.out.String())
	return nil
}

// hostFacts prints what the numbers depend on.
func (b *bench) hostFacts() {
	release := host.KernelRelease()
	hz := "unknown"
	if b, err := os.ReadFile("/boot/config-" + release); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(l, "CONFIG_HZ=") {
				hz = strings.TrimPrefix(l, "CONFIG_HZ=")
			}
		}
	}
	b.printf("Measured %s by `bench/run.sh exporter` (bench/exporter).\n\n", time.Now().UTC().Format("2006-01-02 15:04 MST"))
	b.printf("| host | |\n|---|---|\n")
	b.printf("| CPU | %s, %d online CPUs |\n", host.CPUModel(), runtime.NumCPU())
	b.printf("| kernel | %s (CONFIG_HZ %s) |\n", release, hz)
	b.printf("| cgroups | %s, cpu controller v%d at %s, cpuacct at %s |\n", b.root.Mode, b.root.Version, b.root.CPUDir, b.root.AcctDir)
	b.printf("| Go | %s |\n", runtime.Version())
	b.printf("| load before | %s |\n\n", host.LoadAvg())
}

// mkgroup makes the group rel (relative to the hierarchies' roots) in
// every hierarchy, with a quota per 100 ms when quota > 0.
func (b *bench) mkgroup(rel string, quota time.Duration) error {
	b.mu.Lock()
	b.made = append(b.made, rel)
	b.mu.Unlock()
	for _, h := range b.hier {
		if err := os.Mkdir(filepath.Join(h, rel), 0o755); err != nil {
			return err
		}
	}
	if quota <= 0 {
		return nil
	}
	us := strconv.FormatInt(quota.Microseconds(), 10)
	if b.root.Version == 2 {
		return cgroup.WriteFile(filepath.Join(b.root.CPUDir, rel, "cpu.max"), us+" 100000")
	}
	return cgroup.WriteFile(filepath.Join(b.root.CPUDir, rel, "cpu.cfs_quota_us"), us)
}

// rmgroup removes the group rel from every hierarchy.
func (b *bench) rmgroup(rel string) error {
	for _, h := range b.hier {
		if err := cgroup.Rmdir(filepath.Join(h, rel)); err != nil {
			return err
		}
	}
	b.mu.Lock()
	if i := slices.Index(b.made, rel); i >= 0 {
		b.made = slices.Delete(b.made, i, i+1)
	}
	b.mu.Unlock()
	return nil
}

// cleanup kills what the benchmark started and removes what it made,
// deepest first.
func (b *bench) cleanup() {
	if err := b.unbindRoot(); err != nil {
		fmt.Fprintln(os.Stderr, "bench/exporter: cleanup:", err)
	}
	b.mu.Lock()
	procs := b.procs
	b.procs = nil
	b.mu.Unlock()
	for _, p := range procs {
		if p.Process != nil {
			_ = p.Process.Kill()
			_ = p.Wait()
		}
	}
	b.mu.Lock()
	made := slices.Clone(b.made)
	b.mu.Unlock()
	slices.SortFunc(made, func(x, y string) int { return strings.Count(y, "/") - strings.Count(x, "/") })
	left := 0
	for _, rel := range made {
		if err := b.rmgroup(rel); err != nil {
			fmt.Fprintln(os.Stderr, "bench/exporter: cleanup:", err)
			left++
		}
	}
	if b.tmp != "" {
		_ = os.RemoveAll(b.tmp)
	}
	if left > 0 {
		fmt.Fprintf(os.Stderr, "bench/exporter: %d groups left behind\n", left)
	}
}

// start starts a process the cleanup kills.
func (b *bench) start(cmd *exec.Cmd) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := tied.Start(cmd); err != nil {
		return err
	}
	b.procs = append(b.procs, cmd)
	return nil
}

func (b *bench) kill(cmd *exec.Cmd) {
	_ = testenv.Terminate(cmd, 5*time.Second)
	b.mu.Lock()
	b.procs = slices.DeleteFunc(b.procs, func(c *exec.Cmd) bool { return c == cmd })
	b.mu.Unlock()
}

// makeNode makes, under parent, a Kubernetes node's groups (systemd
// driver, containerd): burstable pods of three containers, the pod and
// its containers limited, n limited groups in all. It returns their
// paths relative to the hierarchies' roots.
func (b *bench) makeNode(parent string, n int) ([]string, error) {
	kube := parent + "/kubepods.slice"
	burst := kube + "/kubepods-burstable.slice"
	for _, g := range []string{parent, kube, burst} {
		if err := b.mkgroup(g, 0); err != nil {
			return nil, err
		}
	}
	var out []string
	for i := 0; len(out) < n; i++ {
		pod := fmt.Sprintf("%s/kubepods-burstable-pod%08x_1b2c_4d3e_8f4a_%012x.slice", burst, i, i)
		if err := b.mkgroup(pod, 300*time.Millisecond); err != nil {
			return nil, err
		}
		out = append(out, pod)
		for j := 0; j < 3 && len(out) < n; j++ {
			c := fmt.Sprintf("%s/cri-containerd-%056x%08x.scope", pod, i, j)
			if err := b.mkgroup(c, time.Duration(20+j*40)*time.Millisecond); err != nil {
				return nil, err
			}
			out = append(out, c)
		}
	}
	return out, nil
}

// procCPU is the CPU time process pid has used (utime+stime, in the
// kernel's clock ticks: aggregate over many operations).
func procCPU(pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * time.Second / 100 // USER_HZ
}

// rss is the resident memory of process pid.
func rss(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "VmRSS:") {
			kb, _ := strconv.ParseInt(strings.Fields(l)[1], 10, 64)
			return kb << 10
		}
	}
	return 0
}

// floor is the bare loop: open and read the four files of every group
// (cpu.stat, cpuacct.usage, cpu.cfs_quota_us, cpu.cfs_period_us), on one
// thread.
func (b *bench) floor(paths []string) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var files []string
	for _, p := range paths {
		files = append(files, filepath.Join(b.root.CPUDir, p, "cpu.stat"))
		if b.root.Version == 1 {
			files = append(files, filepath.Join(b.root.AcctDir, p, "cpuacct.usage"),
				filepath.Join(b.root.CPUDir, p, "cpu.cfs_quota_us"), filepath.Join(b.root.CPUDir, p, "cpu.cfs_period_us"))
		} else {
			files = append(files, filepath.Join(b.root.CPUDir, p, "cpu.max"), filepath.Join(b.root.CPUDir, p, "cpu.max.burst"), filepath.Join(b.root.CPUDir, p, "cpu.weight"))
		}
	}
	buf := make([]byte, 4096)
	pass := func() error {
		for _, f := range files {
			fd, err := unix.Open(f, unix.O_RDONLY|unix.O_CLOEXEC, 0)
			if err != nil {
				return fmt.Errorf("open %s: %w", f, err)
			}
			_, err = unix.Read(fd, buf)
			unix.Close(fd)
			if err != nil {
				return err
			}
		}
		return nil
	}
	if err := pass(); err != nil {
		return err
	}
	const n = 30
	c0, t0 := threadCPU(), time.Now()
	for range n {
		if err := pass(); err != nil {
			return err
		}
	}
	cpu, wall := (threadCPU()-c0)/n, time.Since(t0)/n
	b.floorCPU = cpu
	b.printf("### Floor: open and read 4 files per group, %d groups\n\n", len(paths))
	b.printf("A bare loop on one thread (open, read, close; %d files): **%v wall, %v CPU per pass**, %v per file.\n\n",
		len(files), wall.Round(10*time.Microsecond), cpu.Round(10*time.Microsecond), (cpu / time.Duration(len(files))).Round(10*time.Nanosecond))
	return nil
}

// threadCPU is the CPU time of the calling thread (exact, not ticks).
func threadCPU() time.Duration {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts)
	return time.Duration(ts.Nano())
}

// exporter is a running exporter process.
type exporter struct {
	cmd *exec.Cmd
	url string
	pid int
}

func freePort() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// startExporter runs the exporter binary with args and waits until it is
// ready.
func (b *bench) startExporter(bin string, args ...string) (*exporter, error) {
	addr, err := freePort()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, append([]string{"exporter", "--listen", addr}, args...)...)
	cmd.Stderr = io.Discard
	cmd.Env = append(os.Environ(), "GOMAXPROCS=2")
	if err := b.start(cmd); err != nil {
		return nil, err
	}
	e := &exporter{cmd: cmd, url: "http://" + addr, pid: cmd.Process.Pid}
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if resp, err := http.Get(e.url + "/readyz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return e, nil
			}
		}
		if time.Now().After(deadline) {
			b.kill(cmd)
			return nil, fmt.Errorf("exporter %v not ready after 20s", cmd.Args)
		}
	}
}

// client scrapes without keeping connections between scrapes idle in
// the way of the measurement.
var client = &http.Client{Transport: &http.Transport{DisableCompression: true, MaxIdleConnsPerHost: 1}}

// scrape gets /metrics (gzip: as Prometheus asks) and returns its size
// before decompression, and the parsed families when parse is set.
func (e *exporter) scrape(gz, parse bool) (int, map[string]float64, error) {
	req, _ := http.NewRequest("GET", e.url+"/metrics", nil)
	if gz {
		req.Header.Set("Accept-Encoding", "gzip")
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, nil, err
	}
	if resp.StatusCode != 200 {
		return 0, nil, fmt.Errorf("status %d: %.200s", resp.StatusCode, body)
	}
	if !parse {
		return len(body), nil, nil
	}
	var text io.Reader = bytes.NewReader(body)
	if resp.Header.Get("Content-Encoding") == "gzip" {
		if text, err = gzip.NewReader(text); err != nil {
			return 0, nil, err
		}
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(text)
	if err != nil {
		return 0, nil, err
	}
	// The unlabelled values the benchmark reads.
	vals := map[string]float64{}
	for name, f := range fams {
		for _, m := range f.GetMetric() {
			if len(m.GetLabel()) == 0 {
				vals[name] = m.GetGauge().GetValue() + m.GetCounter().GetValue() + m.GetUntyped().GetValue()
			}
		}
		if name == "cfsprobe_cgroup_info" {
			vals["groups"] = float64(len(f.GetMetric()))
			for _, m := range f.GetMetric() {
				for _, l := range m.GetLabel() {
					if l.GetName() == "pod_name" && l.GetValue() != "" {
						vals["named"]++
					}
				}
			}
		}
	}
	return len(body), vals, nil
}

// perScrape measures n back-to-back scrapes: wall time, exporter CPU
// time and allocations per scrape.
type perScrape struct {
	wall, cpu         time.Duration
	allocB, allocs    float64
	bytes, gzipBytes  int
	readTime          float64
	groups, exposed   float64
	heapInuse, rssB   float64
	backgroundPerSec  time.Duration
	cpuGzip, wallGzip time.Duration
}

func (b *bench) measureScrapes(e *exporter, n int) (perScrape, error) {
	var r perScrape
	// Background CPU (walks, sampler) over a quiet second.
	c0 := procCPU(e.pid)
	time.Sleep(b.window(2 * time.Second))
	r.backgroundPerSec = (procCPU(e.pid) - c0) * time.Second / b.window(2*time.Second)

	_, v0, err := e.scrape(false, true)
	if err != nil {
		return r, err
	}
	for _, gz := range []bool{false, true} {
		c0, t0 := procCPU(e.pid), time.Now()
		size := 0
		for range n {
			if size, _, err = e.scrape(gz, false); err != nil {
				return r, err
			}
		}
		wall := time.Since(t0)
		cpu := procCPU(e.pid) - c0 - r.backgroundPerSec*wall/time.Second
		if gz {
			r.cpuGzip, r.wallGzip, r.gzipBytes = cpu/time.Duration(n), wall/time.Duration(n), size
		} else {
			r.cpu, r.wall, r.bytes = cpu/time.Duration(n), wall/time.Duration(n), size
		}
	}
	_, v1, err := e.scrape(false, true)
	if err != nil {
		return r, err
	}
	scrapes := float64(2*n + 1)
	r.allocB = (v1["go_memstats_alloc_bytes_total"] - v0["go_memstats_alloc_bytes_total"]) / scrapes
	r.allocs = (v1["go_memstats_mallocs_total"] - v0["go_memstats_mallocs_total"]) / scrapes
	r.readTime = v1["cfsprobe_scrape_duration_seconds"]
	r.groups, r.exposed = v1["cfsprobe_groups_scanned"], v1["groups"]
	r.heapInuse, r.rssB = v1["go_memstats_heap_inuse_bytes"], float64(rss(e.pid))
	return r, nil
}

// scrapes measures one scrape of the node, without and with the sampler's
// histograms, and the CPU between scrapes at a 1 s cadence.
func (b *bench) scrapes(bin string, groups int) error {
	n := 40
	if *quickFlag {
		n = 8
	}
	b.printf("### One scrape of %d real groups (Kubernetes paths)\n\n", groups)
	b.printf("Exporter CPU from /proc/PID/stat over %d back-to-back scrapes, less its CPU when idle; allocations from its go_memstats counters.\n\n", n)
	b.printf("| sampler | exposition | wall | CPU | CPU gzip | allocated | allocations | read (cfsprobe_scrape_duration_seconds) | heap in use | RSS |\n|---|---|---|---|---|---|---|---|---|---|\n")
	for _, max := range []int{0, 1000} {
		e, err := b.startExporter(bin, "--sampler-max-groups", strconv.Itoa(max))
		if err != nil {
			return err
		}
		for range 3 {
			if _, _, err := e.scrape(true, false); err != nil {
				return err
			}
		}
		r, err := b.measureScrapes(e, n)
		b.kill(e.cmd)
		if err != nil {
			return err
		}
		label := "off (`--sampler-max-groups 0`)"
		if max > 0 {
			label = fmt.Sprintf("on, %d groups followed", groups)
			b.samplerIdle1000 = r.backgroundPerSec
		}
		b.printf("| %s | %.1f MB, %.0f KB gzipped, %d groups | %v | **%v** | %v | %.1f MB | %.0f | %v | %.1f MiB | %.1f MiB |\n",
			label, float64(r.bytes)/1e6, float64(r.gzipBytes)/1e3, int(r.exposed), r.wall.Round(100*time.Microsecond), r.cpu.Round(100*time.Microsecond),
			r.cpuGzip.Round(100*time.Microsecond), r.allocB/1e6, r.allocs, time.Duration(r.readTime*1e9).Round(10*time.Microsecond),
			r.heapInuse/(1<<20), r.rssB/(1<<20))
		if max == 0 {
			b.scrapeCPU = r.cpu
		}
	}
	b.printf("\nTarget ≤ 36 ms of CPU per scrape of 1,000 groups; the floor above: %v.\n\n", b.floorCPU.Round(10*time.Microsecond))

	// CPU at a 1 s cadence.
	b.printf("### CPU at a 1 s scrape cadence, %d groups\n\n| sampler | exporter CPU, total | of which between scrapes |\n|---|---|---|\n", groups)
	for _, max := range []int{0, 1000} {
		e, err := b.startExporter(bin, "--sampler-max-groups", strconv.Itoa(max))
		if err != nil {
			return err
		}
		if _, _, err := e.scrape(true, false); err != nil {
			return err
		}
		win := b.window(30 * time.Second)
		c0, t0 := procCPU(e.pid), time.Now()
		var inScrapes time.Duration
		tick := time.NewTicker(time.Second)
		for time.Since(t0) < win {
			<-tick.C
			s0 := procCPU(e.pid)
			if _, _, err := e.scrape(true, false); err != nil {
				tick.Stop()
				return err
			}
			inScrapes += procCPU(e.pid) - s0
		}
		tick.Stop()
		el := time.Since(t0)
		total := procCPU(e.pid) - c0
		b.kill(e.cmd)
		label := "off"
		if max > 0 {
			label = fmt.Sprintf("on (%d idle groups followed)", groups)
		}
		b.printf("| %s | %.2f %% of a CPU | %.2f %% |\n", label, pct(total, el), pct(total-inScrapes, el))
	}
	b.printf("\nTarget < 2 %% of one CPU between scrapes. (Tick-based process CPU: the split between scrapes and the rest is ±1 tick per scrape.)\n\n")
	return nil
}

func pct(cpu, wall time.Duration) float64 { return 100 * float64(cpu) / float64(wall) }

// sampler measures the per-period sampler's CPU for 100 groups: idle,
// lightly used (a program that burns 200 µs every 50 ms in each, never
// throttled), sparse (2 ms every 500 ms: quiet between bursts, read
// around each boundary once pinned) and busy (a shell loop in each,
// throttled every period).
func (b *bench) sampler(bin, parent string) error {
	sp := parent + "/sampler"
	if err := b.mkgroup(sp, 0); err != nil {
		return err
	}
	var groups []string
	for i := range 100 {
		g := fmt.Sprintf("%s/s%03d", sp, i)
		if err := b.mkgroup(g, 20*time.Millisecond); err != nil {
			return err
		}
		groups = append(groups, g)
	}
	// --cgroup-root cannot narrow the walk to these: a root of their own.
	root, err := b.bindRoot(sp)
	if err != nil {
		return err
	}
	defer b.unbindRoot()
	win := b.window(20 * time.Second)
	measure := func(max int) (time.Duration, float64, error) {
		e, err := b.startExporter(bin, "--cgroup-root", root, "--sampler-max-groups", strconv.Itoa(max))
		if err != nil {
			return 0, 0, err
		}
		defer b.kill(e.cmd)
		time.Sleep(2 * time.Second) // the grids are pinned
		_, v0, err := e.scrape(false, true)
		if err != nil {
			return 0, 0, err
		}
		c0, t0 := procCPU(e.pid), time.Now()
		time.Sleep(win)
		cpu, el := procCPU(e.pid)-c0, time.Since(t0)
		_, v1, err := e.scrape(false, true)
		if err != nil {
			return 0, 0, err
		}
		return cpu * time.Second / el, v1["cfsprobe_sampler_overruns_total"] - v0["cfsprobe_sampler_overruns_total"], nil
	}
	// run starts cmd in every group (quota per 100 ms), measures and
	// stops them.
	run := func(label string, quota time.Duration, cmd func() *exec.Cmd) error {
		var procs []*exec.Cmd
		defer func() {
			for _, p := range procs {
				_ = p.Process.Kill()
				_ = p.Wait()
			}
			b.mu.Lock()
			b.procs = slices.DeleteFunc(b.procs, func(c *exec.Cmd) bool { return slices.Contains(procs, c) })
			b.mu.Unlock()
		}()
		for _, g := range groups {
			us := strconv.FormatInt(quota.Microseconds(), 10)
			if b.root.Version == 2 {
				err = cgroup.WriteFile(filepath.Join(b.root.CPUDir, g, "cpu.max"), us+" 100000")
			} else {
				err = cgroup.WriteFile(filepath.Join(b.root.CPUDir, g, "cpu.cfs_quota_us"), us)
			}
			if err != nil {
				return err
			}
			if cmd == nil {
				continue
			}
			c := cmd()
			if err := b.start(c); err != nil {
				return err
			}
			procs = append(procs, c)
			for _, h := range b.hier {
				if err := cgroup.WriteFile(filepath.Join(h, g, "cgroup.procs"), strconv.Itoa(c.Process.Pid)); err != nil {
					return err
				}
			}
		}
		time.Sleep(time.Second)
		off, _, err := measure(0)
		if err != nil {
			return err
		}
		on, over, err := measure(100)
		if err != nil {
			return err
		}
		b.printf("| %s | %.2f %% | %.2f %% | **%.2f %%** of a CPU | %.0f |\n", label, pct(off, time.Second), pct(on, time.Second), pct(on-off, time.Second), over)
		return nil
	}
	b.printf("### Per-period sampler, 100 groups\n\nExporter CPU over %v without scrapes, with the sampler off (`--sampler-max-groups 0`) and following the 100 groups.\n\n", win)
	b.printf("| groups | sampler off | sampler on | the sampler's share | overruns |\n|---|---|---|---|---|\n")
	if err := run("100 idle", 20*time.Millisecond, nil); err != nil {
		return err
	}
	light := func() *exec.Cmd {
		return exec.Command(bin, "__workload", "periodic", "--burn", "200us", "--sleep", "50ms", "--iterations", "100000000", "--quiet")
	}
	if err := run("100 lightly used (200 µs every 50 ms, quota 20 ms)", 20*time.Millisecond, light); err != nil {
		return err
	}
	sparse := func() *exec.Cmd {
		return exec.Command(bin, "__workload", "periodic", "--burn", "2ms", "--sleep", "500ms", "--iterations", "100000000", "--quiet")
	}
	if err := run("100 sparse (2 ms every 500 ms, quota 20 ms: quiet between bursts)", 20*time.Millisecond, sparse); err != nil {
		return err
	}
	busy := func() *exec.Cmd { return exec.Command("/bin/sh", "-c", "while :; do :; done") }
	if err := run("100 busy (a shell loop in each, quota 1 ms: throttled every period)", time.Millisecond, busy); err != nil {
		return err
	}
	if b.samplerIdle1000 > 0 {
		b.printf("| 1,000 idle (the node above) | | | %.2f %% (with walks) | |\n", pct(b.samplerIdle1000, time.Second))
	}
	b.printf("\nTarget < 2 %% of one CPU for 100 groups. The sampler wakes every 10 ms (20 ms once every group's boundaries are pinned down) and reads a group in every pass until then, then in the passes just before and after each boundary (and half-way, when it was throttled lately; on v1 cpu.stat after the boundary only, cpuacct.usage in each); a quiet group (no period counted) whose boundaries are pinned just before each boundary (its usage alone) and just after it (cpu.stat alone), one whose boundaries are not pinned once per period for 10 s after it last ran, then backing off to once a second (cpu.stat only).\n\n")
	return nil
}

// bindRoot makes a cgroup root that shows only the subtree rel: a tmpfs
// with the hierarchies bind-mounted from rel, named as in /sys/fs/cgroup.
func (b *bench) bindRoot(rel string) (string, error) {
	root := filepath.Join(b.tmp, "root")
	if err := os.MkdirAll(root, 0o755); err != nil {
		return "", err
	}
	bind := func(src, dst string) error {
		if err := os.MkdirAll(dst, 0o755); err != nil {
			return err
		}
		if err := unix.Mount(src, dst, "", unix.MS_BIND, ""); err != nil {
			return fmt.Errorf("bind %s on %s: %w", src, dst, err)
		}
		b.mounts = append(b.mounts, dst)
		return nil
	}
	if b.root.Version == 2 {
		// A v2 group has cgroup.controllers like the root.
		return root, bind(filepath.Join(b.root.CPUDir, rel), root)
	}
	for _, h := range b.hier {
		if err := bind(filepath.Join(h, rel), filepath.Join(root, filepath.Base(h))); err != nil {
			return "", err
		}
	}
	return root, nil
}

func (b *bench) unbindRoot() error {
	for len(b.mounts) > 0 {
		m := b.mounts[len(b.mounts)-1]
		if err := unix.Unmount(m, 0); err != nil {
			return fmt.Errorf("unmount %s: %w", m, err)
		}
		b.mounts = b.mounts[:len(b.mounts)-1]
	}
	return nil
}

// memory measures the exporter's memory with the node's groups, and while
// churn groups come and go (20 alive at a time) during scrapes.
func (b *bench) memory(bin, parent string) error {
	e, err := b.startExporter(bin, "--scan-interval", "1s")
	if err != nil {
		return err
	}
	defer b.kill(e.cmd)
	var scrapes, failed atomic.Int64
	var firstErr atomic.Value
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			case <-time.After(200 * time.Millisecond):
			}
			_, v, err := e.scrape(true, true)
			if err == nil && v["cfsprobe_groups_scanned"] == 0 {
				err = errors.New("no groups")
			}
			scrapes.Add(1)
			if err != nil {
				failed.Add(1)
				firstErr.CompareAndSwap(nil, err)
			}
		}
	}()
	stopScrapes := sync.OnceFunc(func() { close(stop); wg.Wait() })
	defer stopScrapes()

	heap := func() (float64, float64, error) {
		_, v, err := e.scrape(false, true)
		return v["go_memstats_heap_inuse_bytes"], float64(rss(e.pid)), err
	}
	time.Sleep(2 * time.Second)
	h0, r0, err := heap()
	if err != nil {
		return err
	}
	cp := parent + "/churn"
	if err := b.mkgroup(cp, 0); err != nil {
		return err
	}
	const window = 20
	type point struct {
		n          int
		heap, rssB float64
	}
	var points []point
	maxRSS := r0
	t0 := time.Now()
	for i := 0; i < *churnFlag; i++ {
		if err := b.mkgroup(fmt.Sprintf("%s/g%05d", cp, i), time.Duration(10+i%50)*time.Millisecond); err != nil {
			return err
		}
		if i >= window {
			if err := b.rmgroup(fmt.Sprintf("%s/g%05d", cp, i-window)); err != nil {
				return err
			}
		}
		// Slow enough that walks (every second) and scrapes see the
		// groups come and go: about 2,000 a second.
		if i%100 == 99 {
			time.Sleep(50 * time.Millisecond)
			maxRSS = max(maxRSS, float64(rss(e.pid)))
		}
		if i == 999 || i == *churnFlag-1 {
			time.Sleep(1500 * time.Millisecond) // a walk
			h, r, err := heap()
			if err != nil {
				return err
			}
			points = append(points, point{i + 1, h, r})
		}
	}
	churnTime := time.Since(t0)
	stopScrapes()
	b.printf("### Memory, %d groups, while %d groups come and go (20 alive at a time) during scrapes every 200 ms\n\n", *groupsFlag, *churnFlag)
	b.printf("| when | heap in use | RSS |\n|---|---|---|\n| before the churn | %.1f MiB | %.1f MiB |\n", h0/(1<<20), r0/(1<<20))
	for _, p := range points {
		b.printf("| after %d groups came and went | %.1f MiB | %.1f MiB |\n", p.n, p.heap/(1<<20), p.rssB/(1<<20))
	}
	b.printf("| most RSS during the churn | | %.1f MiB |\n\n", maxRSS/(1<<20))
	b.printf("%d scrapes during %v of churn, **%d failed**", scrapes.Load(), churnTime.Round(time.Second), failed.Load())
	if v := firstErr.Load(); v != nil {
		b.printf(" (first: %v)", v)
	}
	b.printf(". Target < 50 MiB, flat, no failed scrape.\n\n")
	return nil
}

// fixtures scrapes generated trees shaped like busy Kubernetes nodes,
// 1,000 limited groups of long paths, v1 (cpu and cpuacct apart) and v2,
// on disk.
func (b *bench) fixtures(bin string) error {
	b.printf("### Generated Kubernetes node trees on disk, %d limited groups\n\n| layout | exposition | wall | CPU | CPU gzip | allocated |\n|---|---|---|---|---|---|\n", *groupsFlag)
	for _, layout := range []string{"v1", "v2"} {
		root, err := testenv.WriteNode(filepath.Join(b.tmp, "fixture"), layout, *groupsFlag)
		if err != nil {
			return err
		}
		e, err := b.startExporter(bin, "--cgroup-root", root)
		if err != nil {
			return err
		}
		n := 40
		if *quickFlag {
			n = 8
		}
		r, err := b.measureScrapes(e, n)
		b.kill(e.cmd)
		if err != nil {
			return err
		}
		b.printf("| %s | %.1f MB, %.0f KB gzipped | %v | **%v** | %v | %.1f MB |\n", layout, float64(r.bytes)/1e6, float64(r.gzipBytes)/1e3,
			r.wall.Round(100*time.Microsecond), r.cpu.Round(100*time.Microsecond), r.cpuGzip.Round(100*time.Microsecond), r.allocB/1e6)
	}
	b.printf("\nThe files are on ext4, not cgroupfs, and no sampler runs (nothing moves): these isolate what the paths' length costs the exposition.\n")
	return nil
}
