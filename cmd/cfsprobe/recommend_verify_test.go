package main

import (
	"encoding/json"
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cfsprobe/cfsprobe/internal/cgroup"
	"github.com/cfsprobe/cfsprobe/internal/hostfs"
	"github.com/cfsprobe/cfsprobe/internal/lab"
	"github.com/cfsprobe/cfsprobe/internal/recommend"
	"github.com/cfsprobe/cfsprobe/internal/report"
	"github.com/cfsprobe/cfsprobe/internal/suite"
)

// verifyTrace runs `cfsprobe run --json ARGS...` into a file, then
// `cfsprobe recommend --verify --json RECOMMEND...` on it, and returns
// the group.
func verifyTrace(t *testing.T, recommendArgs []string, args ...string) *recommend.Group {
	t.Helper()
	tr := runTrace(t, args...)
	file := filepath.Join(t.TempDir(), "source.json")
	if err := tr.WriteFile(file); err != nil {
		t.Fatal(err)
	}
	r := cfsprobe(t, append(append([]string{"recommend", "--verify", "--json", "--parent", testParent}, recommendArgs...), file)...)
	if r.code != 0 {
		t.Fatalf("recommend --verify: exit %d\n%s", r.code, r.stderr)
	}
	var doc recommend.Document
	if err := json.Unmarshal([]byte(r.stdout), &doc); err != nil || len(doc.Groups) != 1 || doc.Groups[0].Verified == nil {
		t.Fatalf("recommend --verify --json: %v\n%s", err, r.stdout)
	}
	g := doc.Groups[0]
	logVerified(t, g)
	return g
}

// logVerified logs every rerun: predicted against measured.
func logVerified(t *testing.T, g *recommend.Group) {
	t.Helper()
	t.Logf("recommended %s (%s, fit %dm, headroom %v): %s", g.Recommended.Setting, g.Recommended.Kind, g.Recommended.FitMillicores, g.Model.Headroom, g.Recommended.Reason)
	for _, r := range g.Verified.Runs {
		pred := "-"
		if p := r.Predicted; p != nil {
			pred = fmt.Sprintf("%.1f%% throttled, p99 stall %s, %.3f CPUs", 100*p.ThrottledRatio, report.Dur(p.StallP99Ns), p.UsedCPUs)
		}
		m := r.Measured
		t.Logf("  %-16s %-24s predicted %s; measured %.1f%% of %d periods throttled, p99 stall %s, %.3f CPUs, op p99.9 %s",
			r.Role, r.Setting, pred, 100*m.ThrottledRatio, m.Periods, report.Dur(m.StallP99Ns), m.UsedCPUs, latencyText(m.LatencyP999Ns))
	}
	t.Logf("  %s", g.Verified.Why)
}

func latencyText(ns *int64) string {
	if ns == nil {
		return "-"
	}
	return report.Dur(*ns)
}

// verifiedRun is the run of a role.
func verifiedRun(t *testing.T, g *recommend.Group, role string) recommend.VerifiedRun {
	t.Helper()
	for _, r := range g.Verified.Runs {
		if r.Role == role {
			return r
		}
	}
	t.Fatalf("no rerun of %q among %+v", role, g.Verified.Runs)
	return recommend.VerifiedRun{}
}

// metWhenRun checks issue 11's bound on the recommendation rerun:
// throttled periods ≤ 1 % and op p99.9 within 2× of the reference
// run's; and that the output's verdict says the same.
func metWhenRun(t *testing.T, g *recommend.Group) error {
	t.Helper()
	rec, ref := verifiedRun(t, g, recommend.RoleRecommended), verifiedRun(t, g, recommend.RoleReference)
	var errs []string
	if r := rec.Measured.ThrottledRatio; r > 0.01 {
		errs = append(errs, fmt.Sprintf("%.1f%% of the periods throttled under %s, want at most 1%%", 100*r, rec.Setting))
	}
	rp, fp := rec.Measured.LatencyP999Ns, ref.Measured.LatencyP999Ns
	if rp == nil || fp == nil {
		t.Fatalf("the reruns have no op latency: recommended %v, reference %v", rp, fp)
	}
	if *rp > 2**fp {
		errs = append(errs, fmt.Sprintf("op p99.9 %s under %s, more than 2× the reference's %s", report.Dur(*rp), rec.Setting, report.Dur(*fp)))
	}
	if g.Verified.Met != (len(errs) == 0) {
		t.Errorf("the output says met=%v (%s), the bounds say %v", g.Verified.Met, g.Verified.Why, errs)
	}
	if len(errs) > 0 {
		return fmt.Errorf("%s", strings.Join(errs, "; "))
	}
	return nil
}

