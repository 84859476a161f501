package tied

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// helperEnv makes TestHelper the helper process of TestDiesWithParent;
// its value is how the helper starts its child: start or startwith.
const helperEnv = "CFSPROBE_TIED_HELPER"

// A process started with Start, or StartWith and a start function that
// locks its thread and pins it as the lab does, outlives the threads Go
// ends while it runs (goroutines that return locked to their thread), and
// dies when the process that started it is killed with SIGKILL, which runs
// no cleanup.
func TestDiesWithParent(t *testing.T) {
	for _, how := range []string{"start", "startwith"} {
		t.Run(how, func(t *testing.T) { diesWithParent(t, how) })
	}
}

func diesWithParent(t *testing.T, how string) {
	helper := exec.Command(os.Args[0], "-test.run=^TestHelper$", "-test.v")
	helper.Env = append(os.Environ(), helperEnv+"="+how)
	out, err := helper.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := helper.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = helper.Process.Kill(); _ = helper.Wait() }()
	// The helper prints its child's PID, then "churned" once it has ended
	// threads, the child still running.
	var child int
	s := bufio.NewScanner(out)
	for s.Scan() {
		if pid, ok := strings.CutPrefix(s.Text(), "child "); ok {
			if child, err = strconv.Atoi(pid); err != nil {
				t.Fatal(err)
			}
			// A failed test must not leave the child either.
			defer func() { _ = syscall.Kill(child, syscall.SIGKILL) }()
		}
		if s.Text() == "churned" {
			break
		}
	}
	if child == 0 {
		t.Fatal("the helper printed no child")
	}
	if !alive(child) {
		t.Fatalf("child %d died while the helper ended threads", child)
	}
	if err := helper.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = helper.Wait()
	for deadline := time.Now().Add(10 * time.Second); alive(child); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("child %d still runs 10 s after the helper was killed", child)
		}
	}
}

// alive reports whether pid is a process that has not exited (not a
// zombie: the child of a killed helper is reparented and reaped, but it
// may be seen for a moment before).
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	return len(f) > 0 && f[0] != "Z"
}

// TestHelper starts a sleep tied to itself, ends a few dozen threads as
// Go does (goroutines that return locked), and waits to be killed.
func TestHelper(t *testing.T) {
	how := os.Getenv(helperEnv)
	if how == "" {
		t.Skip("the helper process of TestDiesWithParent")
	}
	cmd := exec.Command("sleep", "60")
	var err error
	if how == "start" {
		err = Start(cmd)
	} else {
		err = StartWith(cmd, func() error {
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			var saved unix.CPUSet
			if err := unix.SchedGetaffinity(0, &saved); err != nil {
				return err
			}
			defer func() { _ = unix.SchedSetaffinity(0, &saved) }()
			var one unix.CPUSet
			one.Set(0)
			if err := unix.SchedSetaffinity(0, &one); err != nil {
				return err
			}
			return cmd.Start()
		})
	}
	if err != nil {
		t.Fatal(err)
	}
	fmt.Printf("child %d\n", cmd.Process.Pid)
	var wg sync.WaitGroup
	for range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			runtime.LockOSThread()
			time.Sleep(time.Millisecond)
		}()
	}
	wg.Wait()
	fmt.Println("churned")
	err = cmd.Wait()
	t.Fatalf("the child exited (%v) before this helper was killed", err)
}

// A start function that returns no error but started nothing is an error,
// not a child to wait for.
func TestStartWithNothingStarted(t *testing.T) {
	if err := StartWith(exec.Command("true"), func() error { return nil }); err == nil {
		t.Fatal("no error")
	}
}
