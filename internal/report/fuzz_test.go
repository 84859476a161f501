package report

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/cfsprobe/cfsprobe/internal/trace"
)

// FuzzReport: whatever a trace file holds, once it decodes, every format
// renders it without panicking or hanging, and the HTML's SVG stays
// well-formed.
func FuzzReport(f *testing.F) {
	paths, _ := filepath.Glob("testdata/*/*.json")
	for _, p := range paths {
		if b, err := os.ReadFile(p); err == nil && len(b) < 40_000 {
			f.Add(b)
		}
	}
	f.Add([]byte(`{"schema":"cfsprobe.trace/v1","limits":{"period_us":0,"quota_us":5},"periods":[{"start_ns":-9223372036854775808,"end_ns":9223372036854775807,"usage_ns":-5,"throttled":true}]}`))
	f.Add([]byte(`{"schema":"cfsprobe.trace/v1","limits":{"period_us":100000},"latency":{"count":3,"buckets":[[0,0,-4],[9223372036854775807,9223372036854775807,7]]},"summary":{"latency_ns":{"p50":-1,"max":9223372036854775807}},"throughput":{"bucket_ns":1,"counts":[1,2,3]}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		tr, err := trace.Read(bytes.NewReader(data))
		if err != nil {
			return
		}
		runs := []Named{{Name: "a", Trace: tr}, {Name: "b", Trace: tr}}
		for _, fm := range Formats {
			var b bytes.Buffer
			if err := Write(&b, fm, "", runs); err != nil {
				t.Fatalf("%s: %v", fm, err)
			}
			if fm == FormatHTML {
				svgs(t, b.String())
			}
		}
	})
}
