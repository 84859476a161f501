package check

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/cfsprobe/cfsprobe/internal/cgroup"
	"github.com/cfsprobe/cfsprobe/internal/golden"
	"github.com/cfsprobe/cfsprobe/internal/trace"
)

// fixtureCases are the testdata directories, one per case, and what the
// analysis must say of them. seed000, stranded and inconclusive-* are
// synthetic (fixtures_test.go); fixed-6.18 and over-quota-6.18 were
// recorded on this project's reference machine (Linux 6.18, 2 CPUs,
// cgroup v1) with cfsprobe check --out and cfsprobe run --out.
var fixtureCases = []struct {
	dir     string
	verdict string
	code    int
	check   func(t *testing.T, r Result)
}{
	{"seed000", Affected, 1, func(t *testing.T, r Result) {
		ev := r.Evidence
		// Seed 000's log: 66 of 109 burns took ~100 ms, each with one or
		// two throttled periods using a few ms of the 20 ms quota.
		if ev.ThrottledUnderQuota < 60 || ev.SlowOpsThrottledUnder < 60 {
			t.Errorf("throttled under quota %d, slow burns in them %d: want at least 60 each", ev.ThrottledUnderQuota, ev.SlowOpsThrottledUnder)
		}
		if ev.MaxUsageOfQuotaThrottledUnder > 0.3 {
			t.Errorf("a throttled-under-quota period used %.0f%% of the quota, want at most 30%%", 100*ev.MaxUsageOfQuotaThrottledUnder)
		}
		if ev.Worst == nil || ev.Worst.WallNs < 90*msNs || ev.Worst.ExpectedNs != 5*msNs {
			t.Errorf("worst burn %+v, want about 100ms of an expected 5ms", ev.Worst)
		}
		if r.Kernel.Defect != DefectSliceExpiry {
			t.Errorf("kernel defect %q, want %q", r.Kernel.Defect, DefectSliceExpiry)
		}
	}},
	{"stranded", Affected, 1, func(t *testing.T, r Result) {
		ev := r.Evidence
		if share := float64(ev.ThrottledUnderQuota) / float64(ev.PeriodsJudged); share < 0.8 {
			t.Errorf("%.0f%% of periods throttled under quota, want at least 80%%", 100*share)
		}
		if ev.UsageOfQuota > 0.3 {
			t.Errorf("usage %.0f%% of the quota, want the low usage of the spread pattern", 100*ev.UsageOfQuota)
		}
		if r.Kernel.Defect != DefectStrandedSlices {
			t.Errorf("kernel defect %q, want %q", r.Kernel.Defect, DefectStrandedSlices)
		}
	}},
	{"fixed-6.18", NotAffected, 0, func(t *testing.T, r Result) {
		ev := r.Evidence
		if ev.Runs != 3 || ev.PeriodsJudged < 250 || ev.ThrottledUnderQuota != 0 {
			t.Errorf("runs %d, periods %d, throttled under quota %d: want 3, at least 250, 0", ev.Runs, ev.PeriodsJudged, ev.ThrottledUnderQuota)
		}
		// The recording has a few burns slowed by other processes on the
		// machine: slow, but in no throttled period.
		if ev.SlowOps != ev.SlowOpsUnexplained {
			t.Errorf("slow %d, unexplained %d: every slow operation here is outside throttling", ev.SlowOps, ev.SlowOpsUnexplained)
		}
		if r.Kernel.Throttling != ThrottleTask {
			t.Errorf("throttling model %q, want %q", r.Kernel.Throttling, ThrottleTask)
		}
	}},
	{"over-quota-6.18", NotAffected, 0, func(t *testing.T, r Result) {
		ev := r.Evidence
		if ev.Throttled < 40 || ev.ThrottledUnderQuota != 0 {
			t.Errorf("throttled %d, under quota %d: a workload over its quota is throttled at its quota, not under it", ev.Throttled, ev.ThrottledUnderQuota)
		}
		if !strings.Contains(strings.Join(r.Reasons, "\n"), "at or near its quota") {
			t.Errorf("reasons do not explain the throttling at quota: %q", r.Reasons)
		}
	}},
	{"inconclusive-short", Inconclusive, 3, func(t *testing.T, r Result) {
		if !strings.Contains(r.Reasons[0], "only 7 periods") {
			t.Errorf("reason %q does not say too few periods", r.Reasons[0])
		}
	}},
	{"inconclusive-noisy", Inconclusive, 3, func(t *testing.T, r Result) {
		if !strings.Contains(r.Reasons[0], "slow without any throttling") {
			t.Errorf("reason %q does not say the runs were noisy", r.Reasons[0])
		}
	}},
}

