package exporter

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"github.com/cfsprobe/cfsprobe/internal/monitor"
)

// genNode writes the cgroup root of a busy Kubernetes node (systemd
// driver, containerd) to dir: pods of three containers, each pod and its
// containers limited, until there are n limited groups; counters as a
// real node's. layout is "v1" (cpu and cpuacct apart) or "v2".
func genNode(tb testing.TB, dir, layout string, n int) string {
	tb.Helper()
	root := filepath.Join(dir, layout)
	write := func(p, data string) {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			tb.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			tb.Fatal(err)
		}
	}
	cpuDir, acctDir := root, root
	if layout == "v1" {
		cpuDir, acctDir = filepath.Join(root, "cpu"), filepath.Join(root, "cpuacct")
		write(filepath.Join(cpuDir, "cpu.cfs_quota_us"), "-1\n")
		write(filepath.Join(cpuDir, "cpu.cfs_period_us"), "100000\n")
		write(filepath.Join(cpuDir, "cpu.stat"), "nr_periods 0\nnr_throttled 0\nthrottled_time 0\n")
		write(filepath.Join(acctDir, "cpuacct.usage"), "1\n")
	} else {
		write(filepath.Join(root, "cgroup.controllers"), "cpuset cpu io memory pids\n")
		write(filepath.Join(root, "cpu.stat"), "usage_usec 1\n")
	}
	group := func(path string, quota int, k int) {
		c := filepath.Join(cpuDir, path)
		if layout == "v1" {
			write(filepath.Join(c, "cpu.cfs_quota_us"), fmt.Sprintf("%d\n", quota))
			write(filepath.Join(c, "cpu.cfs_period_us"), "100000\n")
			write(filepath.Join(c, "cpu.cfs_burst_us"), "0\n")
			write(filepath.Join(c, "cpu.stat"), fmt.Sprintf("nr_periods %d\nnr_throttled %d\nthrottled_time %d\nnr_bursts 0\nburst_time 0\n", 400000+k, 12000+k, 98765432100+int64(k)))
			write(filepath.Join(acctDir, path, "cpuacct.usage"), fmt.Sprintf("%d\n", 1234567890123+int64(k)))
			return
		}
		max := "max 100000\n"
		if quota > 0 {
			max = fmt.Sprintf("%d 100000\n", quota)
		}
		write(filepath.Join(c, "cpu.max"), max)
		write(filepath.Join(c, "cpu.max.burst"), "0\n")
		write(filepath.Join(c, "cpu.stat"), fmt.Sprintf("usage_usec %d\nuser_usec 1\nsystem_usec 1\ncore_sched.force_idle_usec 0\nnr_periods %d\nnr_throttled %d\nthrottled_usec %d\nnr_bursts 0\nburst_usec 0\n",
			1234567890+k, 400000+k, 12000+k, 98765432+k))
	}
	group("/kubepods.slice", -1, 0)
	group("/kubepods.slice/kubepods-burstable.slice", -1, 0)
	limited := 0
	for i := 0; limited < n; i++ {
		uid := fmt.Sprintf("%08x_1b2c_4d3e_8f4a_%012x", i, i)
		pod := fmt.Sprintf("/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod%s.slice", uid)
		group(pod, 300000, i)
		limited++
		for j := 0; j < 3 && limited < n; j++ {
			group(fmt.Sprintf("%s/cri-containerd-%056x%08x.scope", pod, i, j), 100000, i*3+j)
			limited++
		}
	}
	return root
}

// discardWriter is a ResponseWriter that counts the body and drops it,
// as a network connection costs the exporter nothing more.
type discardWriter struct {
	h    http.Header
	code int
	n    int
}

func (w *discardWriter) Header() http.Header { return w.h }
func (w *discardWriter) WriteHeader(code int) {
	if w.code == 0 {
		w.code = code
	}
}
func (w *discardWriter) Write(b []byte) (int, error) {
	w.WriteHeader(200)
	w.n += len(b)
	return len(b), nil
}

// BenchmarkScrape is one scrape of /metrics (no compression) of a busy
// node's tree of 1,000 limited groups, every one followed by the sampler
// (fake figures): reading the counters, building the metrics, encoding
// them. The tree is on the temporary directory's file system, not
// cgroupfs: bench/exporter measures real groups.
func BenchmarkScrape(b *testing.B) {
	for _, layout := range []string{"v1", "v2"} {
		b.Run(layout, func(b *testing.B) {
			r, err := monitor.OpenRoot(genNode(b, b.TempDir(), layout, 1000))
			if err != nil {
				b.Fatal(err)
			}
			e := New(Options{Root: r, Host: testHost(r), Version: "bench", NoRuntimeMetrics: true})
			if err := e.Rescan(); err != nil {
				b.Fatal(err)
			}
			defer e.scanner.Close()
			fake := newFakePeriods(e.scanner)
			ts, _ := e.scanner.Targets(nil)
			fake.groups = fake.groups[:0]
			for _, tg := range ts { // every group, not every other
				h := newFakePeriods(e.scanner).groups[0].PeriodHistograms
				fake.groups = append(fake.groups, monitor.GroupPeriods{Path: tg.Group.Path, PeriodHistograms: h})
			}
			swapPeriods(e, fake)
			h := e.Handler()
			size := 0
			b.ReportAllocs()
			req := httptest.NewRequest("GET", "/metrics", nil)
			for b.Loop() {
				w := &discardWriter{h: http.Header{}}
				h.ServeHTTP(w, req)
				if w.code != 200 {
					b.Fatal(w.code)
				}
				size = w.n
			}
			b.ReportMetric(float64(size), "bytes/scrape")
			b.ReportMetric(float64(len(ts)), "groups")
		})
	}
}
