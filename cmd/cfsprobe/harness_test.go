package main

// The end-to-end tests run the cfsprobe binary the way a user does. The
// binary is built once by TestMain, or taken from $CFSPROBE_BIN (the qemu
// guest, where no Go toolchain runs, passes a prebuilt static binary).

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cfsprobe/cfsprobe/internal/cgroup"
	"github.com/cfsprobe/cfsprobe/internal/report"
	"github.com/cfsprobe/cfsprobe/internal/testenv"
	"github.com/cfsprobe/cfsprobe/internal/tied"
	"github.com/cfsprobe/cfsprobe/internal/trace"
)

// bin is the cfsprobe binary under test.
var bin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "cfsprobe-e2e-bin")
	if err == nil {
		bin, err = testenv.Cfsprobe(dir)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// testParent is the parent group the e2e tests use: not the default, and
// one per test process, so that leftover checks are not confused by other
// runs (another test binary, or a user's run).
var testParent = testenv.ParentName("e2e")

// result is one invocation of the binary.
type result struct {
	stdout, stderr string
	code           int
}

// cfsprobe runs the binary with args and returns its output and status.
func cfsprobe(t testing.TB, args ...string) result {
	t.Helper()
	return cfsprobeCmd(t, exec.Command(bin, args...))
}

func cfsprobeCmd(t testing.TB, cmd *exec.Cmd) result {
	t.Helper()
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("run %v: %v", cmd.Args, err)
	}
	return result{out.String(), errb.String(), code}
}

// runTrace runs `cfsprobe run --json --parent testParent ARGS...` and
// decodes the trace. It fails the test on a non-zero exit.
func runTrace(t testing.TB, args ...string) *trace.Trace {
	t.Helper()
	full := append([]string{"run", "--json", "--parent", testParent}, args...)
	r := cfsprobe(t, full...)
	if r.code != 0 {
		t.Fatalf("cfsprobe %s: exit %d\nstderr:\n%s", strings.Join(full, " "), r.code, r.stderr)
	}
	tr, err := trace.Read(strings.NewReader(r.stdout))
	if err != nil {
		t.Fatalf("decode trace of %v: %v\n%s", full, err, r.stdout)
	}
	t.Logf("cfsprobe %s: periods %d throttled %d (%.0f%%) usage %.3fs wall %.3fs cpu %.3f others %s latency %+v",
		strings.Join(args, " "), tr.Summary.NrPeriods, tr.Summary.NrThrottled, 100*tr.Summary.ThrottledRatio,
		float64(tr.Summary.UsageNs)/1e9, float64(tr.Summary.WallNs)/1e9, tr.Summary.CPURatio, report.OthersBusy(tr.Summary), tr.Summary.LatencyNs)
	return tr
}

// needCgroups skips (or fails under CFSPROBE_REQUIRE_CGROUPS=1) without
// real cgroups, and checks after the test that nothing was left behind.
func needCgroups(t *testing.T) *cgroup.Layout {
	t.Helper()
	l := testenv.NeedCgroups(t)
	t.Cleanup(func() { testenv.NoLeftovers(t, l, testParent) })
	return l
}

// setQuota gives the group dir in the cpu hierarchy of cgroup version
// quotaUs per periodUs: cpu.max on v2; on v1 cpu.cfs_period_us, then
// cpu.cfs_quota_us (which the kernel checks against the period).
func setQuota(t *testing.T, version int, dir string, quotaUs, periodUs int) {
	t.Helper()
	var err error
	if version == 2 {
		err = cgroup.WriteFile(filepath.Join(dir, "cpu.max"), fmt.Sprintf("%d %d", quotaUs, periodUs))
	} else if err = cgroup.WriteFile(filepath.Join(dir, "cpu.cfs_period_us"), strconv.Itoa(periodUs)); err == nil {
		err = cgroup.WriteFile(filepath.Join(dir, "cpu.cfs_quota_us"), strconv.Itoa(quotaUs))
	}
	if err != nil {
		t.Fatal(err)
	}
}

