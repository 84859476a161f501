package main

// Issue 5's "Must show" list for cfsprobe cpus, exec and run --view, on
// real cgroups and real programs (nproc, getconf, Python, a C++ program,
// /sys/devices/system/cpu/online, nginx).

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cfsprobe/cfsprobe/internal/cgroup"
	"github.com/cfsprobe/cfsprobe/internal/cpuview"
	"github.com/cfsprobe/cfsprobe/internal/testenv"
	"github.com/cfsprobe/cfsprobe/internal/tied"
)

// needTool skips without a program (fails under CFSPROBE_REQUIRE_CGROUPS=1).
func needTool(t *testing.T, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		if requireTools() {
			t.Fatalf("%s is not installed (%s=1 makes this a failure)", name, testenv.RequireEnv)
		}
		t.Skipf("%s is not installed", name)
	}
	return p
}

// needLibrary skips (fails under CFSPROBE_REQUIRE_CGROUPS=1) when the
// binary under test was built without the cpuview library.
func needLibrary(t *testing.T) {
	t.Helper()
	r := cfsprobe(t, "exec", "--print-env")
	if r.code != 0 {
		t.Fatalf("exec --print-env: exit %d\n%s", r.code, r.stderr)
	}
	if !strings.Contains(r.stdout, "LD_PRELOAD=") {
		if testenv.Required() {
			t.Fatalf("the cfsprobe under test has no cpuview library (%s=1 makes this a failure): build it with make preload before the tests\n%s", testenv.RequireEnv, r.stderr)
		}
		t.Skipf("the cfsprobe under test has no cpuview library (make preload)")
	}
}

// hostCPUs is what a program that ignores cgroups sees: the online list
// and its count. The tests need 2 CPUs or more to tell a view of 1 apart.
func hostCPUs(t *testing.T) (string, int) {
	t.Helper()
	b, err := os.ReadFile("/sys/devices/system/cpu/online")
	if err != nil {
		t.Fatal(err)
	}
	list := strings.TrimSpace(string(b))
	cpus, err := cgroup.ParseCPUList(list)
	if err != nil {
		t.Fatal(err)
	}
	if len(cpus) < 2 {
		t.Skipf("this host has %d CPU: a view of 1 CPU looks the same as the host", len(cpus))
	}
	return list, len(cpus)
}

var kvLine = regexp.MustCompile(`(?m)^(nproc|getconf|python|cxx|online)=(.*)$`)

