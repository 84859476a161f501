package lab

import (
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/cfsprobe/cfsprobe/internal/cgroup"
	"github.com/cfsprobe/cfsprobe/internal/workload"
	"golang.org/x/sys/unix"
)

// noGroup is a group that holds nothing: cgroup.Start's traced path moves
// the child into it (a no-op) and lets it go.
type noGroup struct{ cgroup.Group }

func (noGroup) AddProc(int) error { return nil }

// A pinned workload starts with its affinity already set, and the
// starting thread gets its own back.
func TestOnPinCPUsChildInheritsAffinity(t *testing.T) {
	set, ok := workload.PinSet(1)
	if !ok {
		t.Skip("one CPU: nothing to pin")
	}
	var want int
	for c := 0; c < len(set)*64; c++ {
		if set.IsSet(c) {
			want = c
		}
	}
	var before unix.CPUSet
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := unix.SchedGetaffinity(0, &before); err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	cmd := exec.Command("grep", "^Cpus_allowed_list:", "/proc/self/status")
	cmd.Stdout = &out
	if err := onPinCPUs(&set, func() error { _, err := cgroup.Start(cmd, noGroup{}); return err }); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(strings.TrimPrefix(out.String(), "Cpus_allowed_list:")); got != strconv.Itoa(want) {
		t.Errorf("child's CPUs %q, want %d", got, want)
	}
	var after unix.CPUSet
	if err := unix.SchedGetaffinity(0, &after); err != nil {
		t.Fatal(err)
	}
	if after != before {
		t.Errorf("the starting thread's affinity is %d CPUs after the start, %d before", after.Count(), before.Count())
	}
}
