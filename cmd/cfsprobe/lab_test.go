package main

// The lab's "Must show" list (issue 2), items 1 to 5, on real cgroups.
// Assertions are ratios and bounds with margin: the machine is noisy.

import (
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/cfsprobe/cfsprobe/internal/trace"
)

const ms = int64(time.Millisecond)

// attempts is how many times a test of a workload at or near the edge of
// its quota measures before it judges: a shared machine (and more so the
// qemu guest, where a vCPU can stop for milliseconds while the guest's
// clock runs on) now and then disturbs one run. The host passes at the
// first; a kernel or lab that throttles wrongly fails every attempt.
const attempts = 3

// atQuotaAttempts is attempts for one thread under one CPU, whose demand is
// its quota exactly. In the qemu guest (Debian 6.1: no IRQ time
// accounting, so the worker is charged all of its wall time) a timer
// interrupt that comes late there throttles a period by 1-3 ms: 9 of 32
// guest runs had one to three such periods of 51, none of 10 host runs.
const atQuotaAttempts = 5

// momentThrottled is the throttled time, in all, of a run at exactly its
// quota that is a late period timer's, not a stall.
const momentThrottled = 2 * time.Millisecond

// Item 1: 5 ms burns every 100 ms under 20 ms / 100 ms are not throttled
// on a fixed kernel. With 50 burns the p99 is the slowest one: a single
// burn delayed by the machine (not by throttling) decides it, and
// measureUntil measures again.
func TestLabPeriodicUnderQuota(t *testing.T) {
	needCgroups(t)
	args := []string{"--cpus", "0.2", "periodic", "--burn", "5ms", "--sleep", "100ms", "--iterations", "50", "--quiet"}
	measureUntil(t, attempts, func(v *verdict) {
		tr := runTrace(t, args...)
		checkConsistency(t, tr)
		v.saw("", tr)
		assertPeriodicUnderQuota(v, tr)
	})
}

func assertPeriodicUnderQuota(t errorer, tr traceT) {
	t.Helper()
	if tr.Summary.Ops != 50 {
		t.Errorf("ops = %d, want 50", tr.Summary.Ops)
	}
	// What the group used is the process's start, its burns and its exit,
	// and little beside: its thread's creation and 49 wake-ups (some 25 µs
	// each here, up to 300 µs under emulation).
	var burns int64
	for _, s := range tr.Latency.Samples {
		burns += s.CPUNs
	}
	pr := tr.Process
	if rest := tr.Summary.UsageNs - pr.StartCPUNs - pr.ExitCPUNs - burns; rest < 0 || rest > 20*ms {
		t.Errorf("used %v: start %v, burns %v, exit %v, and %v beside them: want 0 to 20ms beside them",
			time.Duration(tr.Summary.UsageNs), time.Duration(pr.StartCPUNs), time.Duration(burns), time.Duration(pr.ExitCPUNs), time.Duration(rest))
	}
	t.Logf("start %v (released %v after the run's clock), burns %v, exit %v, the rest %v",
		time.Duration(pr.StartCPUNs), time.Duration(pr.ReleasedNs), time.Duration(burns), time.Duration(pr.ExitCPUNs), time.Duration(tr.Summary.UsageNs-pr.StartCPUNs-pr.ExitCPUNs-burns))
	if p99 := tr.Summary.LatencyNs.P99; p99 >= 7*ms {
		t.Errorf("p99 burn wall time %.2fms, want under 7ms", float64(p99)/1e6)
	}
	if n := tr.Summary.NrThrottled; n > 2 {
		t.Errorf("%d periods throttled, want at most 2", n)
	}
}

// Item 2: a 50 %-duty bursty workload under 0.2 CPUs is throttled in
// (nearly) every period and gets 20 % of a CPU.
func TestLabBurstyOverQuota(t *testing.T) {
	needCgroups(t)
	measureUntil(t, attempts, func(v *verdict) {
		tr := runTrace(t, "--cpus", "0.2", "bursty", "--on", "50ms", "--off", "50ms", "--duration", "5s")
		checkConsistency(t, tr)
		v.saw("", tr)
		assertBurstyOverQuota(v, tr)
	})
}

