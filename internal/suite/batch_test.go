package suite

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cfsprobe/cfsprobe/internal/hostfs"
	"github.com/cfsprobe/cfsprobe/internal/lab"
	"github.com/cfsprobe/cfsprobe/internal/sim"
	"github.com/cfsprobe/cfsprobe/internal/testenv"
	"github.com/cfsprobe/cfsprobe/internal/trace"
)

// --list names every built-in suite with its scenarios and its source.
func TestWriteList(t *testing.T) {
	all, err := Builtin()
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := WriteList(&b); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
	if len(lines) != len(all) {
		t.Fatalf("%d lines for %d suites:\n%s", len(lines), len(all), b.String())
	}
	for i, s := range all {
		f := strings.Fields(lines[i])
		if len(f) < 3 || f[0] != s.Suite || f[1] != fmt.Sprint(len(s.Scenarios)) || f[2] != "scenarios" || !strings.HasSuffix(lines[i], "  "+s.Source) {
			t.Errorf("line %q, want %s, %d scenarios and %q", lines[i], s.Suite, len(s.Scenarios), s.Source)
		}
	}
	if _, err := BuiltinSource("nope"); err == nil || !strings.Contains(err.Error(), "use one of aggressive-cfs, burst") {
		t.Errorf("BuiltinSource of an unknown suite: %v", err)
	}
}

