package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/cfsprobe/cfsprobe/internal/tied"
)

func TestProcessesNaming(t *testing.T) {
	marker := fmt.Sprintf("cfsprobe-testenv-marker-%d-%d", os.Getpid(), time.Now().UnixNano())
	// sleep with the marker as its argv[0]: one process, whose command line
	// names it from exec on. (A shell naming it forks a child that names it
	// too, until that child execs.)
	cmd := exec.Command("sleep", "60")
	cmd.Args[0] = marker
	if err := tied.Start(cmd); err != nil {
		t.Fatal(err)
	}
	defer func() {
		cmd.Process.Kill()
		cmd.Wait()
	}()
	// Start returns once the child's execve has released its parent,
	// which is before the new program's command line is set up: read
	// until it is (make test on 2026-12-02 read it empty once).
	var pids []int
	for deadline := time.Now().Add(2 * time.Second); ; time.Sleep(time.Millisecond) {
		var err error
		if pids, err = ProcessesNaming(marker); err != nil {
			t.Fatal(err)
		}
		if len(pids) > 0 || time.Now().After(deadline) {
			break
		}
	}
	if !slices.Equal(pids, []int{cmd.Process.Pid}) {
		t.Errorf("ProcessesNaming = %v, want [%d] (the sleep; not this test, whose command line does not name it)", pids, cmd.Process.Pid)
	}
	cmd.Process.Kill()
	cmd.Wait()
	if pids, _ := ProcessesNaming(marker); len(pids) > 0 {
		t.Errorf("after the process exited: %v", pids)
	}
}

// Nested mounts under a directory go, deepest first; a mount beside it
// stays.
func TestUnmountUnder(t *testing.T) {
	if os.Geteuid() != 0 {
		if Required() {
			t.Fatalf("%s=1 but mounting needs root", RequireEnv)
		}
		t.Skip("mounting needs root")
	}
	base := t.TempDir()
	dir, beside := filepath.Join(base, "dir"), filepath.Join(base, "dir-beside")
	for _, d := range []string{dir, beside} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	mount := func(p string) {
		t.Helper()
		if err := syscall.Mount("tmpfs", p, "tmpfs", 0, "size=1m"); err != nil {
			t.Fatalf("mount tmpfs at %s: %v", p, err)
		}
	}
	t.Cleanup(func() {
		for _, p := range []string{filepath.Join(dir, "a"), dir, beside} {
			syscall.Unmount(p, syscall.MNT_DETACH)
		}
	})
	mount(dir)
	if err := os.Mkdir(filepath.Join(dir, "a"), 0o700); err != nil {
		t.Fatal(err)
	}
	mount(filepath.Join(dir, "a"))
	mount(beside)

	got, err := MountsUnder(dir)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{filepath.Join(dir, "a"), dir}; !slices.Equal(got, want) {
		t.Fatalf("MountsUnder = %v, want %v (deepest first, not the one beside)", got, want)
	}
	if err := UnmountUnder(dir); err != nil {
		t.Fatal(err)
	}
	if got, _ := MountsUnder(dir); len(got) > 0 {
		t.Errorf("after UnmountUnder: %v", got)
	}
	if got, _ := MountsUnder(beside); len(got) != 1 {
		t.Errorf("the mount beside: %v, want it kept", got)
	}
}