// TestAnalyzeFixtures feeds every fixture through Analyze (by way of
// AnalyzeFiles, as cfsprobe check --from-traces does) and compares the
// human output with its golden file (-update rewrites them).
func TestAnalyzeFixtures(t *testing.T) {
	for _, c := range fixtureCases {
		t.Run(c.dir, func(t *testing.T) {
			r, traces, err := AnalyzeFiles([]string{filepath.Join("testdata", c.dir)})
			if err != nil {
				t.Fatal(err)
			}
			// AnalyzeFiles only names the runs after their files.
			if direct := Analyze(traces, traces[0].Host); direct.Verdict != r.Verdict || !reflect.DeepEqual(direct.Evidence, r.Evidence) {
				t.Errorf("Analyze: %q %+v, AnalyzeFiles: %q %+v", direct.Verdict, direct.Evidence, r.Verdict, r.Evidence)
			}
			if r.Verdict != c.verdict || r.ExitCode() != c.code {
				t.Fatalf("verdict %q (exit %d), want %q (exit %d)\n%s", r.Verdict, r.ExitCode(), c.verdict, c.code, strings.Join(r.Reasons, "\n"))
			}
			c.check(t, r)
			if r.Headline == "" || r.Summary == "" || len(r.Reasons) == 0 || len(r.Advice) == 0 {
				t.Errorf("headline, summary, reasons or advice missing: %+v", r)
			}

			var buf bytes.Buffer
			if err := WriteText(&buf, &r); err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(buf.String(), strings.ToUpper(c.verdict)+":") {
				t.Errorf("the output does not start with the verdict:\n%s", buf.String())
			}
			for _, line := range strings.Split(buf.String(), "\n") {
				if strings.HasSuffix(line, " ") {
					t.Errorf("trailing space: %q", line)
				}
			}
			golden.Check(t, filepath.Join("testdata", "golden", c.dir+".txt"), buf.Bytes())

			// The JSON form carries the same verdict and evidence.
			var back Result
			var jb bytes.Buffer
			if err := r.Write(&jb); err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(jb.Bytes(), &back); err != nil {
				t.Fatal(err)
			}
			if back.Schema != Schema || back.Verdict != r.Verdict || back.Evidence.ThrottledUnderQuota != r.Evidence.ThrottledUnderQuota || len(back.Runs) != len(r.Runs) {
				t.Errorf("JSON round trip changed the result")
			}
		})
	}
}

// mkTrace builds a small trace in memory: a run under 20 ms / 100 ms
// with the given timeline and operations.
func mkTrace(workload string, params *trace.Params, periods []trace.Period, ops []trace.Sample) *trace.Trace {
	t := &trace.Trace{
		Schema: trace.Schema, Spec: trace.Spec{Workload: workload, Params: params},
		Host:    trace.Host{Kernel: "6.1.0-18-amd64", CPUs: 2},
		Limits:  trace.LimitsOf(cgroup.Limits{Period: 100 * time.Millisecond, Quota: 20 * time.Millisecond}),
		Periods: periods,
	}
	if ops != nil {
		t.Latency = &trace.Latency{Op: "burn", Count: int64(len(ops)), Samples: ops}
	}
	return t
}

// periods returns n kernel periods of 100 ms from start, each using
// usage; those in throttled are throttled.
func periods(start int64, n int, usage int64, throttled ...int) []trace.Period {
	out := make([]trace.Period, n)
	for i := range out {
		s := start + int64(i)*100*msNs
		out[i] = trace.Period{StartNs: s, EndNs: s + 100*msNs, UsageNs: usage, Kernel: true}
	}
	for _, i := range throttled {
		out[i].Throttled, out[i].ThrottledNs = true, 90*msNs
	}
	return out
}