func assertBurstyOverQuota(t errorer, tr traceT) {
	t.Helper()
	if r := tr.Summary.ThrottledRatio; r < 0.90 {
		t.Errorf("%.0f%% of periods throttled, want at least 90%%", 100*r)
	}
	if c := tr.Summary.CPURatio; c < 0.18 || c > 0.22 {
		t.Errorf("CPU used %.1f%% of wall time, want 20%% within 2 points", 100*c)
	}
}

// Item 3: two threads under a one-CPU quota (twice the quota) are throttled
// every period and their event latency tail jumps to a period's stall.
// The unlimited run's tail is the machine's (other processes on the
// workers' CPUs; in the qemu guest, emulation stalls of several ms) and
// the limited run needs its whole quota: an attempt that misses measures
// both again.
func TestLabParallelOverQuota(t *testing.T) {
	needCgroups(t)
	measureUntil(t, attempts, func(v *verdict) {
		limited := runTrace(t, "--cpus", "1", "parallel", "--threads", "2", "--duration", "5s")
		checkConsistency(t, limited)
		free := runTrace(t, "parallel", "--threads", "2", "--duration", "5s")
		checkConsistency(t, free)
		needEngine(t, limited)
		v.saw("limited", limited)
		v.saw("unlimited", free)
		assertParallelOverQuota(v, limited, free)
	})
}

// Item 3, second part: one thread under a one-CPU quota: no period
// throttled beyond a late timer's moment, no stall. On a shared 2-CPU
// machine something else on the worker's CPU can delay the period
// timer's work, or stall the worker (in the qemu guest, a vCPU the host
// stops for a few ms): an attempt that misses measures again.
func TestLabParallelAtQuota(t *testing.T) {
	needCgroups(t)
	measureUntil(t, atQuotaAttempts, func(v *verdict) {
		one := runTrace(t, "--cpus", "1", "parallel", "--threads", "1", "--duration", "5s")
		checkConsistency(t, one)
		needEngine(t, one)
		v.saw("", one)
		assertParallelAtQuota(v, one)
	})
}

// needEngine: the built-in CPU workloads run in the C engine (make builds
// it into the binary); a binary without it is a failure in CI.
func needEngine(t *testing.T, tr traceT) {
	t.Helper()
	if tr == nil || tr.Spec.Params != nil && tr.Spec.Params.Engine == trace.EngineC {
		return
	}
	if requireTools() {
		t.Errorf("%s ran with params %+v, want engine c: build cfsprobe with make (it embeds native/engine)", tr.Spec.Workload, tr.Spec.Params)
	}
}

func assertParallelOverQuota(t errorer, limited, free traceT) {
	t.Helper()
	if r := limited.Summary.ThrottledRatio; r < 0.90 {
		t.Errorf("2 threads under 1 CPU: %.0f%% of periods throttled, want at least 90%%", 100*r)
	}
	lp, fp := limited.Summary.LatencyNs.P999, free.Summary.LatencyNs.P999
	if lp < fp+stallJump {
		t.Errorf("p99.9 limited %.2fms, unlimited %.2fms: want a stall of at least %dms between them", float64(lp)/1e6, float64(fp)/1e6, stallJump/ms)
	}
}

// stallJump is how much of a stall the limited run's tail must add to the
// unlimited run's: two threads under one CPU spend the quota in 50 ms and
// stand still for the other 50 ms of the period, so an event caught by it
// takes some 50 ms longer. Added rather than multiplied: the unlimited
// tail is the machine's (0.4 ms on this host, 15 to 25 ms of emulation
// stalls in the qemu guest on a busy day, 2026-11-30), and the stall comes
// on top of it.
const stallJump = 30 * ms

// assertParallelAtQuota: one busy thread under a one-CPU quota. Its demand
// equals the quota exactly; with nothing but the worker in the group (the
// C engine) the kernel throttles no period.
func assertParallelAtQuota(t errorer, one traceT) {
	t.Helper()
	s := one.Summary
	t.Logf("1 thread under 1 CPU: %d of %d periods throttled, %.2fms in all, p99.9 %.2fms", s.NrThrottled, s.NrPeriods, float64(s.ThrottledNs)/1e6, float64(s.LatencyNs.P999)/1e6)
	if why := parallelAtQuotaMiss(one); why != "" {
		t.Errorf("1 thread under 1 CPU: %s", why)
	}
}