// Must show 1 (all but nginx): inside a group with --cpus 1, under
// cfsprobe exec --cpus auto, nproc, getconf _NPROCESSORS_ONLN, Python's
// os.cpu_count(), C++ hardware_concurrency() and
// /sys/devices/system/cpu/online say 1 CPU; without exec, the host's.
func TestExecViewCommonPrograms(t *testing.T) {
	needCgroups(t)
	needLibrary(t)
	online, n := hostCPUs(t)
	for _, tool := range []string{"nproc", "getconf", "python3", "g++"} {
		needTool(t, tool)
	}
	dir := t.TempDir()
	src := filepath.Join(dir, "hc.cc")
	hc := filepath.Join(dir, "hc")
	prog := "#include <iostream>\n#include <thread>\nint main() { std::cout << std::thread::hardware_concurrency() << std::endl; }\n"
	if err := os.WriteFile(src, []byte(prog), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("g++", "-O1", "-o", hc, src).CombinedOutput(); err != nil {
		t.Fatalf("g++: %v\n%s", err, out)
	}
	script := `echo nproc=$(nproc)
echo getconf=$(getconf _NPROCESSORS_ONLN)
echo python=$(python3 -c 'import os; print(os.cpu_count())')
echo cxx=$(` + hc + `)
echo online=$(cat /sys/devices/system/cpu/online)`

	measure := func(view bool) map[string]string {
		t.Helper()
		args := []string{"run", "--cpus", "1", "--parent", testParent, "--"}
		if view {
			args = append(args, bin, "exec", "--cpus", "auto", "--")
		}
		r := cfsprobe(t, append(args, "sh", "-c", script)...)
		if r.code != 0 {
			t.Fatalf("cfsprobe %s: exit %d\n%s", strings.Join(args, " "), r.code, r.stderr)
		}
		if strings.Contains(r.stderr, "warning") {
			t.Errorf("view %v: warnings:\n%s", view, r.stderr)
		}
		got := map[string]string{}
		for _, m := range kvLine.FindAllStringSubmatch(r.stdout, -1) {
			got[m[1]] = m[2]
		}
		t.Logf("view %v: %v", view, got)
		return got
	}
	host := fmt.Sprint(n)
	with, without := measure(true), measure(false)
	for _, k := range []string{"nproc", "getconf", "python", "cxx", "online"} {
		wantWith, wantWithout := "1", host
		if k == "online" {
			wantWith, wantWithout = "0", online
		}
		if with[k] != wantWith {
			t.Errorf("%s under cfsprobe exec --cpus auto in a 1-CPU group: %q, want %q", k, with[k], wantWith)
		}
		if without[k] != wantWithout {
			t.Errorf("%s in a 1-CPU group without exec: %q, want the host's %q", k, without[k], wantWithout)
		}
	}
}

// Must show 1, nginx: worker_processes auto starts one worker per CPU it
// sees: 1 under cfsprobe exec in a 1-CPU group, the host's count without.
func TestExecViewNginxWorkers(t *testing.T) {
	needCgroups(t)
	needLibrary(t)
	_, n := hostCPUs(t)
	needTool(t, "nginx")
	if got := nginxWorkers(t, true); got != 1 {
		t.Errorf("nginx under cfsprobe exec --cpus auto in a 1-CPU group started %d workers, want 1", got)
	}
	if got := nginxWorkers(t, false); got != n {
		t.Errorf("nginx in a 1-CPU group without exec started %d workers, want the host's %d", got, n)
	}
}

// nginxWorkers starts nginx (worker_processes auto, in a temporary prefix,
// on a free loopback port) under cfsprobe run --cpus 1, counts the
// master's children once their number holds still, and stops it all.
func nginxWorkers(t *testing.T, view bool) int {
	t.Helper()
	prefix := t.TempDir()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	conf := fmt.Sprintf(`worker_processes auto;
daemon off;
pid %[1]s/nginx.pid;
error_log %[1]s/error.log;
events { worker_connections 16; }
http {
	access_log off;
	client_body_temp_path %[1]s/body;
	proxy_temp_path %[1]s/proxy;
	fastcgi_temp_path %[1]s/fastcgi;
	uwsgi_temp_path %[1]s/uwsgi;
	scgi_temp_path %[1]s/scgi;
	server { listen 127.0.0.1:%[2]d; }
}
`, prefix, port)
	confFile := filepath.Join(prefix, "nginx.conf")
	if err := os.WriteFile(confFile, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	args := []string{"run", "--cpus", "1", "--parent", testParent, "--"}
	if view {
		args = append(args, bin, "exec", "--cpus", "auto", "--")
	}
	args = append(args, "nginx", "-p", prefix, "-c", confFile, "-e", filepath.Join(prefix, "error.log"))
	run := exec.Command(bin, args...)
	var out, errb bytes.Buffer
	run.Stdout, run.Stderr = &out, &errb
	if err := tied.Start(run); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- run.Wait() }()
	stopped := false
	// cfsprobe run kills what is left in its group on SIGTERM.
	t.Cleanup(func() {
		if stopped {
			return
		}
		_ = run.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = run.Process.Kill()
			<-done
		}
	})
	var master int
	if !waitFor(10*time.Second, func() bool {
		b, err := os.ReadFile(filepath.Join(prefix, "nginx.pid"))
		if err != nil {
			return false
		}
		master, err = strconv.Atoi(strings.TrimSpace(string(b)))
		return err == nil
	}) {
		el, _ := os.ReadFile(filepath.Join(prefix, "error.log"))
		t.Fatalf("nginx wrote no pid file in 10s\nerror.log:\n%s\ncfsprobe:\n%s", el, errb.String())
	}
	children := func() int {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", master, master))
		return len(strings.Fields(string(b)))
	}
	count, same := 0, 0
	waitFor(10*time.Second, func() bool {
		c := children()
		if c > 0 && c == count {
			same++
		} else {
			count, same = c, 0
		}
		time.Sleep(50 * time.Millisecond)
		return same >= 6 // unchanged for about half a second
	})
	_ = syscall.Kill(master, syscall.SIGQUIT)
	select {
	case <-done:
		stopped = true
	case <-time.After(15 * time.Second):
		t.Errorf("nginx did not stop within 15s of SIGQUIT")
	}
	if !processGone(master) {
		t.Errorf("nginx master %d still runs", master)
	}
	t.Logf("view %v: nginx started %d workers", view, count)
	return count
}

