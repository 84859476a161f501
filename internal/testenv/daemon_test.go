package testenv

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
)

// tiedHelperEnv makes TestStartTiedHelper the helper process of
// TestStartTiedDiesWithTest.
const tiedHelperEnv = "CFSPROBE_TESTENV_TIED_HELPER"

// A process started with StartTied outlives the threads Go ends while it
// runs (goroutines that return locked to their thread), and dies when the
// process that started it is killed with SIGKILL, which runs no cleanup.
func TestStartTiedDiesWithTest(t *testing.T) {
	helper := exec.Command(os.Args[0], "-test.run=^TestStartTiedHelper$", "-test.v")
	helper.Env = append(os.Environ(), tiedHelperEnv+"=1")
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

// TestStartTiedHelper starts a sleep tied to itself, ends a few dozen
// threads as Go does (goroutines that return locked), and waits to be
// killed.
func TestStartTiedHelper(t *testing.T) {
	if os.Getenv(tiedHelperEnv) != "1" {
		t.Skip("the helper process of TestStartTiedDiesWithTest")
	}
	cmd := exec.Command("sleep", "60")
	if err := StartTied(cmd); err != nil {
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
	err := cmd.Wait()
	t.Fatalf("the child exited (%v) before this helper was killed", err)
}
