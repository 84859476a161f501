package recommend

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cfsprobe/cfsprobe/internal/cgroup"
	"github.com/cfsprobe/cfsprobe/internal/lab"
	"github.com/cfsprobe/cfsprobe/internal/testenv"
	"github.com/cfsprobe/cfsprobe/internal/trace"
	"github.com/cfsprobe/cfsprobe/internal/workload"
)

var verifyParent = testenv.ParentName("recommend")

// builtinTrace is a trace of the built-in workload name run with args
// under lim, as far as Verify reads it: its spec and its limits.
func builtinTrace(t *testing.T, lim cgroup.Limits, name string, args ...string) *trace.Trace {
	t.Helper()
	w, err := workload.Parse(name, args)
	if err != nil {
		t.Fatal(err)
	}
	p := w.Params()
	return &trace.Trace{Schema: trace.Schema, Spec: trace.Spec{Workload: name, Args: args, Params: &p}, Limits: trace.LimitsOf(lim)}
}

func commandTrace(view *trace.View, command ...string) *trace.Trace {
	return &trace.Trace{Schema: trace.Schema, Spec: trace.Spec{Workload: "command", Args: command, View: view},
		Limits: trace.LimitsOf(cgroup.Limits{Period: cgroup.DefaultPeriod})}
}

func cpuLimits(t *testing.T, c float64) cgroup.Limits {
	t.Helper()
	l, err := cgroup.CPULimits(c, cgroup.DefaultPeriod)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// Rerunnable takes built-in workloads and commands, and refuses, saying
// why, the traces that have no program cfsprobe started.
func TestRerunnable(t *testing.T) {
	free := cgroup.Limits{Period: cgroup.DefaultPeriod}
	old := builtinTrace(t, free, "bursty", "--on", "20ms")
	old.Spec.Params = nil // written before params were recorded: read from args
	for _, tr := range []*trace.Trace{
		builtinTrace(t, free, "bursty", "--on", "20ms", "--threads", "2"),
		builtinTrace(t, free, "periodic", "--burn-cpu", "5ms"),
		builtinTrace(t, free, "parallel", "--threads", "2", "--events", "10"),
		old,
		commandTrace(nil, "sleep", "1"),
	} {
		if err := Rerunnable(tr); err != nil {
			t.Errorf("%s %v: %v", tr.Spec.Workload, tr.Spec.Args, err)
		}
	}
	simulated := builtinTrace(t, free, "bursty")
	simulated.Spec.Simulated = &trace.Simulated{Era: "6.18"}
	replayed := &trace.Trace{Spec: trace.Spec{Workload: "replay", Args: []string{"a.json"}, Simulated: &trace.Simulated{Era: "6.18"}}}
	badParams := builtinTrace(t, free, "periodic")
	badParams.Spec.Params.Periodic.Iterations = 0
	for _, c := range []struct {
		name string
		tr   *trace.Trace
		want string
	}{
		{"recorded", &trace.Trace{Spec: trace.Spec{Workload: lab.Recorded, Args: []string{"/sys/fs/cgroup/cpu/app"}}}, "recording of a live group"},
		{"synthetic", &trace.Trace{Spec: trace.Spec{Workload: "recorded", Synthetic: "prometheus http://localhost:9090"}}, "synthetic (prometheus"},
		{"simulated", simulated, "written by the simulator"},
		{"replayed", replayed, "written by the simulator"},
		{"command without a command line", commandTrace(nil), "no command line"},
		{"unknown workload", &trace.Trace{Spec: trace.Spec{Workload: "spin"}}, `unknown workload "spin"`},
		{"params out of range", badParams, "--iterations"},
	} {
		err := Rerunnable(c.tr)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error with %q", c.name, err, c.want)
			continue
		}
		// One sentence: what is wrong and what to do.
		if msg := err.Error(); regexp.MustCompile(`\. [A-Z]`).MatchString(msg) || strings.HasSuffix(msg, ".") {
			t.Errorf("%s: %q is not one sentence", c.name, msg)
		}
	}
}