// Must show 2 and 3 on real groups: cfsprobe cpus --json for groups with
// quotas of 0.5, 1 and 1.5 CPUs, a cpuset of one CPU, and a parent tighter
// than its child (also through --pid, for a process in the child).
func TestCpusJSONRealGroups(t *testing.T) {
	l := needCgroups(t)
	_, n := hostCPUs(t)
	g := &realGroups{t: t, l: l}
	t.Cleanup(g.remove)
	g.mkdir(l.CPU, "")
	cases := []cpusCase{
		{name: "half", quota: map[string]int{"half": 50000}, group: "half", eff: 0.5, ceil: 1, floor: 1, nearest: 1, limitedBy: "quota", tightest: "half"},
		{name: "one", quota: map[string]int{"one": 100000}, group: "one", eff: 1, ceil: 1, floor: 1, nearest: 1, limitedBy: "quota", tightest: "one"},
		{name: "one-and-half", quota: map[string]int{"one-and-half": 150000}, group: "one-and-half", eff: 1.5, ceil: 2, floor: 1, nearest: 2, limitedBy: "quota", tightest: "one-and-half"},
		{name: "cpuset-one", cpuset: "0", group: "cpuset-one", eff: 1, ceil: 1, floor: 1, nearest: 1, limitedBy: "cpuset"},
		{name: "parent-tighter", quota: map[string]int{"tight": 50000}, group: "tight/child", eff: 0.5, ceil: 1, floor: 1, nearest: 1, limitedBy: "quota", tightest: "tight"},
	}
	// v1 refuses a child quota above its parent's (EINVAL): there the child
	// has none, which is what a runtime reading only its own group misses.
	// v2 takes any child quota and enforces the tightest.
	if l.CPU.Version == 2 {
		cases[len(cases)-1].quota["tight/child"] = 150000
	}
	for _, c := range cases {
		// Parents first.
		parts := strings.Split(c.group, "/")
		for i := range parts {
			rel := strings.Join(parts[:i+1], "/")
			g.mkdir(l.CPU, rel)
			if q, ok := c.quota[rel]; ok {
				g.setQuota(rel, q)
			}
		}
		if c.cpuset != "" {
			if !g.makeCpuset(c.group, c.cpuset) {
				continue
			}
		}
	}
	check := func(t *testing.T, v *cpuview.View, c cpusCase) {
		t.Helper()
		if v.Cgroup != "/"+testParent+"/"+c.group {
			t.Errorf("cgroup %q, want /%s/%s", v.Cgroup, testParent, c.group)
		}
		if v.EffectiveCPUs != c.eff || v.LimitedBy != c.limitedBy {
			t.Errorf("effective %v limited by %s, want %v by %s", v.EffectiveCPUs, v.LimitedBy, c.eff, c.limitedBy)
		}
		if c.limitedBy != "cpuset" && v.UsableCPUs != n {
			t.Errorf("usable %d, want the host's %d", v.UsableCPUs, n)
		}
		got := map[string]int{}
		for _, r := range v.Rules {
			got[r.Rule] = r.Threads
		}
		if got["ceil"] != c.ceil || got["floor"] != c.floor || got["nearest"] != c.nearest || got["none"] != n {
			t.Errorf("threads %v, want ceil %d floor %d nearest %d none %d", got, c.ceil, c.floor, c.nearest, n)
		}
		tight := ""
		for _, lv := range v.Levels {
			if lv.Tightest {
				tight = lv.Cgroup
			}
		}
		want := ""
		if c.tightest != "" {
			want = "/" + testParent + "/" + c.tightest
		}
		if tight != want {
			t.Errorf("tightest level %q, want %q", tight, want)
		}
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.cpuset != "" && !g.cpusetOK {
				t.Skip("no cpuset controller to make a group of one CPU with")
			}
			path := "/" + testParent + "/" + c.group
			for _, arg := range []string{path, filepath.Join(l.CPU.Dir, testParent, c.group)} {
				v := cpusJSON(t, "--cgroup", arg)
				check(t, v, c)
			}
			if c.name != "parent-tighter" {
				return
			}
			// The same through a process in the child: --pid.
			sleep := exec.Command("sleep", "60")
			if err := tied.Start(sleep); err != nil {
				t.Fatal(err)
			}
			sleepDone := make(chan struct{})
			go func() { _ = sleep.Wait(); close(sleepDone) }()
			t.Cleanup(func() { _ = sleep.Process.Kill(); <-sleepDone })
			pid := strconv.Itoa(sleep.Process.Pid)
			if err := cgroup.WriteFile(filepath.Join(l.CPU.Dir, testParent, c.group, "cgroup.procs"), pid); err != nil {
				t.Fatal(err)
			}
			v := cpusJSON(t, "--pid", pid)
			check(t, v, c)
			if v.PID != sleep.Process.Pid || v.Affinity == nil || v.Affinity.Count != n {
				t.Errorf("pid %d affinity %+v, want pid %s with %d CPUs", v.PID, v.Affinity, pid, n)
			}
			_ = sleep.Process.Kill()
			<-sleepDone
		})
	}
}

