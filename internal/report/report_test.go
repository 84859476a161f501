package report

import (
	"bytes"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/cfsprobe/cfsprobe/internal/golden"
	"github.com/cfsprobe/cfsprobe/internal/trace"
)

// The fixtures are real runs on a 2-CPU machine with cgroup v1 (see
// testdata/README.md): the four runs of a bursty-limits suite, with
// scenario metadata added by hand, and loose runs of the other workloads.
const (
	suiteDir = "testdata/suite"
	runsDir  = "testdata/runs"
)

// loadDir reads every trace of a fixture directory, named like the report
// command names them (file name without .json), in name order.
func loadDir(t testing.TB, dir string) []Named {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no traces in %s (%v)", dir, err)
	}
	sort.Strings(paths)
	return loadFiles(t, paths...)
}

func loadFiles(t testing.TB, paths ...string) []Named {
	t.Helper()
	var out []Named
	for _, p := range paths {
		tr, err := trace.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, Named{Name: strings.TrimSuffix(filepath.Base(p), ".json"), Trace: tr})
	}
	return out
}

// checkGolden compares got with testdata/golden/name (-update rewrites
// it).
func checkGolden(t *testing.T, name string, got []byte) {
	t.Helper()
	golden.Check(t, filepath.Join("testdata", "golden", name), got)
}

// goldenCases are the sets of runs every format is checked on.
func goldenCases(t *testing.T) map[string][]Named {
	return map[string][]Named{
		"suite":  loadDir(t, suiteDir),
		"runs":   loadDir(t, runsDir),
		"single": loadFiles(t, filepath.Join(runsDir, "parallel-cpus1.json")),
	}
}

func TestMarkdownGolden(t *testing.T) {
	for name, runs := range goldenCases(t) {
		t.Run(name, func(t *testing.T) {
			var b bytes.Buffer
			if err := Markdown(&b, "", runs); err != nil {
				t.Fatal(err)
			}
			checkGolden(t, name+".md", b.Bytes())
		})
	}
}

func TestJSONGolden(t *testing.T) {
	for name, runs := range goldenCases(t) {
		t.Run(name, func(t *testing.T) {
			var b bytes.Buffer
			if err := JSON(&b, runs); err != nil {
				t.Fatal(err)
			}
			checkGolden(t, name+".json", b.Bytes())
		})
	}
}

func TestTextGolden(t *testing.T) {
	for name, runs := range goldenCases(t) {
		t.Run(name, func(t *testing.T) {
			var b bytes.Buffer
			if err := Text(&b, runs); err != nil {
				t.Fatal(err)
			}
			checkGolden(t, name+".txt", b.Bytes())
		})
	}
}

// Reports are pure: the same runs give the same bytes.
func TestDeterministic(t *testing.T) {
	runs := loadDir(t, suiteDir)
	for _, f := range Formats {
		var a, b bytes.Buffer
		if err := Write(&a, f, "t", runs); err != nil {
			t.Fatal(err)
		}
		if err := Write(&b, f, "t", runs); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(a.Bytes(), b.Bytes()) {
			t.Errorf("%s: two renderings differ", f)
		}
	}
}

func TestParseFormat(t *testing.T) {
	for _, c := range []struct {
		name, out string
		want      Format
		err       bool
	}{
		{"", "", FormatText, false},
		{"", "report.html", FormatHTML, false},
		{"", "REPORT.HTM", FormatHTML, false},
		{"", "report.md", FormatText, false},
		{"markdown", "report.html", FormatMarkdown, false},
		{"json", "", FormatJSON, false},
		{"html", "", FormatHTML, false},
		{"pdf", "", "", true},
	} {
		got, err := ParseFormat(c.name, c.out)
		if (err != nil) != c.err || got != c.want {
			t.Errorf("ParseFormat(%q, %q) = %q, %v; want %q, error %v", c.name, c.out, got, err, c.want, c.err)
		}
	}
}

func TestNoRuns(t *testing.T) {
	for _, f := range []Format{FormatText, FormatMarkdown, FormatHTML} {
		if err := Write(&bytes.Buffer{}, f, "", nil); err == nil {
			t.Errorf("%s of no runs: no error", f)
		}
	}
}

// An expectation's measured value is shown in its unit: a duration as one
// (suite metrics are named latency_p99, not ..._ns), a ratio as a number.
func TestExpectValue(t *testing.T) {
	for _, tc := range []struct {
		e    trace.Expectation
		want string
	}{
		{trace.Expectation{Metric: "latency_p99", Value: 5.01e6, Unit: "ns"}, "5.01ms"},
		{trace.Expectation{Metric: "throttled_ratio", Value: 0.25}, "0.25"},
		{trace.Expectation{Metric: "latency_p999", Value: 0.91, Relative: "A-unlimited"}, "0.91× A-unlimited"},
	} {
		if got := expectValue(tc.e); got != tc.want {
			t.Errorf("expectValue(%+v) = %q, want %q", tc.e, got, tc.want)
		}
	}
}

// The summary says how busy other work kept the run's CPUs, how much of
// it was the hypervisor's steal time, and whether that disturbed the
// measurement.
func TestSummaryOthers(t *testing.T) {
	others, stolen := 0.17, 0.15
	tr := &trace.Trace{Spec: trace.Spec{Workload: "bursty"}}
	tr.Summary.OthersBusyCPUs = &others
	var b bytes.Buffer
	Summary(&b, tr)
	if !strings.Contains(b.String(), "others     0.17 CPUs of other work on the CPUs the run could use: a disturbed measurement") || strings.Contains(b.String(), "steal") {
		t.Errorf("without steal:\n%s", b.String())
	}
	tr.Summary.StolenCPUs = &stolen
	b.Reset()
	Summary(&b, tr)
	if !strings.Contains(b.String(), "0.17 CPUs of other work on the CPUs the run could use (0.15 of them the hypervisor's steal time): a disturbed") {
		t.Errorf("with steal:\n%s", b.String())
	}
}