// burns returns one 5 ms burn at the start of every period from start;
// those in slow took 95 ms.
func burns(start int64, n int, slow ...int) []trace.Sample {
	out := make([]trace.Sample, n)
	for i := range out {
		out[i] = trace.Sample{StartNs: start + int64(i)*100*msNs + msNs, WallNs: 5 * msNs, CPUNs: 5 * msNs}
	}
	for _, i := range slow {
		out[i].WallNs = 95 * msNs
	}
	return out
}

var burnParams = &trace.Params{Periodic: &trace.PeriodicParams{Burn: 5 * time.Millisecond, Sleep: 95 * time.Millisecond, Iterations: 40, Threads: 1}}

func TestAnalyzeCases(t *testing.T) {
	host := trace.Host{Kernel: "6.1.0-18-amd64", CPUs: 2}
	cases := []struct {
		name    string
		traces  []*trace.Trace
		verdict string
		reason  string // a substring of the first reason
		check   func(t *testing.T, r Result)
	}{
		{name: "no trace", verdict: Inconclusive, reason: "no run could be judged"},
		{name: "clean", verdict: NotAffected, reason: "40 periods judged",
			traces: []*trace.Trace{mkTrace("periodic", burnParams, periods(-50*msNs, 41, 5*msNs), burns(0, 40))}},
		{name: "throttled under quota with slow burns", verdict: Affected, reason: "4 of 40 judged periods",
			traces: []*trace.Trace{mkTrace("periodic", burnParams, periods(-50*msNs, 41, 5*msNs, 5, 10, 20, 30), burns(0, 40, 5, 10, 20, 30))},
			check: func(t *testing.T, r Result) {
				if n := r.Evidence.SlowOpsThrottledUnder; n != 4 {
					t.Errorf("%d slow burns in throttled periods, want 4", n)
				}
				if len(r.Runs[0].Incidents) != 4 || r.Runs[0].Incidents[0].WorstOpNs != 95*msNs {
					t.Errorf("incidents %+v", r.Runs[0].Incidents)
				}
			}},
		{name: "throttled under quota, burns on time", verdict: Inconclusive, reason: "counters and the latencies disagree",
			traces: []*trace.Trace{mkTrace("periodic", burnParams, periods(-50*msNs, 41, 5*msNs, 5, 10, 20, 30), burns(0, 40))}},
		{name: "throttled at quota", verdict: NotAffected, reason: "40 periods judged",
			traces: []*trace.Trace{mkTrace("periodic", burnParams, periods(-50*msNs, 41, 20*msNs, 5, 10, 20, 30), burns(0, 40, 5, 10, 20, 30))},
			check: func(t *testing.T, r Result) {
				if r.Evidence.Throttled != 4 || r.Evidence.ThrottledUnderQuota != 0 || r.Evidence.SlowOpsUnexplained != 0 {
					t.Errorf("evidence %+v", r.Evidence)
				}
			}},
		{name: "two isolated throttles", verdict: NotAffected, reason: "40 periods judged, 2 throttled",
			traces: []*trace.Trace{mkTrace("periodic", burnParams, periods(-50*msNs, 41, 5*msNs, 5, 30), burns(0, 40, 5, 30))}},
		{name: "some throttles, too few to call", verdict: Inconclusive, reason: "too few to call the kernel affected",
			traces: []*trace.Trace{mkTrace("periodic", burnParams, periods(-50*msNs, 201, 5*msNs, 5, 60, 120), burns(0, 200, 5, 60, 120))}},
		{name: "external command, counters only", verdict: Affected, reason: "4 of 40 judged periods",
			traces: []*trace.Trace{mkTrace("command", nil, periods(-50*msNs, 41, 5*msNs, 5, 10, 20, 30), nil)}},
		{name: "too few periods", verdict: Inconclusive, reason: "only 9 periods",
			traces: []*trace.Trace{mkTrace("periodic", burnParams, periods(-50*msNs, 10, 5*msNs), burns(0, 9))}},
		{name: "noisy", verdict: Inconclusive, reason: "slow without any throttling",
			traces: []*trace.Trace{mkTrace("periodic", burnParams, periods(-50*msNs, 41, 5*msNs), burns(0, 40, 3, 6, 9))}},
		{name: "warm-up is not judged", verdict: NotAffected,
			// The first burn (the warm-up) was stalled for 60 ms and its
			// period throttled: not held against the kernel.
			traces: []*trace.Trace{mkTrace("periodic", burnParams, periods(-50*msNs, 41, 5*msNs, 0), func() []trace.Sample {
				b := burns(0, 40)
				b[0].WallNs = 60 * msNs
				return b
			}())},
			check: func(t *testing.T, r Result) {
				run := r.Runs[0]
				// Judged: the periods that start after the warm-up (61 ms).
				if run.WarmupNs != 61*msNs || run.PeriodsJudged != 39 || run.Throttled != 0 || run.Ops != 39 {
					t.Errorf("warm-up %d, judged %d, throttled %d, ops %d", run.WarmupNs, run.PeriodsJudged, run.Throttled, run.Ops)
				}
			}},
		{name: "unlimited run is not judged", verdict: Inconclusive, reason: "no run could be judged",
			traces: []*trace.Trace{func() *trace.Trace {
				tr := mkTrace("periodic", burnParams, periods(0, 41, 5*msNs), burns(0, 40))
				tr.Limits = trace.LimitsOf(cgroup.Limits{Period: 100 * time.Millisecond})
				return tr
			}()},
			check: func(t *testing.T, r Result) {
				if r.Runs[0].Judged || !strings.Contains(r.Runs[0].Skipped, "without a quota") || len(r.Notes) == 0 {
					t.Errorf("run %+v, notes %q", r.Runs[0], r.Notes)
				}
			}},
		{name: "failed consistency check is not judged", verdict: Inconclusive, reason: "no run could be judged",
			traces: []*trace.Trace{func() *trace.Trace {
				tr := mkTrace("periodic", burnParams, periods(-50*msNs, 41, 5*msNs, 5, 10, 20, 30), burns(0, 40, 5, 10, 20, 30))
				tr.Checks = []trace.Check{{Name: "timeline_matches_nr_throttled", OK: false, Detail: "timeline has 4 throttled periods, the kernel counted 6"}}
				return tr
			}()}},
		{name: "killed workload is not judged", verdict: Inconclusive, reason: "no run could be judged",
			traces: []*trace.Trace{func() *trace.Trace {
				tr := mkTrace("periodic", burnParams, periods(-50*msNs, 41, 5*msNs), burns(0, 40))
				tr.Process.Signal = "killed"
				return tr
			}()}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := Analyze(c.traces, host)
			if r.Verdict != c.verdict {
				t.Fatalf("verdict %q, want %q\nreasons: %q\nevidence: %+v", r.Verdict, c.verdict, r.Reasons, r.Evidence)
			}
			if c.reason != "" && !strings.Contains(r.Reasons[0], c.reason) {
				t.Errorf("first reason %q does not contain %q", r.Reasons[0], c.reason)
			}
			if c.check != nil {
				c.check(t, r)
			}
		})
	}
}