// twice runs check, and once more when it fails: the machine is shared,
// and a preempted run can miss a bound.
func twice(t *testing.T, check func() error) {
	t.Helper()
	err := check()
	if err == nil {
		return
	}
	t.Logf("first try: %v; trying again", err)
	if err := check(); err != nil {
		t.Error(err)
	}
}

// runArgsOf is the cfsprobe run command line of a suite step's lab
// configuration, its workload run for d.
func runArgsOf(cfg lab.Config, d time.Duration) []string {
	l := cfg.Limits
	var args []string
	if !l.Unlimited() {
		args = append(args, "--period", l.Period.String(), "--quota", l.Quota.String())
		if l.Burst > 0 {
			args = append(args, "--burst", l.Burst.String())
		}
	}
	args = append(args, cfg.Workload)
	for i := 0; i < len(cfg.WorkloadArgs); i++ {
		a := cfg.WorkloadArgs[i]
		if a == "--duration" && i+1 < len(cfg.WorkloadArgs) {
			args = append(args, a, d.String())
			i++
			continue
		}
		args = append(args, a)
	}
	return args
}

// Issue 11, must show 1: the suites' throttled scenarios (their limits
// and workloads as internal/suite/suites/*.yaml write them, on this
// host's CPUs, run for 4 s), each advised from its run and the advice
// rerun: throttled periods ≤ 1 % and op p99.9 within 2× of the unlimited
// run's (the reference: the same workload, with the recommendation's
// thread cap, and no limit). The peers are item 2's: --peers=false
// leaves their reruns out.
func TestRecommendVerifyThrottledScenarios(t *testing.T) {
	needCgroups(t)
	env := suite.Env{CPUs: cgroup.OnlineCPUs(hostfs.Default()), Quick: true}
	want := map[string][]string{
		"bursty-limits":    {"C-aggressive"},
		"threads-vs-quota": {"threads-2x", "threads-4x"},
		"burst":            {"no-burst"},
	}
	for _, name := range []string{"bursty-limits", "threads-vs-quota", "burst"} {
		s, err := suite.Load(name)
		if err != nil {
			t.Fatal(err)
		}
		steps, err := s.Steps(env, lab.Config{Parent: testParent})
		if err != nil {
			t.Fatal(err)
		}
		found := 0
		for _, st := range steps {
			if !contains(strings.Join(want[name], " "), st.Scenario.Name) {
				continue
			}
			found++
			args := runArgsOf(st.Config, 4*time.Second)
			t.Run(name+"/"+st.Scenario.Name, func(t *testing.T) {
				twice(t, func() error {
					g := verifyTrace(t, []string{"--peers=false"}, args...)
					if n := len(g.Verified.Runs); n != 3 {
						t.Errorf("--peers=false reran %d roles, want 3 (recommended, current, reference)", n)
					}
					if m := g.Current.Measured; m == nil || m.Throttled == 0 {
						return fmt.Errorf("the scenario's own run was not throttled (%+v): a preempted run, or not the scenario", m)
					}
					return metWhenRun(t, g)
				})
			})
		}
		if found != len(want[name]) {
			t.Fatalf("suite %s has %d of the scenarios %v", name, found, want[name])
		}
	}
}

// Issue 11, must show 2: 4 threads busy 40 ms of CPU once a second (0.16
// CPU on average; --every: the bursts come on their own schedule, as
// requests do, so the threads burst together under any limit), run
// without a limit. The peers' limits, read from
// minute-average usage, rerun: each throttled in more than 20 % of the
// periods the kernel counts (it counts a period only while the group is
// active); cfsprobe's recommendation rerun: at most 1 %, and its p99.9
// within 2× of the unlimited run's.
func TestRecommendVerifyAveragesMislead(t *testing.T) {
	needCgroups(t)
	twice(t, func() error {
		g := verifyTrace(t, nil, "bursty", "--threads", "4", "--on-cpu", "40ms", "--every", "1s", "--duration", "10s")
		if g.Recommended.Kind == recommend.KindNoLimit || g.Recommended.Reason == "" {
			t.Errorf("recommended %s (%s), reason %q: want a limit and why", g.Recommended.Setting, g.Recommended.Kind, g.Recommended.Reason)
		}
		var errs []string
		if err := metWhenRun(t, g); err != nil {
			errs = append(errs, err.Error())
		}
		peers := 0
		for _, r := range g.Verified.Runs {
			if !strings.HasPrefix(r.Role, "peer ") {
				continue
			}
			peers++
			if m := r.Measured; m.ThrottledRatio <= 0.2 {
				errs = append(errs, fmt.Sprintf("%s, %s: %.1f%% of %d periods throttled, want more than 20%%", r.Role, r.Setting, 100*m.ThrottledRatio, m.Periods))
			}
		}
		if peers != 3 {
			t.Fatalf("%d peers rerun, want seed 003, krr and VPA", peers)
		}
		if len(errs) > 0 {
			return fmt.Errorf("%s", strings.Join(errs, "; "))
		}
		return nil
	})
}