// cpusCase is a real group and what cfsprobe cpus must say of it.
type cpusCase struct {
	name                 string
	quota                map[string]int // group (under the test parent) -> quota in us per 100ms
	cpuset               string
	group                string
	eff                  float64
	ceil, floor, nearest int
	limitedBy, tightest  string
}

func cpusJSON(t *testing.T, args ...string) *cpuview.View {
	t.Helper()
	r := cfsprobe(t, append([]string{"cpus", "--json"}, args...)...)
	if r.code != 0 {
		t.Fatalf("cfsprobe cpus --json %v: exit %d\n%s", args, r.code, r.stderr)
	}
	var v cpuview.View
	if err := json.Unmarshal([]byte(r.stdout), &v); err != nil {
		t.Fatalf("decode: %v\n%s", err, r.stdout)
	}
	if v.Schema != cpuview.Schema {
		t.Errorf("schema %q", v.Schema)
	}
	return &v
}

// realGroups makes groups under the test parent and removes them all
// (children first) when the test ends, whatever happened.
type realGroups struct {
	t        *testing.T
	l        *cgroup.Layout
	made     []string
	cpusetOK bool
}

func (g *realGroups) mkdir(h *cgroup.Hierarchy, rel string) string {
	g.t.Helper()
	d := filepath.Join(h.Dir, testParent, rel)
	if err := os.Mkdir(d, 0o755); err != nil {
		if os.IsExist(err) {
			return d
		}
		g.t.Fatalf("create cgroup: %v", err)
	}
	g.made = append(g.made, d)
	if h.Version == 2 { // let the children have the cpu (and cpuset) controller
		ctrl := "+cpu"
		if h.Has("cpuset") {
			ctrl += " +cpuset"
		}
		for _, p := range []string{filepath.Dir(d), filepath.Join(h.Dir)} {
			_ = cgroup.WriteFile(filepath.Join(p, "cgroup.subtree_control"), ctrl)
		}
		_ = cgroup.WriteFile(filepath.Join(d, "cgroup.subtree_control"), ctrl)
	}
	return d
}

func (g *realGroups) setQuota(rel string, us int) {
	g.t.Helper()
	setQuota(g.t, g.l.CPU.Version, filepath.Join(g.l.CPU.Dir, testParent, rel), us, 100000)
}

// makeCpuset gives group rel the CPUs list in the cpuset hierarchy (on v1
// its own, whose new groups start empty and need their parent's mems).
func (g *realGroups) makeCpuset(rel, cpus string) bool {
	g.t.Helper()
	h := g.l.CPUSet
	if h == nil {
		return false
	}
	if h.Version == 1 && h.Dir != g.l.CPU.Dir {
		g.mkdir(h, "")
		g.mkdir(h, rel)
	}
	parent := filepath.Join(h.Dir, testParent)
	if h.Version == 1 {
		for _, f := range []string{"cpuset.mems", "cpuset.cpus"} {
			b, err := os.ReadFile(filepath.Join(h.Dir, f))
			if err != nil {
				g.t.Fatal(err)
			}
			if err := cgroup.WriteFile(filepath.Join(parent, f), strings.TrimSpace(string(b))); err != nil {
				g.t.Fatal(err)
			}
		}
	}
	if err := cgroup.WriteFile(filepath.Join(h.Dir, testParent, rel, "cpuset.cpus"), cpus); err != nil {
		g.t.Fatal(err)
	}
	g.cpusetOK = true
	return true
}

func (g *realGroups) remove() {
	for i := len(g.made) - 1; i >= 0; i-- {
		rmCgroup(g.t, g.made[i])
	}
}