// TestAnalyzePure: the analysis does not change its input and gives the
// same answer every time.
func TestAnalyzePure(t *testing.T) {
	traces, sources, err := LoadTraces([]string{"testdata/seed000"})
	if err != nil {
		t.Fatal(err)
	}
	host, _ := HostOf(traces, sources)
	enc := func(v any) string {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	before := enc(traces)
	a, b := Analyze(traces, host), Analyze(traces, host)
	if enc(traces) != before {
		t.Error("Analyze changed its input traces")
	}
	if enc(a) != enc(b) {
		t.Error("Analyze gave two different results for the same traces")
	}
}

// TestVersionNotes: the verdict is the test's; the version only explains.
func TestVersionNotes(t *testing.T) {
	clean := []*trace.Trace{mkTrace("periodic", burnParams, periods(-50*msNs, 41, 5*msNs), burns(0, 40))}
	for _, c := range []struct {
		kernel string
		cpus   int
		note   string
	}{
		{"4.19.0-6-amd64", 2, "too few CPUs"},
		{"4.15.0-45-generic", 8, "probably backported"},
		{"6.1.0", 2, ""},
	} {
		r := Analyze(clean, trace.Host{Kernel: c.kernel, CPUs: c.cpus})
		if r.Verdict != NotAffected {
			t.Fatalf("%s: verdict %q: the version must not change it", c.kernel, r.Verdict)
		}
		got := strings.Join(r.Notes, "\n")
		if (c.note == "") != (got == "") || !strings.Contains(got, c.note) {
			t.Errorf("%s: notes %q, want one containing %q", c.kernel, got, c.note)
		}
	}
}
