package check

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/cfsprobe/cfsprobe/internal/trace"
	"github.com/cfsprobe/cfsprobe/internal/workload"
)

func TestLoadTracesErrors(t *testing.T) {
	dir := t.TempDir()
	notTrace := filepath.Join(dir, "not-a-trace.json")
	if err := os.WriteFile(notTrace, []byte(`{"schema": "something/v9"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	empty := t.TempDir()
	// A simulated trace, alone and in a directory of real ones.
	tr, err := trace.ReadFile("testdata/fixed-6.18/spread.json")
	if err != nil {
		t.Fatal(err)
	}
	tr.Spec.Simulated = &trace.Simulated{Era: "4.18", HostCPUs: 2}
	simulated := filepath.Join(dir, "simulated.json")
	mixed := t.TempDir()
	for _, p := range []string{simulated, filepath.Join(mixed, "spread-simulated.json")} {
		if err := tr.WriteFile(p); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{"seed-1000ms.json", "seed-250ms.json"} {
		b, err := os.ReadFile(filepath.Join("testdata/fixed-6.18", f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(mixed, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		name  string
		paths []string
		want  string
	}{
		{"missing file", []string{filepath.Join(dir, "nosuch.json")}, "no such file"},
		{"not a trace", []string{notTrace}, "something/v9"},
		{"empty directory", []string{empty}, "holds no trace"},
		{"nothing", nil, "no trace given"},
		{"two hosts", []string{"testdata/seed000/seed-1000ms.json", "testdata/stranded/spread.json"}, "check one host at a time"},
		{"simulated", []string{simulated}, "simulated.json is a simulated trace (cfsprobe simulate, kernel era 4.18)"},
		{"simulated among real ones", []string{mixed}, "spread-simulated.json is a simulated trace"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, _, err := AnalyzeFiles(c.paths)
			var ie *InputError
			if !errors.As(err, &ie) || !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %v, want an InputError containing %q", err, c.want)
			}
		})
	}
}

// TestSaveAndReload: what a check saves with --out judges the same again,
// the Result file in the directory is not taken for a trace, and runs
// keep their names.
func TestSaveAndReload(t *testing.T) {
	traces, sources, err := LoadTraces([]string{"testdata/fixed-6.18"})
	if err != nil {
		t.Fatal(err)
	}
	host, _ := HostOf(traces, sources)
	r := Analyze(traces, host)
	dir := filepath.Join(t.TempDir(), "new", "out")
	if err := CheckOutDir(dir); err != nil {
		t.Fatal(err)
	}
	if err := Save(dir, &r, traces); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"seed-1000ms.json", "seed-250ms.json", "spread.json", ResultFile} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Error(err)
		}
	}
	back, _, err := AnalyzeFiles([]string{dir})
	if err != nil {
		t.Fatal(err)
	}
	if back.Verdict != r.Verdict || !reflect.DeepEqual(back.Evidence, r.Evidence) || len(back.Runs) != 3 {
		t.Errorf("reloaded: verdict %q evidence %+v, want %q %+v", back.Verdict, back.Evidence, r.Verdict, r.Evidence)
	}
	for i, run := range back.Runs {
		if run.Name != r.Runs[i].Name || run.Source == "" {
			t.Errorf("run %d: name %q source %q, want %q and a file", i, run.Name, run.Source, r.Runs[i].Name)
		}
	}
}

// TestTraceFromRunNamedByFile: traces of cfsprobe run have no scenario;
// their file names them.
func TestTraceFromRunNamedByFile(t *testing.T) {
	r, _, err := AnalyzeFiles([]string{"testdata/over-quota-6.18/bursty.json"})
	if err != nil {
		t.Fatal(err)
	}
	if r.Runs[0].Name != "bursty" || r.Runs[0].Source != "testdata/over-quota-6.18/bursty.json" {
		t.Errorf("run %q from %q", r.Runs[0].Name, r.Runs[0].Source)
	}
}

func TestCheckOutDir(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		dir  string
		want string // "" for no error
	}{
		{dir, ""},
		{filepath.Join(dir, "a", "b"), ""},
		{file, "is a file"},
		{filepath.Join(file, "sub"), "not a directory"},
	} {
		err := CheckOutDir(c.dir)
		var ie *InputError
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v", c.dir, err)
		case c.want != "" && (!errors.As(err, &ie) || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: error %v, want one containing %q", c.dir, err, c.want)
		}
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("CheckOutDir created something: %v", entries)
	}
}

// TestScenarios: every run is a valid workload, fits the time budget, and
// the spread run uses about 20 % of a quota of 1 ms per CPU, at least two
// slices.
func TestScenarios(t *testing.T) {
	for _, c := range []struct {
		cpus    int
		sliceUs int64
		quota   time.Duration
	}{
		{1, 5000, 10 * time.Millisecond},
		{2, 5000, 10 * time.Millisecond},
		{2, 0, 10 * time.Millisecond}, // unknown slice: the default
		{2, 8000, 16 * time.Millisecond},
		{16, 5000, 16 * time.Millisecond},
		{88, 5000, 88 * time.Millisecond},
		{512, 5000, 512 * time.Millisecond},
	} {
		sc := Scenarios(c.cpus, c.sliceUs)
		if len(sc) != 3 {
			t.Fatalf("%d scenarios, want 3", len(sc))
		}
		names := map[string]bool{}
		for _, s := range sc {
			names[s.Name] = true
			w, err := workload.Parse(s.Workload, s.Args)
			if err != nil {
				t.Fatalf("%d CPUs, %s: %v", c.cpus, s.Name, err)
			}
			if err := s.Limits.Validate(); err != nil {
				t.Fatalf("%d CPUs, %s: %v", c.cpus, s.Name, err)
			}
			wall := w.Length()
			if b := w.Params().Bursty; b != nil {
				use := float64(b.On) * float64(b.Threads) * float64(Period) / float64(b.On+b.Off) / float64(s.Limits.Quota)
				if s.Limits.Quota != c.quota || use < 0.15 || use > 0.25 {
					t.Errorf("%d CPUs: spread quota %v uses %.0f%%; want %v and about 20%%", c.cpus, s.Limits.Quota, 100*use, c.quota)
				}
				if b.Threads != c.cpus {
					t.Errorf("%d CPUs: %d threads", c.cpus, b.Threads)
				}
			}
			// The runs go side by side: each must leave room in the 30 s
			// for starting and for the last period to close.
			if wall < 12*time.Second || wall > 17*time.Second {
				t.Errorf("%d CPUs, %s: runs %v, want 12 to 17s", c.cpus, s.Name, wall)
			}
		}
		if len(names) != 3 {
			t.Errorf("scenario names are not unique: %v", names)
		}
	}
}

// TestSpreadScenarioModel backs the spread run's parameters with the model
// of fixtures_test.go: on a kernel that expires per-CPU runtime (4.18 to
// 5.3) the group is throttled far below its quota from about 10 CPUs on;
// on a kernel with the fix it never is. Below 10 CPUs the defect cannot
// waste enough quota to show (nor much to matter): docs/check.md says so.
func TestSpreadScenarioModel(t *testing.T) {
	for _, cpus := range []int{2, 4, 8, 11, 16, 32, 64, 128} {
		for _, expire := range []bool{false, true} {
			sc := Scenarios(cpus, 5000)[2]
			c, ops, end := strandedSim(sc, cpus, int64(runFor), 37*msNs, rng(0x2545f4914f6cdd1d+uint64(cpus)), expire)
			q := int64(sc.Limits.Quota / time.Microsecond)
			tr := finish(&trace.Trace{
				Schema: trace.Schema, Spec: specOf(sc.Workload, sc.Args, ""),
				Limits: quotaLimits(q, 100000), SampleIntervalNs: 10 * msNs, Latency: &trace.Latency{Op: "burst"},
			}, c, ops, end)
			r := Analyze([]*trace.Trace{tr}, trace.Host{Kernel: "4.19.0", CPUs: cpus})
			want := NotAffected
			if expire && cpus >= 11 {
				want = Affected
			}
			if r.Verdict != want {
				t.Errorf("%d CPUs, expiry %v: %s (%s), want %s", cpus, expire, r.Verdict, r.Summary, want)
			}
		}
	}
}
