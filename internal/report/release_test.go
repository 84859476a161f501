package report

import (
	"bytes"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/cfsprobe/cfsprobe/internal/golden"
)

// Traces written by release 74e6abc, before the spec's params were typed
// (internal/trace/testdata/release-74e6abc/README.md): loose runs of every
// workload, and the runs of a bursty-limits suite. The reports of this
// version read and render them.
const (
	releaseRunsDir  = "../trace/testdata/release-74e6abc"
	releaseSuiteDir = "../trace/testdata/release-74e6abc/suite-bursty-limits"
)

func releaseCases(t *testing.T) map[string][]Named {
	return map[string][]Named{
		"release-74e6abc-runs":  loadDir(t, releaseRunsDir),
		"release-74e6abc-suite": loadDir(t, releaseSuiteDir),
	}
}

// Text, Markdown and JSON of the release's traces, against golden files;
// text also of each run alone (the single-run summary).
func TestReleaseTracesGolden(t *testing.T) {
	for name, runs := range releaseCases(t) {
		t.Run(name, func(t *testing.T) {
			for _, f := range []struct {
				format Format
				ext    string
			}{{FormatText, ".txt"}, {FormatMarkdown, ".md"}, {FormatJSON, ".json"}} {
				var b bytes.Buffer
				if err := Write(&b, f.format, "", runs); err != nil {
					t.Fatal(err)
				}
				golden.Check(t, filepath.Join("testdata", "golden", name+f.ext), b.Bytes())
			}
		})
	}
	var single bytes.Buffer
	for _, r := range loadDir(t, releaseRunsDir) {
		single.WriteString("== " + r.Name + "\n")
		if err := Text(&single, []Named{r}); err != nil {
			t.Fatal(err)
		}
	}
	golden.Check(t, filepath.Join("testdata", "golden", "release-74e6abc-single.txt"), single.Bytes())
}

// The HTML report of the release's traces draws every run's timeline and
// latencies whole, and compares the runs.
func TestReleaseTracesHTML(t *testing.T) {
	for name, runs := range releaseCases(t) {
		t.Run(name, func(t *testing.T) {
			page := renderHTML(t, runs)
			charts := svgs(t, page)
			if charts["compare"] == nil {
				t.Error("no comparison of the runs")
			}
			for i, r := range runs {
				id := "run-" + strconv.Itoa(i+1)
				checkTimeline(t, charts[id+"-timeline"], r.Trace)
				if r.Trace.Latency == nil {
					if charts[id+"-latency"] != nil {
						t.Errorf("%s: a latency histogram for a run without latencies", r.Name)
					}
				} else {
					checkLatency(t, charts[id+"-latency"], r.Trace)
				}
				if !strings.Contains(page, r.Name) {
					t.Errorf("%s is not named in the report", r.Name)
				}
			}
			noNetwork(t, page)
		})
	}
	// A run alone: its own page, without a comparison.
	one := loadFiles(t, filepath.Join(releaseRunsDir, "bursty-cpus0.2.json"))
	if charts := svgs(t, renderHTML(t, one)); charts["compare"] != nil || charts["run-1-timeline"] == nil {
		t.Errorf("one run: charts %v", len(charts))
	}
}
