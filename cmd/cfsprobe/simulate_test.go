package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/cfsprobe/cfsprobe/internal/sim"
	"github.com/cfsprobe/cfsprobe/internal/trace"
)

// simulateTrace runs `cfsprobe simulate --json ARGS...` and reads the
// trace it prints.
func simulateTrace(t *testing.T, args ...string) *trace.Trace {
	t.Helper()
	r := cfsprobe(t, append([]string{"simulate", "--json"}, args...)...)
	if r.code != 0 {
		t.Fatalf("simulate %v: exit %d\n%s", args, r.code, r.stderr)
	}
	tr, err := trace.Read(strings.NewReader(r.stdout))
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

// cfsprobe simulate writes a trace of the simulated host, marked as
// simulated with its model, through the lab's period model (the timeline
// matches nr_throttled); the same seed gives the same trace; --out and
// --report save it as run does; the summary says it was simulated.
func TestSimulate(t *testing.T) {
	args := []string{"--kernel", "4.18", "--host-cpus", "64", "--quota", "10ms", "--event-cpu", "250us", "parallel", "--threads", "64", "--duration", "2s"}
	tr := simulateTrace(t, args...)
	sim := tr.Spec.Simulated
	if sim == nil || sim.Era != "4.18" || sim.HostCPUs != 64 || sim.EventCPUNs != int64(250*time.Microsecond) || sim.Seed != 1 {
		t.Fatalf("spec.simulated %+v", sim)
	}
	if tr.Spec.Workload != "parallel" || tr.Spec.Params == nil || tr.Spec.Params.Parallel.Threads != 64 {
		t.Errorf("spec %+v", tr.Spec)
	}
	if tr.Host.Kernel != "4.18" || tr.Host.CPUs != 64 || tr.Host.Hostname != "" || tr.Limits.QuotaUs == nil || *tr.Limits.QuotaUs != 10000 {
		t.Errorf("host %+v limits %+v", tr.Host, tr.Limits)
	}
	s := tr.Summary
	// 64 threads under a tenth of a CPU: throttled every period, the
	// quota used, events of a few periods' stall in the tail.
	if s.NrPeriods < 18 || s.ThrottledRatio < 0.9 || s.CPURatio < 0.08 || s.CPURatio > 0.12 || s.LatencyNs == nil || s.LatencyNs.P99 < int64(100*time.Millisecond) {
		t.Errorf("summary %+v", s)
	}
	if len(tr.Checks) == 0 || !tr.Checks[0].OK || len(tr.Periods) < 18 || tr.Latency == nil || tr.Throughput == nil {
		t.Errorf("checks %+v, %d periods, latency %v, throughput %v", tr.Checks, len(tr.Periods), tr.Latency != nil, tr.Throughput != nil)
	}
	again := simulateTrace(t, args...)
	again.Started = tr.Started
	if !reflect.DeepEqual(tr, again) {
		t.Error("the same seed gave another trace")
	}
	placed := simulateTrace(t, append([]string{"--phase", "37ms"}, args...)...)
	if placed.Spec.Simulated.PhaseNs != int64(37*time.Millisecond) || placed.Periods[0].EndNs != int64(37*time.Millisecond) {
		t.Errorf("--phase 37ms: phase %v, the first period ends at %v", time.Duration(placed.Spec.Simulated.PhaseNs), time.Duration(placed.Periods[0].EndNs))
	}
	other := simulateTrace(t, append([]string{"--seed", "2"}, args...)...)
	if other.Spec.Simulated.Seed != 2 || reflect.DeepEqual(other.Periods, tr.Periods) {
		t.Errorf("--seed 2: seed %d, the same periods: %v", other.Spec.Simulated.Seed, reflect.DeepEqual(other.Periods, tr.Periods))
	}

	dir := t.TempDir()
	out, rep := filepath.Join(dir, "t.json"), filepath.Join(dir, "r.md")
	r := cfsprobe(t, append([]string{"simulate", "--out", out, "--report", rep}, args...)...)
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	if !strings.Contains(r.stdout, "host       simulated, kernel era 4.18, 64 CPUs, slice 5ms\n") || !strings.Contains(r.stdout, "trace      "+out) {
		t.Errorf("summary:\n%s", r.stdout)
	}
	saved, err := trace.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	saved.Started = tr.Started
	if !reflect.DeepEqual(saved, tr) {
		t.Error("the saved trace is not the one printed with --json")
	}
	md, err := os.ReadFile(rep)
	if err != nil || !strings.Contains(string(md), "simulated, kernel era 4.18, 64 CPUs") {
		t.Errorf("report (%v):\n%s", err, md)
	}
}

// Without --kernel and --host-cpus, simulate models this host; it needs
// no root and creates nothing. A parallel workload's event is measured
// on this host when not given.
func TestSimulateThisHost(t *testing.T) {
	tr := simulateTrace(t, "--cpus", "0.5", "parallel", "--threads", "2", "--duration", "1s")
	b, _ := os.ReadFile("/proc/sys/kernel/osrelease")
	t.Logf("host %s: simulated era %s, %d CPUs, event %v", strings.TrimSpace(string(b)), tr.Host.Kernel, tr.Host.CPUs, time.Duration(tr.Spec.Simulated.EventCPUNs))
	if tr.Host.CPUs < 1 || tr.Spec.Simulated.Era == "" || tr.Spec.Simulated.EventCPUNs <= 0 || tr.Spec.Simulated.EventCPUNs > int64(10*time.Millisecond) {
		t.Errorf("host %+v, simulated %+v", tr.Host, tr.Spec.Simulated)
	}
	// How the events' time spread is recorded, and given back it
	// repeats the run: the same events, the same trace.
	q := tr.Spec.Simulated.EventCPUQuantiles
	if len(q) != len(sim.EventQuantiles) || q[0].P != 0 || q[len(q)-1].P != 1 || q[0].Ns <= 0 || q[len(q)-1].Ns < q[0].Ns {
		t.Fatalf("event_cpu_quantiles %+v", q)
	}
	given := quantilesArg(q)
	again := simulateTrace(t, "--cpus", "0.5", "--event-cpu-quantiles", given, "parallel", "--threads", "2", "--duration", "1s")
	again.Started = tr.Started
	if !reflect.DeepEqual(tr, again) {
		t.Errorf("--event-cpu-quantiles %s: another trace (event %v, then %v)", given, tr.Spec.Simulated.EventCPUNs, again.Spec.Simulated.EventCPUNs)
	}
	r := cfsprobeCmd(t, nobodyCmd(t, "simulate", "--cpus", "0.2", "bursty", "--duration", "1s"))
	if r.code != 0 || !strings.Contains(r.stdout, "host       simulated, kernel era ") {
		t.Errorf("as uid 65534: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}

// --help teaches by example, and a workload's --help is its usage.
func TestSimulateHelp(t *testing.T) {
	r := cfsprobe(t, "simulate", "--help")
	for _, want := range []string{
		"cfsprobe simulate --kernel 4.18 --host-cpus 64 --quota 10ms parallel --threads 64 --duration 5s",
		"--kernel ERA picks the model",
		"4.18  per-period expiry",
		"--host-cpus",
		"periodic",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("simulate --help without %q:\n%s", want, r.stdout)
		}
	}
	r = cfsprobe(t, "simulate", "--cpus", "1", "bursty", "--help")
	if r.code != 0 || !strings.HasPrefix(r.stdout, "bursty: ") || !strings.Contains(r.stdout, "--on-cpu") {
		t.Errorf("simulate bursty --help: exit %d\n%s", r.code, r.stdout)
	}
}

// The era comparison --help gives shows what it says: on 4.18 the group
// loses the runtime left on CPUs that went idle (it uses less than its
// quota, and its bursts wait longer) and on 5.4 it does not.
func TestSimulateHelpEraExample(t *testing.T) {
	run := func(era string) *trace.Trace {
		return simulateTrace(t, "--kernel", era, "--host-cpus", "64", "--quota", "50ms",
			"bursty", "--threads", "64", "--on-cpu", "200us", "--off", "20ms", "--duration", "5s")
	}
	old, fixed := run("4.18"), run("5.4")
	quota := 0.5 // CPUs
	t.Logf("4.18: %.0f%% of the quota, p99 %v; 5.4: %.0f%%, p99 %v", 100*old.Summary.CPURatio/quota, time.Duration(old.Summary.LatencyNs.P99),
		100*fixed.Summary.CPURatio/quota, time.Duration(fixed.Summary.LatencyNs.P99))
	if old.Summary.CPURatio > 0.92*quota || fixed.Summary.CPURatio < 0.97*quota {
		t.Errorf("CPU used: %.2f on 4.18, %.2f on 5.4 (quota %.2f): want 4.18 well under the quota, 5.4 at it", old.Summary.CPURatio, fixed.Summary.CPURatio, quota)
	}
	// 99 ms against 75 (170 against 76 while a sleep ended 50 µs late in
	// the model rather than 130: the waits are the refills', whose phase
	// the sleeps' lateness moves).
	if old.Summary.LatencyNs.P99 < 6*fixed.Summary.LatencyNs.P99/5 {
		t.Errorf("p99 %v on 4.18, %v on 5.4: want 4.18's longer by a fifth at least", time.Duration(old.Summary.LatencyNs.P99), time.Duration(fixed.Summary.LatencyNs.P99))
	}
}

// `suite --json` prints the traces alone, for scripts: the suite's
// heading goes to stderr with the progress.
func TestSuiteSimulateJSON(t *testing.T) {
	r := cfsprobe(t, "suite", "--quick", "--simulate", "--json", "threads-vs-quota")
	if r.code != 0 && r.code != 1 {
		t.Fatalf("exit %d\nstderr:\n%s", r.code, r.stderr)
	}
	var traces []trace.Trace
	if err := json.Unmarshal([]byte(r.stdout), &traces); err != nil {
		t.Fatalf("stdout is not a JSON array of traces: %v\n%.300s", err, r.stdout)
	}
	if len(traces) != 3 {
		t.Errorf("%d traces, want threads-vs-quota's 3", len(traces))
	}
	for _, tr := range traces {
		if tr.Spec.Simulated == nil {
			t.Errorf("%s: not a simulated trace", tr.Scenario.Name)
		}
	}
	if !strings.Contains(r.stderr, "suite threads-vs-quota (3 runs, quick, simulated") {
		t.Errorf("the suite's heading is not on stderr:\n%s", r.stderr)
	}
}