// busyLoop starts a shell's endless loop in the groups dirs (each one's
// cgroup.procs) and kills it when the test ends: its cleanup runs before
// those registered earlier, such as the one that removes the groups.
func busyLoop(t *testing.T, dirs ...string) *exec.Cmd {
	t.Helper()
	busy := exec.Command("/bin/sh", "-c", "while :; do :; done")
	if err := tied.Start(busy); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = busy.Process.Kill()
		_ = busy.Wait()
	})
	for _, d := range dirs {
		if err := cgroup.WriteFile(filepath.Join(d, "cgroup.procs"), strconv.Itoa(busy.Process.Pid)); err != nil {
			t.Fatal(err)
		}
	}
	return busy
}

// checkConsistency asserts item 5 of the lab's must-show list: the
// timeline's throttled periods equal nr_throttled, and for built-in
// workloads the group's usage matches the process's getrusage within 2 %.
func checkConsistency(t *testing.T, tr *trace.Trace) {
	t.Helper()
	if got, want := trace.CountThrottled(tr.Periods), tr.Summary.NrThrottled; got != want {
		t.Errorf("timeline has %d throttled periods, summary.nr_throttled is %d", got, want)
	}
	if tr.Spec.Workload != "command" {
		ru := tr.Process.RusageNs
		if ru <= 0 {
			t.Fatalf("no getrusage figure in the trace")
		}
		d := float64(tr.Summary.UsageNs-ru) / float64(ru)
		if d > 0.02 || d < -0.02 {
			t.Errorf("usage %.1fms differs from getrusage %.1fms by %.2f%% (limit 2%%)", float64(tr.Summary.UsageNs)/1e6, float64(ru)/1e6, 100*d)
		}
		// The workload's start and exit, as it reported them: within what
		// the group was charged, and its clock started within a second of
		// the run's.
		pr := tr.Process
		if pr.StartCPUNs <= 0 || pr.ExitCPUNs < 0 || pr.StartCPUNs+pr.ExitCPUNs > tr.Summary.UsageNs || pr.ReleasedNs < -int64(time.Second) || pr.ReleasedNs > int64(time.Second) {
			t.Errorf("process start %v, exit %v, released at %v: want a start, both within the run's usage %v, and a release within a second",
				time.Duration(pr.StartCPUNs), time.Duration(pr.ExitCPUNs), time.Duration(pr.ReleasedNs), time.Duration(tr.Summary.UsageNs))
		}
	}
	if o := tr.Summary.OthersBusyCPUs; o == nil || *o < 0 || *o > float64(tr.Host.CPUs) {
		t.Errorf("summary.others_busy_cpus %v: want a measurement from 0 to the host's %d CPUs", o, tr.Host.CPUs)
	}
	// cfsprobe's own threads read the counters every sample interval: some
	// CPU time, and far less than a CPU (0.008 on this host, 0.06 to 0.08
	// under emulation).
	if c := tr.Summary.SelfBusyCPUs; c == nil || *c <= 0 || *c > 0.5 {
		t.Errorf("summary.self_busy_cpus %v: want cfsprobe's own CPU, above 0 and well under a CPU", c)
	}
}

// processGone reports whether pid no longer runs (a zombie counts as gone).
func processGone(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i > 0 && len(s) > i+2 && s[i+2] == 'Z'
}

// waitFor polls cond until it holds or the timeout passes.
func waitFor(timeout time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if cond() {
			return true
		}
		time.Sleep(20 * time.Millisecond)
	}
	return cond()
}

type traceT = *trace.Trace

var lookPath = exec.LookPath

// requireTools: under CFSPROBE_REQUIRE_CGROUPS=1 (CI), a missing external
// tool (sysbench) is a failure too: make test installs it.
func requireTools() bool { return testenv.Required() }

func contains(s, sub string) bool { return strings.Contains(s, sub) }