// parallelAtQuotaMiss says what is wrong with a run of one thread under
// one CPU ("" when nothing): a throttled period, or a stall.
func parallelAtQuotaMiss(one traceT) string {
	s := one.Summary
	var miss []string
	// A thread that uses exactly its quota is throttled for a moment now
	// and then when the period timer fires late (in the qemu guest,
	// late timer interrupts: 1 to 3 of 51 periods, 0.42 ms in all, in
	// five runs in a row); what a user would see is a stall, so a
	// period throttled counts only beyond momentThrottled in all.
	if s.NrThrottled != 0 && s.ThrottledNs > int64(momentThrottled) {
		miss = append(miss, fmt.Sprintf("%d periods throttled for %.2fms in all, want none (or under %v in all)", s.NrThrottled, float64(s.ThrottledNs)/1e6, momentThrottled))
	}
	// A stall: 5 ms, or 4 events' time where events are slow (emulation).
	limit := max(5*ms, 4*s.LatencyNs.P50)
	if p := s.LatencyNs.P999; p > limit {
		miss = append(miss, fmt.Sprintf("p99.9 %.2fms, want under %.2fms (no stall: 5ms or 4x the median)", float64(p)/1e6, float64(limit)/1e6))
	}
	return strings.Join(miss, "; ")
}

// Item 4: an external program's trace shows throttling and its own output
// still reaches the terminal.
func TestLabExternalCommand(t *testing.T) {
	needCgroups(t)
	if _, err := lookPath("sysbench"); err != nil {
		if requireTools() {
			t.Fatalf("sysbench not installed (make test installs it): %v", err)
		}
		t.Skip("sysbench not installed")
	}
	r := cfsprobe(t, "run", "--parent", testParent, "--cpus", "1", "--", "sysbench", "--threads=4", "--time=3", "cpu", "run")
	if r.code != 0 {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	if !contains(r.stdout, "events per second") {
		t.Errorf("sysbench's own output is missing from stdout:\n%s", r.stdout)
	}
	if !contains(r.stdout, "throttled") {
		t.Errorf("no summary after sysbench's output:\n%s", r.stdout)
	}
	tr := runTrace(t, "--cpus", "1", "--", "sysbench", "--threads=4", "--time=3", "cpu", "run")
	checkConsistency(t, tr)
	if tr.Summary.NrThrottled == 0 {
		t.Errorf("4 sysbench threads under 1 CPU: nr_throttled = 0")
	}
}

// A run says how busy other work kept the CPUs it could use
// (summary.others_busy_cpus), and calls itself disturbed above
// trace.DisturbedCPUs: beside a shell that spins on one of the two CPUs,
// about one CPU; the workload (5 ms burns every 50 ms) takes a tenth of
// another, so the two do not compete.
func TestLabOthersBusy(t *testing.T) {
	needCgroups(t)
	spin := exec.Command("sh", "-c", "while :; do :; done")
	if err := spin.Start(); err != nil {
		t.Fatal(err)
	}
	spun := make(chan struct{})
	go func() { _ = spin.Wait(); close(spun) }()
	t.Cleanup(func() { _ = spin.Process.Kill(); <-spun })
	args := []string{"--cpus", "0.5", "periodic", "--burn", "5ms", "--sleep", "50ms", "--iterations", "40", "--quiet"}
	tr := runTrace(t, args...)
	checkConsistency(t, tr)
	o := tr.Summary.OthersBusyCPUs
	if o == nil || *o < 0.8 || *o > 1.3 || !tr.Summary.Disturbed() {
		t.Errorf("beside a spinning shell: others_busy_cpus %v, disturbed %v; want about 1 CPU, disturbed", o, tr.Summary.Disturbed())
	}
	r := cfsprobe(t, append([]string{"run", "--parent", testParent}, args...)...)
	if r.code != 0 || !strings.Contains(r.stdout, "CPUs of other work on the CPUs the run could use") || !strings.Contains(r.stdout, "a disturbed measurement") {
		t.Errorf("exit %d; want the summary to say how busy other work kept the CPUs, and that it was disturbed:\n%s%s", r.code, r.stdout, r.stderr)
	}
}