// sleeper is a suite of one quick command under half a CPU; expect is
// its expectation.
func sleeper(t *testing.T, name, expect string) *Suite {
	t.Helper()
	s, err := Parse(name+".yaml", []byte(`suite: `+name+`
source: a test
scenarios:
  - name: sleeper
    limits: {cpus: 0.5}
    workload: command
    command: [sleep, "0.2"]
    expect: {`+expect+`}
`))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// A batch validates every suite before any runs: the error is the
// scenario file's.
func TestNewBatchValidates(t *testing.T) {
	bad, err := Parse("bad.yaml", []byte("suite: bad\nscenarios:\n  - name: x\n    limits: {quota: 20ms, burst: 30ms}\n    workload: command\n    command: [sleep, \"1\"]\n"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = NewBatch([]*Suite{sleeper(t, "one", "nr_periods: {max: 1000}"), bad}, Env{CPUs: 2}, lab.Config{})
	if err == nil || !strings.HasPrefix(err.Error(), "bad.yaml:4: scenarios[0].limits.burst") {
		t.Errorf("NewBatch: %v, want bad.yaml's burst", err)
	}
}

// A batch on real cgroups: each suite's heading, table, verdict and
// traces (in a directory per suite), the failed expectation, progress on
// the progress writer; the JSON form; and an interrupted batch, which
// stops at the suite in progress.
func TestBatchRun(t *testing.T) {
	l := testenv.NeedCgroups(t)
	parent := testenv.ParentName("suitetest")
	t.Cleanup(func() { testenv.NoLeftovers(t, l, parent) })
	base := lab.Config{Parent: parent, Stdout: os.Stderr, Stderr: os.Stderr}
	env := Env{CPUs: 2}
	pass := sleeper(t, "one", "nr_periods: {max: 1000}")
	fail := sleeper(t, "two", "nr_periods: {min: 1000000}")

	b, err := NewBatch([]*Suite{pass, fail}, env, base)
	if err != nil {
		t.Fatal(err)
	}
	if b.Title() != "" {
		t.Errorf("title of two suites %q, want none", b.Title())
	}
	var out, prog bytes.Buffer
	dir := t.TempDir()
	res, err := b.Run(context.Background(), BatchOptions{Out: &out, Progress: &prog, OutDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("output:\n%s\nprogress:\n%s", out.String(), prog.String())
	if len(res.Traces) != 2 || !res.Failed || res.Interrupted {
		t.Errorf("%d traces, failed %v, interrupted %v: want 2, true, false", len(res.Traces), res.Failed, res.Interrupted)
	}
	text := out.String()
	for _, want := range []string{
		"suite one (1 runs): a test\n\nscenario ",
		"verdict: every expectation was met\ntraces in " + dir + "/one/\n\nsuite two (1 runs): a test\n",
		"expectations not met:\n  sleeper: expected nr_periods >= 1000000, measured ",
		"verdict: some expectations were not met\ntraces in " + dir + "/two/\n\n",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("output without %q", want)
		}
	}
	for _, s := range []string{"one", "two"} {
		tr, err := trace.ReadFile(filepath.Join(dir, s, "sleeper.json"))
		if err != nil {
			t.Error(err)
			continue
		}
		if tr.Scenario == nil || tr.Scenario.Suite != s {
			t.Errorf("%s/sleeper.json: scenario %+v", s, tr.Scenario)
		}
	}
	if n := strings.Count(prog.String(), "[1/1] sleeper ... (ETA "); n != 2 {
		t.Errorf("progress has %d start lines, want 2:\n%s", n, prog.String())
	}

	// One suite, as JSON, no directory.
	b, err = NewBatch([]*Suite{pass}, Env{CPUs: 2, Quick: true}, base)
	if err != nil {
		t.Fatal(err)
	}
	if b.Title() != "cfsprobe suite one" {
		t.Errorf("title %q", b.Title())
	}
	// Out holds the traces alone, the heading goes with the progress.
	out.Reset()
	prog.Reset()
	res, err = b.Run(context.Background(), BatchOptions{Out: &out, JSON: true, Progress: &prog})
	if err != nil {
		t.Fatal(err)
	}
	var traces []*trace.Trace
	if json.Unmarshal(out.Bytes(), &traces) != nil || len(traces) != 1 || traces[0].Scenario.Verdict != "pass" || res.Failed {
		t.Errorf("JSON output (failed %v):\n%s", res.Failed, out.String())
	}
	if head, _, _ := strings.Cut(prog.String(), "\n"); head != "suite one (1 runs, quick): a test" {
		t.Errorf("progress with JSON:\n%s", prog.String())
	}

	// Interrupted before the first run: the first suite says so, the
	// second does not start.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	b, err = NewBatch([]*Suite{fail, pass}, env, base)
	if err != nil {
		t.Fatal(err)
	}
	out.Reset()
	res, err = b.Run(ctx, BatchOptions{Out: &out})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Interrupted || res.Failed || len(res.Traces) != 0 {
		t.Errorf("interrupted %v, failed %v, %d traces: want true, false, 0", res.Interrupted, res.Failed, len(res.Traces))
	}
	if !strings.Contains(out.String(), "interrupted: only the runs above finished. verdict: none") || strings.Contains(out.String(), "suite one") {
		t.Errorf("interrupted output:\n%s", out.String())
	}
}

// A simulated batch needs no cgroup: every scenario runs on the model,
// judged by the same expectations, its traces marked simulated; the
// heading says so, and {cpus} is the simulated host's.
func TestBatchSimulate(t *testing.T) {
	s, err := Load("threads-vs-quota")
	if err != nil {
		t.Fatal(err)
	}
	env := Env{CPUs: 8, Quick: true, Sim: &SimEnv{Era: "5.14", Seed: 3, Costs: sim.Costs{Event: 250 * time.Microsecond}}}
	b, err := NewBatch([]*Suite{s}, env, lab.Config{Parent: "cfsprobe-never-made", FS: hostfs.New("/no/such/root")})
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	dir := t.TempDir()
	res, err := b.Run(context.Background(), BatchOptions{Out: &out, OutDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("\n%s", out.String())
	if !strings.HasPrefix(out.String(), "suite threads-vs-quota (3 runs, quick, simulated on kernel era 5.14 with 8 CPUs): ") {
		t.Errorf("heading: %s", strings.SplitN(out.String(), "\n", 2)[0])
	}
	if len(res.Traces) != 3 {
		t.Fatalf("%d traces", len(res.Traces))
	}
	for i, tr := range res.Traces {
		sim := tr.Spec.Simulated
		if sim == nil || sim.Era != "5.14" || sim.HostCPUs != 8 || sim.Seed != 3 || tr.Scenario == nil || len(tr.Scenario.Expectations) < 2 || tr.Scenario.Verdict == "none" {
			t.Errorf("trace %d: simulated %+v scenario %+v", i, sim, tr.Scenario)
		}
		if _, err := os.Stat(filepath.Join(dir, tr.Scenario.Name+".json")); err != nil {
			t.Error(err)
		}
	}
	if tr := res.Traces[1]; tr.Scenario.Verdict != "pass" || tr.Summary.ThrottledRatio < 0.9 {
		t.Errorf("threads-2x simulated: %s, throttled %.2f", tr.Scenario.Verdict, tr.Summary.ThrottledRatio)
	}
	// {cpus} is the simulated host's: a quota of 4 CPUs, 4, 8 and 16 threads.
	if q := res.Traces[0].Limits.CPUs; q == nil || *q != 4 || res.Traces[2].Spec.Params.Parallel.Threads != 16 {
		t.Errorf("scaled to the simulated host: quota %v CPUs, %d threads", q, res.Traces[2].Spec.Params.Parallel.Threads)
	}

	cmd := sleeper(t, "cmd", "nr_periods: {max: 1000}")
	if _, err := NewBatch([]*Suite{cmd}, env, lab.Config{}); err == nil || !strings.Contains(err.Error(), "a command cannot be simulated") {
		t.Errorf("a command scenario simulated: %v", err)
	}
}
