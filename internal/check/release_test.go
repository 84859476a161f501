package check

import (
	"bytes"
	"path/filepath"
	"testing"
	"time"

	"github.com/cfsprobe/cfsprobe/internal/golden"
)

// releaseDir holds traces written by release 74e6abc, before the spec's
// params were typed (internal/trace/testdata/release-74e6abc/README.md).
const releaseDir = "../trace/testdata/release-74e6abc"

// cfsprobe check --from-traces reads the release's traces: each run's
// workload is known again from its params (threads, what an operation
// should take, the description), and the text output is as golden.
func TestAnalyzeReleaseTraces(t *testing.T) {
	r, traces, err := AnalyzeFiles([]string{releaseDir, filepath.Join(releaseDir, "suite-bursty-limits")})
	if err != nil {
		t.Fatal(err)
	}
	if len(traces) != 9 || len(r.Runs) != 9 {
		t.Fatalf("%d traces, %d runs, want 9", len(traces), len(r.Runs))
	}
	ms := int64(time.Millisecond)
	want := map[string]struct {
		threads     int
		expectedOp  int64 // -1: the median of what was measured
		description string
		judged      bool
	}{
		"bursty-cpus0.2":          {1, 50 * ms, "1 thread: 50ms bursts, idle 50ms, for 2s", true},
		"bursty-unlimited":        {1, 50 * ms, "1 thread: 50ms bursts, idle 50ms, for 1s", false},
		"command-sleep-cpus0.5":   {0, 0, "sleep 1", true},
		"parallel-threads2-cpus1": {2, -1, "2 threads: CPU events for 2s", true},
		"periodic-cpus0.2":        {1, 5 * ms, "1 thread: 5ms burns, sleep 100ms, 10 times", true},
		"A-unlimited":             {1, 50 * ms, "1 thread: 50ms bursts, idle 50ms, for 10s", false},
		"B-moderate":              {1, 50 * ms, "1 thread: 50ms bursts, idle 50ms, for 10s", true},
		"C-aggressive":            {1, 50 * ms, "1 thread: 50ms bursts, idle 50ms, for 10s", true},
		"D-control":               {1, 50 * ms, "1 thread: 50ms bursts, idle 50ms, for 10s", true},
	}
	for _, run := range r.Runs {
		w, ok := want[run.Name]
		if !ok {
			t.Errorf("unexpected run %s", run.Name)
			continue
		}
		if run.Threads != w.threads || run.Description != w.description || run.Judged != w.judged {
			t.Errorf("%s: threads %d, %q, judged %v; want %d, %q, %v", run.Name, run.Threads, run.Description, run.Judged, w.threads, w.description, w.judged)
		}
		switch {
		case w.expectedOp >= 0 && run.ExpectedOpNs != w.expectedOp:
			t.Errorf("%s: expected op %dns, want %dns", run.Name, run.ExpectedOpNs, w.expectedOp)
		case w.expectedOp < 0 && (run.ExpectedOpNs < run.P50OpNs*9/10 || run.ExpectedOpNs > run.P50OpNs*11/10):
			// The median of every event, the warm-up's too.
			t.Errorf("%s: expected op %dns, want about the median %dns", run.Name, run.ExpectedOpNs, run.P50OpNs)
		}
	}
	var buf bytes.Buffer
	if err := WriteText(&buf, &r); err != nil {
		t.Fatal(err)
	}
	golden.Check(t, filepath.Join("testdata", "golden", "release-74e6abc.txt"), buf.Bytes())
}