// The lab's configuration of a rerun: the setting's limits (the trace's
// period when the setting has none), the workload from the trace's
// params with the thread cap as its threads, a command with the cap as
// its view, and the view a command ran with kept.
func TestRerunConfig(t *testing.T) {
	p50 := cgroup.Limits{Period: 50 * time.Millisecond, Quota: 10 * time.Millisecond}
	src := builtinTrace(t, p50, "bursty", "--threads", "4", "--on-cpu", "40ms", "--off", "960ms", "--duration", "3s")
	cfg, _, err := rerunConfig(src, Setting{Limits: cgroup.Limits{Quota: 20 * time.Millisecond}, Threads: 2}, VerifyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Limits.Period != 50*time.Millisecond || cfg.Limits.Quota != 20*time.Millisecond || cfg.Parent != cgroup.DefaultParent {
		t.Errorf("limits %+v under %q: want the trace's 50ms period, 20ms quota, the default parent", cfg.Limits, cfg.Parent)
	}
	w, err := workload.Parse(cfg.Workload, cfg.WorkloadArgs)
	if err != nil {
		t.Fatal(err)
	}
	b := w.Params().Bursty
	if b == nil || b.Threads != 2 || b.OnCPU != 80*time.Millisecond || b.Off != 920*time.Millisecond || b.Duration != 3*time.Second || len(cfg.Command) != 0 || cfg.View != nil {
		t.Errorf("capped bursty: %s %v (view %v): want 2 threads of 80ms CPU bursts, 920ms idle, for 3s", cfg.Workload, cfg.WorkloadArgs, cfg.View)
	}

	cmd := commandTrace(nil, "sh", "-c", "nproc")
	cfg, _, err = rerunConfig(cmd, Setting{Limits: cpuLimits(t, 1.5), Threads: 1}, VerifyOptions{Parent: "elsewhere"})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(cfg.Command, cmd.Spec.Args) || cfg.View == nil || cfg.View.CPUs != 1 || !slices.Contains(cfg.Env, "GOMAXPROCS=1") || cfg.Parent != "elsewhere" {
		t.Errorf("capped command: %v, view %+v, env %v, parent %q: want the command with a view of 1 CPU", cfg.Command, cfg.View, cfg.Env, cfg.Parent)
	}
	viewed := commandTrace(&trace.View{CPUs: 1, Auto: true, Round: "ceil"}, "nproc")
	cfg, _, err = rerunConfig(viewed, Setting{Limits: cpuLimits(t, 1.5)}, VerifyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.View == nil || !cfg.View.Auto || cfg.View.Round != "ceil" || cfg.View.CPUs != 2 {
		t.Errorf("a command that ran with --view auto --view-round ceil, rerun under 1.5 CPUs: view %+v, want auto, ceil, 2 CPUs", cfg.View)
	}
	if _, _, err := rerunConfig(src, Setting{Threads: -1}, VerifyOptions{}); err == nil || !strings.Contains(err.Error(), "thread cap of -1") {
		t.Errorf("a negative thread cap: %v", err)
	}
}

// Bad input is a *lab.UserError, found before any rerun starts.
func TestVerifyAllRefusesBeforeRunning(t *testing.T) {
	src := builtinTrace(t, cgroup.Limits{Period: cgroup.DefaultPeriod}, "bursty", "--duration", "100ms")
	started := 0
	opt := VerifyOptions{Parent: verifyParent, Progress: func(int, int, Setting) { started++ }}
	recorded := &trace.Trace{Spec: trace.Spec{Workload: lab.Recorded}}
	tooSmall := Setting{Limits: cgroup.Limits{Period: cgroup.DefaultPeriod, Quota: time.Microsecond}}
	for _, c := range []struct {
		name     string
		tr       *trace.Trace
		settings []Setting
	}{
		{"not rerunnable", recorded, []Setting{{}}},
		{"negative thread cap last", src, []Setting{{}, {Threads: -2}}},
		{"quota below the kernel's minimum last", src, []Setting{{}, tooSmall}},
	} {
		_, err := VerifyAll(context.Background(), c.tr, c.settings, opt)
		var ue *lab.UserError
		if !errors.As(err, &ue) || started != 0 {
			t.Errorf("%s: %v (%d runs started): want a *lab.UserError and no run", c.name, err, started)
		}
	}
}

// verifyTries reruns what check measures up to three times: the machine
// is shared, and a preempted run can miss a bound.
func verifyTries(t *testing.T, check func() error) {
	t.Helper()
	l := testenv.NeedCgroups(t)
	t.Cleanup(func() { testenv.NoLeftovers(t, l, verifyParent) })
	var err error
	for try := 1; try <= 3; try++ {
		if err = check(); err == nil {
			return
		}
		t.Logf("try %d: %v", try, err)
	}
	t.Fatal(err)
}

// A bursty trace rerun under 2 CPUs, under a tight limit and with no
// limit: the throttled ratios order as the settings say, and the reruns
// run the trace's workload. Its bursts are amounts of CPU time (--on-cpu;
// 0.67 CPU on average), so that under 0.1 CPU every burst outlasts
// several periods' quota however busy the host is, and under 2 CPUs none
// can use the quota.
func TestVerifyOrdersSettings(t *testing.T) {
	src := builtinTrace(t, cpuLimits(t, 0.1), "bursty", "--on-cpu", "40ms", "--off", "20ms", "--duration", "1500ms")
	two, tight := Setting{Limits: cpuLimits(t, 2)}, Setting{Limits: cpuLimits(t, 0.1)}
	verifyTries(t, func() error {
		runs, err := VerifyAll(context.Background(), src, []Setting{two, tight, Reference(two)}, VerifyOptions{Parent: verifyParent})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range runs {
			if r.Trace.Spec.Workload != "bursty" || *r.Trace.Spec.Params.Bursty != *src.Spec.Params.Bursty {
				t.Fatalf("under %s ran %s %+v, want the trace's %+v", r.Setting, r.Trace.Spec.Workload, r.Trace.Spec.Params, src.Spec.Params.Bursty)
			}
			if r.Trace.Limits.Cgroup() != r.Setting.Limits {
				t.Fatalf("under %s the rerun's limits are %+v", r.Setting, r.Trace.Limits)
			}
		}
		loose, tightRatio := runs[0].Trace.Summary.ThrottledRatio, runs[1].Trace.Summary.ThrottledRatio
		ref := runs[2].Trace
		t.Logf("throttled ratio under %s %.2f, under %s %.2f; unlimited: %d periods counted, burst p99.9 %v",
			two, loose, tight, tightRatio, ref.Summary.NrPeriods, time.Duration(ref.Summary.LatencyNs.P999))
		switch {
		case !ref.Limits.Unlimited() || ref.Summary.NrThrottled != 0:
			return fmt.Errorf("the reference run has limits %+v and %d throttled periods", ref.Limits, ref.Summary.NrThrottled)
		case loose > 0.05:
			return fmt.Errorf("under %s %.2f of the periods were throttled, want at most 0.05", two, loose)
		case tightRatio < 0.5 || tightRatio < loose+0.4:
			return fmt.Errorf("under %s %.2f of the periods were throttled, want at least 0.5 and 0.4 more than under %s (%.2f)", tight, tightRatio, two, loose)
		}
		return nil
	})
}

// A thread cap on a closed workload: 4 threads' work done by the cap's
// one thread uses about the same CPU time as the 4 threads did (within
// 15 %), and the rerun's spec says it ran one thread.
func TestVerifyThreadCapKeepsWork(t *testing.T) {
	src := builtinTrace(t, cpuLimits(t, 1), "periodic", "--threads", "4", "--burn-cpu", "10ms", "--sleep", "90ms", "--iterations", "12", "--quiet")
	capped := Setting{Limits: cpuLimits(t, 1), Threads: 1}
	verifyTries(t, func() error {
		runs, err := VerifyAll(context.Background(), src, []Setting{{}, capped}, VerifyOptions{Parent: verifyParent})
		if err != nil {
			t.Fatal(err)
		}
		all, one := runs[0].Trace, runs[1].Trace
		if p := one.Spec.Params.Periodic; p.Threads != 1 || p.BurnCPU != 40*time.Millisecond || p.Iterations != 12 {
			t.Fatalf("capped rerun ran %+v, want 1 thread of 12 40ms CPU burns", p)
		}
		if p := all.Spec.Params.Periodic; p.Threads != 4 {
			t.Fatalf("uncapped rerun ran %+v, want 4 threads", p)
		}
		ua, uo := all.Summary.UsageNs, one.Summary.UsageNs
		t.Logf("CPU time: 4 threads %v, capped to 1 %v; capped op p99 %v", time.Duration(ua), time.Duration(uo), time.Duration(one.Summary.LatencyNs.P99))
		if math.Abs(float64(uo-ua)) > 0.15*float64(ua) {
			return fmt.Errorf("CPU time of the capped rerun %v, of the 4 threads %v: more than 15 %% apart", time.Duration(uo), time.Duration(ua))
		}
		return nil
	})
}

// A command rerun under a thread cap sees the cap as its CPU count,
// through its runtimes' variables and libc (the view); with no cap and
// no view it sees the host's CPUs.
func TestVerifyCommandView(t *testing.T) {
	src := commandTrace(nil, "sh", "-c", `echo "$GOMAXPROCS $(nproc)"`)
	verifyTries(t, func() error {
		var out bytes.Buffer
		opt := VerifyOptions{Parent: verifyParent, Stdout: &out}
		capped, err := Verify(context.Background(), src, Setting{Limits: cpuLimits(t, 1), Threads: 1}, opt)
		if err != nil {
			t.Fatal(err)
		}
		cappedOut := out.String()
		out.Reset()
		free, err := Verify(context.Background(), src, Setting{}, opt)
		if err != nil {
			t.Fatal(err)
		}
		if capped.Spec.View == nil || capped.Spec.View.CPUs != 1 || free.Spec.View != nil {
			t.Fatalf("views: capped %+v, free %+v; want 1 CPU and none", capped.Spec.View, free.Spec.View)
		}
		if cappedOut != "1 1\n" {
			return fmt.Errorf("the capped command printed %q, want %q (GOMAXPROCS and nproc)", cappedOut, "1 1\n")
		}
		if want := fmt.Sprintf("%s %d\n", os.Getenv("GOMAXPROCS"), runtime.NumCPU()); out.String() != want {
			return fmt.Errorf("the command with no cap printed %q, want %q", out.String(), want)
		}
		return nil
	})
}

// A command that sets its thread count itself runs on more CPUs than a
// thread cap's view gives it, and its rerun says the cap did not hold;
// one that sizes its threads by the CPU count keeps to the cap, and its
// rerun says nothing of it.
func TestVerifyCapNotHeld(t *testing.T) {
	spin := `timeout 2 sh -c 'while :; do :; done'` // 20 periods: one at least with both loops running, on a busy host too
	ownCount := commandTrace(nil, "sh", "-c", "for i in 1 2; do "+spin+" & done; wait")
	byView := commandTrace(nil, "sh", "-c", "for i in $(seq $(nproc)); do "+spin+" & done; wait")
	capped := Setting{Limits: cgroup.Limits{Period: cgroup.DefaultPeriod}, Threads: 1}
	verifyTries(t, func() error {
		opt := VerifyOptions{Parent: verifyParent, Stdout: io.Discard}
		own, err := VerifyAll(context.Background(), ownCount, []Setting{capped}, opt)
		if err != nil {
			t.Fatal(err)
		}
		view, err := VerifyAll(context.Background(), byView, []Setting{capped}, opt)
		if err != nil {
			t.Fatal(err)
		}
		w := strings.Join(own[0].Warnings, "; ")
		if !strings.Contains(w, "the thread cap did not hold: with a CPU view of 1 CPU the command ran on 2 CPUs at once") {
			return fmt.Errorf("2 spinning loops under a cap of 1: warnings %q, want the cap not held on 2 CPUs", w)
		}
		if w := strings.Join(view[0].Warnings, "; "); strings.Contains(w, "did not hold") {
			return fmt.Errorf("$(nproc) spinning loops under a cap of 1: warnings %q, want none of the cap; its periods' running CPUs: %s", w, runningCPUs(view[0].Trace))
		}
		return nil
	})
}

// runningCPUs lists a trace's periods as running CPUs over length, for a
// test's failure.
func runningCPUs(tr *trace.Trace) string {
	var b strings.Builder
	for i, p := range tr.Periods {
		if i > 0 {
			b.WriteString(" ")
		}
		fmt.Fprintf(&b, "%.3f/%v", p.Running(), p.Length().Round(100*time.Microsecond))
	}
	return b.String()
}
