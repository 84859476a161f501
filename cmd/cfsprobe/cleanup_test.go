package main

// Nothing is left behind: after a run ends normally, on Ctrl-C, on SIGTERM,
// or after SIGKILL followed by `cfsprobe cleanup`, no group directory, no
// parent group and no workload process remains. cleanup never touches a
// live run's group nor a directory whose name is not one of cfsprobe's.

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cfsprobe/cfsprobe/internal/cgroup"
	"github.com/cfsprobe/cfsprobe/internal/tied"
	"github.com/cfsprobe/cfsprobe/internal/trace"
)

// bgRun is a `cfsprobe run` started in the background.
type bgRun struct {
	cmd            *exec.Cmd
	stdout, stderr bytes.Buffer // read only after done
	done           chan struct{}
	code           int
}

// startRun starts `cfsprobe run --parent testParent ARGS...`. Whatever
// happens to the test, its cleanup stops the run, kills the workload's
// tasks and removes the run's groups.
func startRun(t *testing.T, l *cgroup.Layout, args ...string) *bgRun {
	t.Helper()
	r := &bgRun{done: make(chan struct{})}
	r.cmd = exec.Command(bin, append([]string{"run", "--parent", testParent}, args...)...)
	r.cmd.Stdout, r.cmd.Stderr = &r.stdout, &r.stderr
	// Tasks left in the group after cfsprobe died (the forked children of
	// a command after SIGKILL) hold the output pipes open: stop waiting
	// for them once cfsprobe itself has exited.
	r.cmd.WaitDelay = time.Second
	if err := tied.Start(r.cmd); err != nil {
		t.Fatalf("start %v: %v", r.cmd.Args, err)
	}
	go func() {
		err := r.cmd.Wait()
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			r.code = ee.ExitCode()
		} else if err != nil {
			r.code = -1
		}
		close(r.done)
	}()
	t.Cleanup(func() {
		if !r.wait(0) {
			_ = r.cmd.Process.Signal(syscall.SIGTERM) // let it remove its group
			if !r.wait(5 * time.Second) {
				_ = r.cmd.Process.Kill()
				<-r.done
			}
		}
		removeRunGroups(t, l, r.cmd.Process.Pid)
	})
	return r
}

// wait waits up to timeout for the run to end and reports whether it did.
func (r *bgRun) wait(timeout time.Duration) bool {
	select {
	case <-r.done:
		return true
	case <-time.After(timeout):
		return false
	}
}

// finish waits for the run to end, failing the test after timeout.
func (r *bgRun) finish(t *testing.T, timeout time.Duration) {
	t.Helper()
	if !r.wait(timeout) {
		t.Fatalf("%v still runs after %v", r.cmd.Args, timeout)
	}
}

// runGroups lists the group directories of the run in every hierarchy.
func runGroups(l *cgroup.Layout, cfsprobePID int) []string {
	var out []string
	for _, root := range layoutRoots(l) {
		m, _ := filepath.Glob(filepath.Join(root, testParent, fmt.Sprintf("run-%d-*", cfsprobePID)))
		out = append(out, m...)
	}
	return out
}