// The table of --verify shows predicted beside measured, and progress
// goes to stderr (a setting that is also the current one is rerun once,
// "(recommended, current)").
func TestRecommendVerifyTable(t *testing.T) {
	needCgroups(t)
	tr := runTrace(t, "--cpus", "0.2", "bursty", "--on-cpu", "20ms", "--off", "80ms", "--duration", "1s")
	file := filepath.Join(t.TempDir(), "b.json")
	if err := tr.WriteFile(file); err != nil {
		t.Fatal(err)
	}
	r := cfsprobe(t, "recommend", "--verify", "--parent", testParent, file)
	if r.code != 0 {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	for _, w := range []string{"verified: each setting rerun", "predicted / measured", "RECOMMENDED", "peer VPA", "current", "reference", "the rule:"} {
		if !strings.Contains(r.stdout, w) {
			t.Errorf("no %q in\n%s", w, r.stdout)
		}
	}
	if !strings.Contains(r.stderr, "rerun 1 of") || !strings.Contains(r.stderr, "(recommended") {
		t.Errorf("no progress on stderr:\n%s", r.stderr)
	}
}

// Issue 11, must show 3: the same workload, a thread that burns 120 ms
// of CPU once a second, run for 30 s without a limit and under a
// too-tight one (0.2 CPU: each burst takes 6 periods, throttled in most
// active periods). The advice from the throttled run, whose periods are
// lower bounds of the demand, is the same kind within 15 % of the advice
// from the unlimited run, not shrunk toward 0.2 CPU. (Threads that
// burst together may not stay together under such a limit, and then
// their recording shows a smaller demand: docs/recommend.md, "Demand
// and censoring".)
func TestRecommendCensoredRealCgroups(t *testing.T) {
	needCgroups(t)
	workload := []string{"bursty", "--threads", "1", "--on-cpu", "120ms", "--off", "880ms", "--duration", "30s"}
	advise := func(t *testing.T, limits ...string) *recommend.Group {
		tr := runTrace(t, append(limits, workload...)...)
		file := filepath.Join(t.TempDir(), "run.json")
		if err := tr.WriteFile(file); err != nil {
			t.Fatal(err)
		}
		r := cfsprobe(t, "recommend", "--json", file)
		var doc recommend.Document
		if r.code != 0 || json.Unmarshal([]byte(r.stdout), &doc) != nil || len(doc.Groups) != 1 {
			t.Fatalf("recommend %v: exit %d\n%s%s", limits, r.code, r.stdout, r.stderr)
		}
		g := doc.Groups[0]
		t.Logf("under %v: %s (%s), demand %s (%s)", limits, g.Recommended.Setting, g.Recommended.Kind, g.Model.Demand, g.Model.DemandFrom)
		return g
	}
	twice(t, func() error {
		// The two runs go side by side (one thread each, busy 120 ms a
		// second: a CPU each at most, of this machine's two), which
		// halves the test's time.
		var free, tight *recommend.Group
		t.Run("runs", func(t *testing.T) {
			t.Run("unlimited", func(t *testing.T) { t.Parallel(); free = advise(t) })
			t.Run("0.2 CPU", func(t *testing.T) { t.Parallel(); tight = advise(t, "--cpus", "0.2") })
		})
		if free == nil || tight == nil {
			t.FailNow()
		}
		if m := tight.Current.Measured; m == nil || m.ThrottledRatio < 0.5 {
			return fmt.Errorf("the run under 0.2 CPU was throttled in %+v of its periods, want most: not the case under test", m)
		}
		a, b := free.Recommended.Setting.Limits.CPUs(), tight.Recommended.Setting.Limits.CPUs()
		if free.Recommended.Kind != tight.Recommended.Kind || a == 0 || math.Abs(a-b) > 0.15*a || b <= 0.3 {
			return fmt.Errorf("advised %s (%s) from the unlimited run and %s (%s) from the one under 0.2 CPU: want the same kind within 15%%",
				free.Recommended.Setting, free.Recommended.Kind, tight.Recommended.Setting, tight.Recommended.Kind)
		}
		return nil
	})
}