// Must show 5: a value the user set (GOMAXPROCS=3) is kept, the others are
// set, JAVA_TOOL_OPTIONS is appended to.
func TestExecKeepsUserValues(t *testing.T) {
	cmd := exec.Command(bin, "exec", "--cpus", "1", "--", "sh", "-c", `echo "$GOMAXPROCS|$OMP_NUM_THREADS|$DOTNET_PROCESSOR_COUNT|$JAVA_TOOL_OPTIONS|$CFSPROBE_CPUS"`)
	cmd.Env = append(os.Environ(), "GOMAXPROCS=3", "JAVA_TOOL_OPTIONS=-Xmx64m")
	r := cfsprobeCmd(t, cmd)
	if r.code != 0 {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	if got, want := strings.TrimSpace(r.stdout), "3|1|1|-Xmx64m -XX:ActiveProcessorCount=1|1"; got != want {
		t.Errorf("the command saw %q, want %q", got, want)
	}
	cmd = exec.Command(bin, "exec", "--cpus", "1", "--print-env")
	cmd.Env = append(os.Environ(), "GOMAXPROCS=3")
	r = cfsprobeCmd(t, cmd)
	if !strings.Contains(r.stdout, "# GOMAXPROCS=3 (kept: set already)\n") || !strings.Contains(r.stdout, "\nOMP_NUM_THREADS=1\n") {
		t.Errorf("--print-env:\n%s", r.stdout)
	}
}

// Must show 7: without a quota (a run without limits) and with cgroup
// files that cannot be read, exec's view is the real CPU count, it says so
// on stderr, and the command's exit status passes through.
func TestExecMissingInfoFallsBack(t *testing.T) {
	needCgroups(t)
	_, n := hostCPUs(t)
	r := cfsprobe(t, "run", "--parent", testParent, "--", bin, "exec", "--", "sh", "-c", `echo "view=$CFSPROBE_CPUS/$GOMAXPROCS"; exit 7`)
	if r.code != 7 {
		t.Errorf("exit %d, want the command's 7\n%s", r.code, r.stderr)
	}
	if want := fmt.Sprintf("view=%d/%d", n, n); !strings.Contains(r.stdout, want) {
		t.Errorf("the command did not see %s:\n%s", want, r.stdout)
	}
	if want := fmt.Sprintf("cfsprobe exec: warning: no CPU quota: the view is the CPU count (%d)", n); !strings.Contains(r.stderr, want) {
		t.Errorf("stderr does not say %q:\n%s", want, r.stderr)
	}

	// Nothing readable at all: an empty proc and fs root.
	empty := t.TempDir()
	cmd := exec.Command(bin, "exec", "--proc-root", empty, "--fs-root", empty, "--", "sh", "-c", `echo "view=$CFSPROBE_CPUS"; exit 3`)
	r = cfsprobeCmd(t, cmd)
	if r.code != 3 {
		t.Errorf("exit %d, want the command's 3\n%s", r.code, r.stderr)
	}
	if !strings.Contains(r.stdout, fmt.Sprintf("view=%d", n)) {
		t.Errorf("the command saw %q, want view=%d", r.stdout, n)
	}
	for _, w := range []string{"cannot read the online CPUs", "cannot read the affinity", "the view is the CPU count"} {
		if !strings.Contains(r.stderr, w) {
			t.Errorf("stderr does not say %q:\n%s", w, r.stderr)
		}
	}
}

func TestExecErrors(t *testing.T) {
	dir := t.TempDir()
	notExec := filepath.Join(dir, "script")
	if err := os.WriteFile(notExec, []byte("echo hi\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		args []string
		code int
		want string
	}{
		{[]string{"exec", "--cpus", "0", "--", "true"}, 2, `--cpus "0": give a whole number of CPUs`},
		{[]string{"exec", "--cpus", "1.5", "--", "true"}, 2, `--cpus "1.5": give a whole number of CPUs`},
		{[]string{"exec", "--round", "up", "--", "true"}, 2, `rounding "up": use ceil, floor or nearest`},
		{[]string{"exec"}, 2, "no command"},
		{[]string{"exec", "--", "cfsprobe-no-such-command"}, 127, "exec: cfsprobe-no-such-command: command not found"},
		{[]string{"exec", "--", notExec}, 126, "permission denied"},
		{[]string{"run", "--view", "0", "--", "true"}, 2, `--view "0": give a whole number of CPUs`},
		{[]string{"run", "--view-round", "ceil", "--", "true"}, 2, "--view-round rounds --view auto"},
	}
	for _, c := range cases {
		r := cfsprobe(t, c.args...)
		if r.code != c.code || !strings.Contains(r.stderr, c.want) || strings.Count(strings.TrimSpace(r.stderr), "\n") > 1 {
			t.Errorf("cfsprobe %s: exit %d, stderr %q; want exit %d and %q", strings.Join(c.args, " "), r.code, r.stderr, c.code, c.want)
		}
	}
}

func TestCpusErrors(t *testing.T) {
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"cpus", "--pid", "0"}, `--pid "0" is not a process ID`},
		{[]string{"cpus", "--pid", "abc"}, `--pid "abc" is not a process ID`},
		{[]string{"cpus", "--pid", "999999999"}, "no process 999999999"},
		{[]string{"cpus", "--cgroup", "/cfsprobe-no-such/group"}, "no group /cfsprobe-no-such/group"},
		{[]string{"cpus", "--pid", "1", "--cgroup", "/"}, "give --pid or --cgroup, not both"},
		{[]string{"cpus", "extra"}, `cpus takes no arguments, but got "extra"`},
	}
	for _, c := range cases {
		r := cfsprobe(t, c.args...)
		if r.code != 2 || !strings.Contains(r.stderr, c.want) || r.stdout != "" {
			t.Errorf("cfsprobe %s: exit %d, stderr %q; want exit 2 and %q", strings.Join(c.args, " "), r.code, r.stderr, c.want)
		}
	}
}