// waitTasks waits until the run's group in the cpu hierarchy holds tasks
// for which ready holds, and returns the group's directory and tasks.
func waitTasks(t *testing.T, l *cgroup.Layout, r *bgRun, ready func([]int) bool) (string, []int) {
	t.Helper()
	pattern := filepath.Join(l.CPU.Dir, testParent, fmt.Sprintf("run-%d-*", r.cmd.Process.Pid))
	var dir string
	var pids []int
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if m, _ := filepath.Glob(pattern); len(m) == 1 {
			dir = m[0]
			pids, _ = groupTasks(dir)
			if len(pids) > 0 && ready(pids) {
				return dir, pids
			}
		}
		if r.wait(0) {
			t.Fatalf("%v ended (exit %d) before its group had its tasks\nstderr:\n%s", r.cmd.Args, r.code, r.stderr.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("no group %s with its tasks after 10s (last seen: %q, tasks %v)", pattern, dir, pids)
	return "", nil
}

func anyTask([]int) bool { return true }

// groupTasks reads a group's cgroup.procs.
func groupTasks(dir string) ([]int, error) {
	b, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
	if err != nil {
		return nil, err
	}
	var pids []int
	for _, f := range strings.Fields(string(b)) {
		if p, err := strconv.Atoi(f); err == nil {
			pids = append(pids, p)
		}
	}
	return pids, nil
}

// layoutRoots are the hierarchy roots of the layout, each once.
func layoutRoots(l *cgroup.Layout) []string {
	var roots []string
	for _, h := range l.Hierarchies() {
		roots = append(roots, h.Dir)
	}
	return roots
}

// assertNothingLeft: no run-* group under the parent, no parent, in any
// hierarchy; and every workload task gone.
func assertNothingLeft(t *testing.T, l *cgroup.Layout, pids []int) {
	t.Helper()
	for _, root := range layoutRoots(l) {
		parent := filepath.Join(root, testParent)
		if m, _ := filepath.Glob(filepath.Join(parent, "run-*")); len(m) > 0 {
			t.Errorf("groups left behind: %v", m)
		}
		if _, err := os.Lstat(parent); err == nil {
			t.Errorf("parent group %s left behind", parent)
		}
	}
	assertGone(t, pids, 3*time.Second)
}

// assertGone asserts that every process of pids ends within timeout.
func assertGone(t *testing.T, pids []int, timeout time.Duration) {
	t.Helper()
	if !waitFor(timeout, func() bool { return allGone(pids) }) {
		for _, p := range pids {
			if !processGone(p) {
				t.Errorf("workload process %d (%s) still runs %v later", p, comm(p), timeout)
			}
		}
	}
}

func allGone(pids []int) bool {
	for _, p := range pids {
		if !processGone(p) {
			return false
		}
	}
	return true
}

func comm(pid int) string {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
	return strings.TrimSpace(string(b))
}

// removeRunGroups is the safety net of a test: it kills the tasks of the
// groups that the cfsprobe process made and removes them, and the parent
// when it is empty. Other processes' groups are not touched.
func removeRunGroups(t *testing.T, l *cgroup.Layout, cfsprobePID int) {
	t.Helper()
	for _, d := range runGroups(l, cfsprobePID) {
		t.Logf("removing %s, left by a failed test", d)
		if err := killAndRemove(d); err != nil {
			t.Errorf("remove %s: %v", d, err)
		}
	}
	removeParents(l)
}

// killAndRemove SIGKILLs a group's tasks until none is left and removes it.
func killAndRemove(dir string) error {
	deadline := time.Now().Add(5 * time.Second)
	for {
		pids, err := groupTasks(dir)
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		for _, p := range pids {
			_ = syscall.Kill(p, syscall.SIGKILL)
		}
		err = syscall.Rmdir(dir)
		if err == nil || errors.Is(err, syscall.ENOENT) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("tasks %v: %w", pids, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// removeParents removes the test parent where it is empty (rmdir of a
// group with children fails, so another run's groups are safe).
func removeParents(l *cgroup.Layout) {
	for _, root := range layoutRoots(l) {
		_ = syscall.Rmdir(filepath.Join(root, testParent))
	}
}

// cleanupEnv is needCgroups for these tests: it also waits (briefly) for
// the test parent to be free, so that a run of another test binary on this
// machine, or a leftover, is reported as such and not as this test's.
func cleanupEnv(t *testing.T) *cgroup.Layout {
	t.Helper()
	l := needCgroups(t)
	busy := func() []string {
		var in []string
		for _, root := range layoutRoots(l) {
			if _, err := os.Lstat(filepath.Join(root, testParent)); err == nil {
				ents, _ := os.ReadDir(filepath.Join(root, testParent))
				for _, e := range ents {
					if e.IsDir() {
						in = append(in, filepath.Join(root, testParent, e.Name()))
					}
				}
				if len(ents) == 0 {
					in = append(in, filepath.Join(root, testParent))
				}
			}
		}
		return in
	}
	if !waitFor(10*time.Second, func() bool { return len(busy()) == 0 }) {
		t.Fatalf("%s is in use by another cfsprobe run, or was left behind: %v", testParent, busy())
	}
	return l
}

func TestCleanupNormalExit(t *testing.T) {
	for _, tc := range []struct {
		name   string
		cpuset bool
	}{{"periodic", false}, {"cpuset", true}} {
		t.Run(tc.name, func(t *testing.T) {
			l := cleanupEnv(t)
			args := []string{"--json", "--cpus", "0.5"}
			if tc.cpuset {
				if l.CPUSet == nil {
					t.Skip("no cpuset controller")
				}
				args = append(args, "--cpuset", "0")
			}
			args = append(args, "periodic", "--burn", "2ms", "--sleep", "20ms", "--iterations", "40", "--quiet")
			r := startRun(t, l, args...)
			dir, pids := waitTasks(t, l, r, anyTask)
			groups := runGroups(l, r.cmd.Process.Pid)
			if tc.cpuset {
				setDir := filepath.Join(l.CPUSet.Dir, testParent, filepath.Base(dir))
				if !slices.Contains(groups, setDir) {
					t.Errorf("no group %s in the cpuset hierarchy (groups: %v)", setDir, groups)
				} else if cpus, err := os.ReadFile(filepath.Join(setDir, "cpuset.cpus")); err != nil || strings.TrimSpace(string(cpus)) != "0" {
					t.Errorf("%s/cpuset.cpus = %q (%v), want 0", setDir, cpus, err)
				}
			}
			t.Logf("groups %v, tasks %v", groups, pids)
			r.finish(t, 30*time.Second)
			if r.code != 0 {
				t.Fatalf("exit %d\nstderr:\n%s", r.code, r.stderr.String())
			}
			tr, err := trace.Read(strings.NewReader(r.stdout.String()))
			if err != nil {
				t.Fatalf("decode the trace: %v", err)
			}
			if !slices.Contains(pids, tr.Process.PID) {
				t.Errorf("the trace's workload pid %d is not the task %v seen in the group", tr.Process.PID, pids)
			}
			assertNothingLeft(t, l, pids)
		})
	}
}

// Ctrl-C and SIGTERM: the run kills its workload, removes its group, says
// so, and exits 128+signal at once; the trace file it was to write is not
// created.
func TestCleanupSignal(t *testing.T) {
	for _, tc := range []struct {
		sig  syscall.Signal
		code int
	}{{syscall.SIGINT, 130}, {syscall.SIGTERM, 143}} {
		t.Run(tc.sig.String(), func(t *testing.T) {
			l := cleanupEnv(t)
			out := filepath.Join(t.TempDir(), "trace.json")
			r := startRun(t, l, "--cpus", "0.5", "-o", out, "bursty", "--duration", "30s")
			_, pids := waitTasks(t, l, r, anyTask)
			start := time.Now()
			if err := r.cmd.Process.Signal(tc.sig); err != nil {
				t.Fatal(err)
			}
			r.finish(t, 5*time.Second)
			t.Logf("exited %v after %v: %s", r.code, time.Since(start).Round(time.Millisecond), strings.TrimSpace(r.stderr.String()))
			if r.code != tc.code {
				t.Errorf("exit %d, want %d", r.code, tc.code)
			}
			if want := "cfsprobe: interrupted by " + tc.sig.String() + ": the workload was killed and its cgroup removed\n"; !strings.HasSuffix(r.stderr.String(), want) {
				t.Errorf("stderr does not end with %q:\n%s", want, r.stderr.String())
			}
			if _, err := os.Lstat(out); err == nil {
				t.Errorf("an interrupted run left the trace file %s", out)
			}
			assertNothingLeft(t, l, pids)
		})
	}
}

// SIGKILL leaves the group (the run cannot remove it) but not the
// workload (Pdeathsig); cleanup removes the group, and kills what is still
// in it (a command's forked children, which Pdeathsig does not reach), then
// has nothing to do.
func TestCleanupAfterSIGKILL(t *testing.T) {
	for _, tc := range []struct {
		name  string
		args  []string
		ready func([]int) bool
		// direct reports whether a task is the process cfsprobe started,
		// which Pdeathsig kills with it.
		direct func(pid int) bool
	}{
		{"bursty", []string{"--cpus", "0.5", "bursty", "--duration", "30s"}, anyTask,
			func(int) bool { return true }},
		{"forking command", []string{"--cpus", "0.5", "--", "sh", "-c", "sleep 300 & sleep 300"}, twoSleeps,
			func(pid int) bool { return comm(pid) == "sh" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := cleanupEnv(t)
			r := startRun(t, l, tc.args...)
			dir, pids := waitTasks(t, l, r, tc.ready)
			var direct []int
			for _, p := range pids {
				if tc.direct(p) {
					direct = append(direct, p)
				}
			}
			groups := runGroups(l, r.cmd.Process.Pid)
			if err := r.cmd.Process.Kill(); err != nil {
				t.Fatal(err)
			}
			r.finish(t, 5*time.Second)
			for _, g := range groups {
				if _, err := os.Stat(g); err != nil {
					t.Fatalf("group %s is gone after SIGKILL, so this test does not exercise cleanup: %v", g, err)
				}
			}
			if !slices.Contains(groups, dir) {
				t.Fatalf("the cpu group %s is not among the run's groups %v", dir, groups)
			}
			if len(direct) == 0 {
				t.Fatalf("no task of %v is the process cfsprobe started", pids)
			}
			assertGone(t, direct, 5*time.Second)

			c := cfsprobe(t, "cleanup", "--parent", testParent)
			t.Logf("cleanup:\n%s%s", c.stdout, c.stderr)
			if c.code != 0 {
				t.Fatalf("cleanup: exit %d\n%s", c.code, c.stderr)
			}
			for _, g := range groups {
				if !containsLine(c.stdout, "removed", g) {
					t.Errorf("cleanup did not report removing %s:\n%s", g, c.stdout)
				}
			}
			assertNothingLeft(t, l, pids)

			c = cfsprobe(t, "cleanup", "--parent", testParent)
			if c.code != 0 || c.stdout != "nothing to clean up\n" {
				t.Errorf("second cleanup: exit %d, stdout %q, want 0 and %q\n%s", c.code, c.stdout, "nothing to clean up\n", c.stderr)
			}
		})
	}
}

// twoSleeps: both sleeps of `sh -c 'sleep 300 & sleep 300'` are in the group.
func twoSleeps(pids []int) bool {
	n := 0
	for _, p := range pids {
		if comm(p) == "sleep" {
			n++
		}
	}
	return n >= 2
}

// containsLine reports whether a line of out holds every one of subs.
func containsLine(out string, subs ...string) bool {
	for _, line := range strings.Split(out, "\n") {
		ok := true
		for _, s := range subs {
			ok = ok && strings.Contains(line, s)
		}
		if ok {
			return true
		}
	}
	return false
}

// cleanup keeps the group of a run whose cfsprobe process still runs; the
// run then ends normally and removes it.
func TestCleanupKeepsLiveRun(t *testing.T) {
	l := cleanupEnv(t)
	r := startRun(t, l, "--cpus", "0.5", "bursty", "--on", "20ms", "--off", "20ms", "--duration", "2s")
	_, pids := waitTasks(t, l, r, anyTask)
	groups := runGroups(l, r.cmd.Process.Pid)

	c := cfsprobe(t, "cleanup", "--parent", testParent)
	t.Logf("cleanup:\n%s%s", c.stdout, c.stderr)
	if c.code != 0 {
		t.Errorf("cleanup: exit %d\n%s", c.code, c.stderr)
	}
	for _, g := range groups {
		if !containsLine(c.stdout, "kept", g, fmt.Sprintf("pid %d", r.cmd.Process.Pid)) {
			t.Errorf("cleanup did not report keeping %s:\n%s", g, c.stdout)
		}
		if _, err := os.Stat(g); err != nil {
			t.Errorf("cleanup removed the live run's group %s", g)
		}
	}
	if strings.Contains(c.stdout, "removed") {
		t.Errorf("cleanup removed something while only a live run's group was there:\n%s", c.stdout)
	}
	for _, p := range pids {
		if processGone(p) {
			t.Errorf("cleanup killed the live run's workload %d", p)
		}
	}

	r.finish(t, 30*time.Second)
	if r.code != 0 {
		t.Fatalf("the run failed after cleanup: exit %d\n%s", r.code, r.stderr.String())
	}
	if !strings.Contains(r.stdout.String(), "throttled") {
		t.Errorf("no summary from the run:\n%s", r.stdout.String())
	}
	assertNothingLeft(t, l, pids)
}

// cleanup touches nothing under the parent whose name is not one of
// cfsprobe's, nor the tasks in it.
func TestCleanupLeavesOthersAlone(t *testing.T) {
	l := cleanupEnv(t)
	parent := filepath.Join(l.CPU.Dir, testParent)
	names := []string{"not-ours", "run-1-nothex00", "run-1-abc", "Run-1-0123abcd", "run-x-0123abcd", "run-1-0123abcd-x"}
	var made []string
	t.Cleanup(func() {
		for i := len(made) - 1; i >= 0; i-- {
			if err := killAndRemove(made[i]); err != nil {
				t.Errorf("remove %s: %v", made[i], err)
			}
		}
		removeParents(l)
	})
	for _, d := range append([]string{parent}, prefixAll(parent, names)...) {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
		made = append(made, d)
	}
	// A task in a group that is not cfsprobe's must survive cleanup.
	sleep := exec.Command("sleep", "60")
	if err := tied.Start(sleep); err != nil {
		t.Fatal(err)
	}
	sleepDone := make(chan struct{})
	go func() { _ = sleep.Wait(); close(sleepDone) }()
	t.Cleanup(func() { _ = sleep.Process.Kill(); <-sleepDone })
	notOurs := filepath.Join(parent, "not-ours")
	if err := os.WriteFile(filepath.Join(notOurs, "cgroup.procs"), []byte(strconv.Itoa(sleep.Process.Pid)), 0); err != nil {
		t.Fatal(err)
	}

	c := cfsprobe(t, "cleanup", "--parent", testParent)
	if c.code != 0 || c.stdout != "nothing to clean up\n" {
		t.Errorf("cleanup: exit %d, stdout %q, want 0 and %q\n%s", c.code, c.stdout, "nothing to clean up\n", c.stderr)
	}
	for _, d := range made {
		if _, err := os.Stat(d); err != nil {
			t.Errorf("cleanup removed %s, which is not cfsprobe's", d)
		}
	}
	select {
	case <-sleepDone:
		t.Errorf("cleanup killed a task of %s, which is not cfsprobe's", notOurs)
	case <-time.After(100 * time.Millisecond):
	}
	if pids, _ := groupTasks(notOurs); !slices.Contains(pids, sleep.Process.Pid) {
		t.Errorf("%s/cgroup.procs = %v, want the sleep %d still in it", notOurs, pids, sleep.Process.Pid)
	}
}

func prefixAll(dir string, names []string) []string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = filepath.Join(dir, n)
	}
	return out
}

// An external command's forked children go with it: SIGTERM kills the
// shell and both sleeps, not only the process cfsprobe started.
func TestCleanupExternalCommand(t *testing.T) {
	l := cleanupEnv(t)
	r := startRun(t, l, "--cpus", "0.5", "--", "sh", "-c", "sleep 300 & sleep 300")
	_, pids := waitTasks(t, l, r, twoSleeps)
	t.Logf("tasks: %v", pids)
	if err := r.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	r.finish(t, 5*time.Second)
	if r.code != 143 {
		t.Errorf("exit %d, want 143\nstderr:\n%s", r.code, r.stderr.String())
	}
	assertNothingLeft(t, l, pids)
}
