package exporter

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/cfsprobe/cfsprobe/internal/monitor"
	"github.com/cfsprobe/cfsprobe/internal/testenv"
)

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
			root, err := testenv.WriteNode(b.TempDir(), layout, 1000)
			if err != nil {
				b.Fatal(err)
			}
			r, err := monitor.OpenRoot(root)
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