// cfsprobe cpus on this process prints every labelled line, and its JSON
// agrees with the text.
func TestCpusSelf(t *testing.T) {
	r := cfsprobe(t, "cpus")
	if r.code != 0 {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	for _, l := range []string{"process", "online", "affinity", "cpuset", "usable", "quota", "effective", "threads", "recommend"} {
		if !regexp.MustCompile(`(?m)^` + l + `\s`).MatchString(r.stdout) {
			t.Errorf("no %q line:\n%s", l, r.stdout)
		}
	}
	v := cpusJSON(t)
	if v.PID <= 0 || v.UsableCPUs < 1 || len(v.Rules) != 4 || v.Recommendation.Threads < 1 {
		t.Errorf("view %+v", v)
	}
}

// run --view records the view in the trace's spec; auto rounds the run's
// quota by --view-round.
func TestRunViewRecorded(t *testing.T) {
	needCgroups(t)
	hostCPUs(t)
	for _, c := range []struct {
		round string
		want  int
	}{{"floor", 1}, {"ceil", 2}} {
		tr := runTrace(t, "--cpus", "1.5", "--view", "auto", "--view-round", c.round, "--", "sh", "-c", `test "$GOMAXPROCS" = "$CFSPROBE_CPUS"`)
		v := tr.Spec.View
		if v == nil {
			t.Fatalf("no view in the trace's spec: %+v", tr.Spec)
		}
		if v.CPUs != c.want || !v.Auto || v.Round != c.round {
			t.Errorf("--view auto --view-round %s: %+v, want %d CPUs", c.round, v, c.want)
		}
		if tr.Process.ExitCode != 0 {
			t.Errorf("the command did not see GOMAXPROCS = CFSPROBE_CPUS")
		}
	}
	tr := runTrace(t, "--cpus", "1", "--view", "2", "--", "true")
	if v := tr.Spec.View; v == nil || v.CPUs != 2 || v.Auto {
		t.Errorf("--view 2: %+v", v)
	}
}

// exec needs no root: as nobody, with a home of its own, the library goes
// to ~/.cache/cfsprobe and the command sees the view.
func TestExecWithoutRoot(t *testing.T) {
	needLibrary(t)
	hostCPUs(t)
	cmd := nobodyCmd(t, "exec", "--cpus", "1", "--", "sh", "-c", `echo "$CFSPROBE_CPUS $(nproc) $(getconf _NPROCESSORS_ONLN) $LD_PRELOAD"`)
	home, err := os.MkdirTemp("", "cfsprobe-nobody-home")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(home) })
	if err := os.Chmod(home, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(home, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	cmd.Env = []string{"HOME=" + home, "PATH=" + os.Getenv("PATH")}
	r := cfsprobeCmd(t, cmd)
	if r.code != 0 {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	f := strings.Fields(r.stdout)
	if len(f) != 4 || f[0] != "1" || f[1] != "1" || f[2] != "1" || !strings.HasPrefix(f[3], filepath.Join(home, ".cache", "cfsprobe")+"/") {
		t.Errorf("as nobody the command saw %q, want \"1 1 1 %s/.cache/cfsprobe/...\"\n%s", r.stdout, home, r.stderr)
	}
	if fi, err := os.Stat(filepath.Join(home, ".cache", "cfsprobe")); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("cache directory: %v %v, want mode 0700", fi, err)
	}
}
