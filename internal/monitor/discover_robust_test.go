package monitor

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// permDirEnv hands the tree to check to the unprivileged child process
// that TestDiscoverPermissionDenied starts when run as root.
const permDirEnv = "CFSPROBE_MONITOR_PERM_DIR"

// Directories and quota files that cannot be read are recorded in Skipped
// and the walk goes on around them.
func TestDiscoverPermissionDenied(t *testing.T) {
	if dir := os.Getenv(permDirEnv); dir != "" {
		checkPermissionDenied(t, dir)
		return
	}
	root := v1Tree(t, map[string]string{
		"":              "-1",
		"/open":         "10000",
		"/locked":       "-1",
		"/locked/inner": "20000",
		"/secret":       "30000",
		"/secret/child": "40000",
	})
	if err := os.Chmod(filepath.Join(root, "cpu", "locked"), 0o000); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(root, "cpu", "secret", "cpu.cfs_quota_us"), 0o000); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.Chmod(filepath.Join(root, "cpu", "locked"), 0o755) })
	if os.Geteuid() != 0 {
		checkPermissionDenied(t, root)
		return
	}

	// Root reads everything: run the check as nobody, from a copy of
	// this test binary that nobody may execute.
	// t.TempDir's directories are private: open them (up to, not
	// including, the system's temporary directory) to nobody.
	for d := root; d != filepath.Clean(os.TempDir()) && d != "/"; d = filepath.Dir(d) {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(root, "monitor.test")
	if err := copyFile(self, bin); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-test.run=^TestDiscoverPermissionDenied$", "-test.v")
	cmd.Env = append(os.Environ(), permDirEnv+"="+root)
	cmd.Dir = root
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the check as uid 65534 failed: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "--- PASS: TestDiscoverPermissionDenied") {
		t.Fatalf("the check as uid 65534 did not run:\n%s", out)
	}
}

func checkPermissionDenied(t *testing.T, root string) {
	r, err := OpenRoot(root)
	if err != nil {
		t.Fatal(err)
	}
	d, err := r.Discover(Options{})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, g := range d.Groups {
		got = append(got, g.Path)
	}
	if want := []string{"/open", "/secret/child"}; !slices.Equal(got, want) {
		t.Errorf("groups = %q, want %q", got, want)
	}
	want := []string{filepath.Join(root, "cpu", "locked"), filepath.Join(root, "cpu", "secret", "cpu.cfs_quota_us")}
	if len(d.Skipped) != len(want) {
		t.Fatalf("Skipped = %v, want errors for %q", d.Skipped, want)
	}
	for i, err := range d.Skipped {
		if !errors.Is(err, fs.ErrPermission) || !strings.Contains(err.Error(), want[i]) {
			t.Errorf("Skipped[%d] = %v, want permission denied naming %s", i, err, want[i])
		}
	}
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// Groups come and go while Discover walks (containers start and stop):
// the walk never fails and records nothing for them, and the groups that
// stay are always found.
func TestDiscoverChurn(t *testing.T) {
	root := t.TempDir()
	writeFile(t, filepath.Join(root, "cgroup.controllers"), "cpu memory\n")
	group := func(p, max string) {
		writeFile(t, filepath.Join(root, p, "cpu.max"), max+"\n")
		writeFile(t, filepath.Join(root, p, "cpu.stat"), "usage_usec 1\n")
	}
	group("/stay", "max 100000")
	group("/stay/a", "10000 100000")
	group("/stay/b", "max 100000")
	group("/churn", "max 100000")
	r, err := OpenRoot(root)
	if err != nil {
		t.Fatal(err)
	}

	// cgroupfs makes a group's files with its directory: build each one
	// in a staging directory and rename it into the tree.
	staging := t.TempDir()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var churnErr error
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			// A pod: its slice and a container, both limited, then gone.
			name := fmt.Sprintf("pod%d", i%4)
			tmp := filepath.Join(staging, name)
			for _, d := range []string{tmp, filepath.Join(tmp, "ctr")} {
				if err := os.MkdirAll(d, 0o755); err != nil {
					churnErr = err
					return
				}
				for name, data := range map[string]string{"cpu.max": "20000 100000\n", "cpu.stat": "usage_usec 1\n"} {
					if err := os.WriteFile(filepath.Join(d, name), []byte(data), 0o644); err != nil {
						churnErr = err
						return
					}
				}
			}
			if err := os.Rename(tmp, filepath.Join(root, "churn", name)); err != nil && !errors.Is(err, fs.ErrExist) && !errors.Is(err, syscall.ENOTEMPTY) {
				churnErr = err
				return
			}
			_ = os.RemoveAll(tmp)
			if err := os.RemoveAll(filepath.Join(root, "churn", fmt.Sprintf("pod%d", (i+2)%4))); err != nil {
				churnErr = err
				return
			}
		}
	}()
	stopped := false
	stopChurn := func() {
		if !stopped {
			stopped = true
			close(stop)
			wg.Wait()
		}
	}
	t.Cleanup(stopChurn)

	deadline := time.Now().Add(500 * time.Millisecond)
	walks, churned := 0, 0
	for time.Now().Before(deadline) || walks < 50 {
		walks++
		d, err := r.Discover(Options{})
		if err != nil {
			t.Fatalf("walk %d: %v", walks, err)
		}
		if len(d.Skipped) > 0 {
			t.Fatalf("walk %d: Skipped = %v, want none", walks, d.Skipped)
		}
		if !slices.ContainsFunc(d.Groups, func(g Group) bool { return g.Path == "/stay/a" }) {
			var got []string
			for _, g := range d.Groups {
				got = append(got, g.Path)
			}
			t.Fatalf("walk %d: /stay/a not found in %q", walks, got)
		}
		for _, g := range d.Groups {
			if strings.HasPrefix(g.Path, "/churn/pod") {
				churned++
			} else if g.Path != "/stay/a" {
				t.Fatalf("walk %d: unexpected group %s", walks, g.Path)
			}
			// Reading a group that has just gone is an IsGone error.
			if _, err := g.Stat(); err != nil && !IsGone(err) {
				t.Fatalf("walk %d: Stat %s: %v", walks, g.Path, err)
			}
		}
	}
	stopChurn()
	if churnErr != nil {
		t.Fatal(churnErr)
	}
	if churned == 0 {
		t.Errorf("%d walks saw none of the groups that came and went", walks)
	}
	t.Logf("%d walks found %d groups that came and went", walks, churned)
}
