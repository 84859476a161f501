package dockerd

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cfsprobe/cfsprobe/internal/testenv"
)

// TestDaemonRunsContainersAndLeavesNothing starts a daemon, runs a
// container with a CPU limit (its group carries the quota), and checks
// after the daemon's teardown that its processes, directory and the
// container's groups are gone.
func TestDaemonRunsContainersAndLeavesNothing(t *testing.T) {
	var dir, cdir, id string
	var groups []string
	t.Run("daemon", func(t *testing.T) {
		d := Start(t)
		dir, cdir = d.dir, d.containerd.dir
		if !strings.HasPrefix(d.Host(), "unix:///") {
			t.Errorf("Host() = %q, want unix:///...", d.Host())
		}
		img := d.BusyboxImage(t, "cfsprobe-busybox:test", "/bin/busybox")
		// One container exits (--rm); one keeps running until teardown.
		if out := d.Docker(t, "run", "--rm", img, "echo", "hello"); strings.TrimSpace(out) != "hello" {
			t.Errorf("docker run echo hello printed %q", out)
		}
		id = strings.TrimSpace(d.Docker(t, "run", "-d", "--name", "cfsprobe-sleeper", "--cpus", "0.5", img, "sleep", "600"))
		groups = containerGroups(id)
		quota := ""
		for _, g := range groups {
			if b, err := os.ReadFile(filepath.Join(g, "cpu.cfs_quota_us")); err == nil {
				quota = strings.TrimSpace(string(b))
			} else if b, err := os.ReadFile(filepath.Join(g, "cpu.max")); err == nil {
				quota = strings.Fields(string(b))[0]
			}
		}
		if quota != "50000" {
			t.Errorf("container %s: groups %v, quota %q, want 50000 (--cpus 0.5)", id, groups, quota)
		}
		if _, err := d.Run("run", "--rm", img, "false"); err == nil {
			t.Error("Run of a failing container returned no error")
		}
		if fi, err := os.Stat(d.Save(t, img)); err != nil || fi.Size() < 1<<20 {
			t.Errorf("Save: %v, %v (busybox alone is over 1 MiB)", fi, err)
		}
	})
	if dir == "" {
		return
	}
	for _, d := range []string{dir, cdir} {
		if _, err := os.Stat(d); !os.IsNotExist(err) {
			t.Errorf("the daemon's directory %s is left (stat: %v)", d, err)
		}
		if pids, _ := testenv.ProcessesNaming(d); len(pids) > 0 {
			t.Errorf("processes of the daemon are left: %v", pids)
		}
	}
	if len(groups) == 0 {
		t.Errorf("the running container had no group")
	}
	for _, g := range groups {
		if _, err := os.Stat(g); !os.IsNotExist(err) {
			t.Errorf("the container's group %s is left", g)
		}
	}
}
