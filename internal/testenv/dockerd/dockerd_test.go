package dockerd

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// busyboxImage builds a one-file image (Debian's busybox-static) into the
// daemon, for tests that need a container but not cfsprobe's image.
func busyboxImage(t *testing.T, d *Daemon) string {
	t.Helper()
	bb := "/bin/busybox"
	if _, err := os.Stat(bb); err != nil {
		need(t, "no /bin/busybox (apt-get install busybox-static)")
	}
	ctx := t.TempDir()
	data, err := os.ReadFile(bb)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ctx, "busybox"), data, 0o755); err != nil {
		t.Fatal(err)
	}
	df := "FROM scratch\nCOPY busybox /bin/busybox\nENTRYPOINT [\"/bin/busybox\"]\n"
	if err := os.WriteFile(filepath.Join(ctx, "Dockerfile"), []byte(df), 0o644); err != nil {
		t.Fatal(err)
	}
	const ref = "cfsprobe-busybox:test"
	d.Docker(t, "build", "-q", "-t", ref, ctx)
	return ref
}

// TestDaemonRunsContainersAndLeavesNothing starts a daemon, runs a
// container with a CPU limit (its group carries the quota), and checks
// after the daemon's teardown that its processes, directory and the
// container's groups are gone.
func TestDaemonRunsContainersAndLeavesNothing(t *testing.T) {
	var dir, id string
	var groups []string
	t.Run("daemon", func(t *testing.T) {
		d := Start(t)
		dir = d.dir
		if !strings.HasPrefix(d.Host(), "unix:///") {
			t.Errorf("Host() = %q, want unix:///...", d.Host())
		}
		img := busyboxImage(t, d)
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
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("the daemon's directory %s is left (stat: %v)", dir, err)
	}
	if pids, _ := processesNaming(dir); len(pids) > 0 {
		t.Errorf("processes of the daemon are left: %v", pids)
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

func TestUnescapeMount(t *testing.T) {
	for in, want := range map[string]string{
		`/a/b`:         "/a/b",
		`/a\040b`:      "/a b",
		`/a\134b`:      `/a\b`,
		`/trailing\04`: `/trailing\04`,
		`/x\011y\012z`: "/x\ty\nz",
	} {
		if got := unescapeMount(in); got != want {
			t.Errorf("unescapeMount(%q) = %q, want %q", in, got, want)
		}
	}
}
