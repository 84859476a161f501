package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/cfsprobe/cfsprobe/internal/trace"
)

// cfsprobe record follows a group that someone else made and throttles: a
// shell loop in a hand-made group (mkdir in every hierarchy with cpu or
// cpuacct, as cgcreate -g cpu,cpuacct:/x does), 0.2 CPUs. Its timeline's
// throttled periods are the kernel's nr_throttled delta over the
// recording (within what cpu.stat counted just before and after it);
// report renders the trace; check --from-traces reads it; record --pid
// finds the group of the loop, and so does record --cgroup.
func TestRecordHandMadeGroup(t *testing.T) {
	l := needCgroups(t)
	name := fmt.Sprintf("cfsprobe-record-%d", os.Getpid())
	dirs := handMadeGroup(t, l, name)
	setQuota(t, l.CPU.Version, dirs[0], 20000, 100000)
	busy := busyLoop(t, dirs...)

	out := filepath.Join(t.TempDir(), "recorded.json")
	before := readStat(t, l, name)
	r := cfsprobe(t, "record", "/"+name, "--duration", "3s", "--out", out)
	after := readStat(t, l, name)
	if r.code != 0 {
		t.Fatalf("record: exit %d\n%s", r.code, r.stderr)
	}
	tr, err := trace.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	s := tr.Summary
	t.Logf("recorded %d periods, %d throttled (timeline %d); cpu.stat over the command: %d throttled; usage %.3f CPUs",
		s.NrPeriods, s.NrThrottled, s.TimelineThrottled, after.NrThrottled-before.NrThrottled, s.CPURatio)
	if tr.Spec.Workload != "recorded" || tr.Latency != nil || tr.Cgroup.Path != "/"+name {
		t.Errorf("spec %+v, cgroup %+v, latency %v: want a recording of /%s without latency", tr.Spec, tr.Cgroup, tr.Latency, name)
	}
	if s.TimelineThrottled != s.NrThrottled || s.NrThrottled > after.NrThrottled-before.NrThrottled || s.NrThrottled < 25 {
		t.Errorf("timeline throttled %d, recorded nr_throttled %d, cpu.stat %d over the command: want equal, at most cpu.stat's and about 30",
			s.TimelineThrottled, s.NrThrottled, after.NrThrottled-before.NrThrottled)
	}
	if int64(len(tr.Periods)) != s.NrPeriods {
		t.Errorf("%d periods in the timeline, the kernel counted %d", len(tr.Periods), s.NrPeriods)
	}
	if s.CPURatio < 0.1 || s.CPURatio > 0.3 {
		t.Errorf("usage %.3f CPUs, want about the 0.2 CPU limit", s.CPURatio)
	}

	if r := cfsprobe(t, "report", out); r.code != 0 || !strings.Contains(r.stdout, "recorded /"+name) || !strings.Contains(r.stdout, "throttled") {
		t.Errorf("report: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r := cfsprobe(t, "check", "--from-traces", out); r.code == 2 || r.code > 3 || !strings.Contains(r.stdout, "periods") {
		t.Errorf("check --from-traces: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = cfsprobe(t, "record", "--pid", strconv.Itoa(busy.Process.Pid), "--duration", "500ms", "--json")
	if r.code != 0 {
		t.Fatalf("record --pid: exit %d\n%s", r.code, r.stderr)
	}
	byPID, err := trace.Read(strings.NewReader(r.stdout))
	if err != nil {
		t.Fatal(err)
	}
	if byPID.Cgroup.Path != "/"+name {
		t.Errorf("record --pid %d recorded %s, want /%s", busy.Process.Pid, byPID.Cgroup.Path, name)
	}
	// --cgroup names it as recommend --cgroup does.
	r = cfsprobe(t, "record", "--cgroup", "/"+name, "--duration", "500ms", "--json")
	if r.code != 0 {
		t.Fatalf("record --cgroup: exit %d\n%s", r.code, r.stderr)
	}
	byFlag, err := trace.Read(strings.NewReader(r.stdout))
	if err != nil {
		t.Fatal(err)
	}
	if byFlag.Cgroup.Path != "/"+name || !slices.Equal(byFlag.Spec.Args, []string{"--cgroup", "/" + name}) {
		t.Errorf("record --cgroup /%s recorded %s (spec.args %q), want /%s named by --cgroup", name, byFlag.Cgroup.Path, byFlag.Spec.Args, name)
	}
}
