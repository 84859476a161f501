// Package testenv holds what cfsprobe's tests (and benchmarks) share:
// whether real cgroups may be used, a check that a test left nothing
// behind, and the programs a test starts and stops.
package testenv

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/cfsprobe/cfsprobe/internal/cgroup"
	"github.com/cfsprobe/cfsprobe/internal/hostfs"
)

// RequireEnv is the variable under which cgroup tests fail instead of
// skipping (CI sets it).
const RequireEnv = "CFSPROBE_REQUIRE_CGROUPS"

// Required reports whether cgroup tests must run.
func Required() bool { return os.Getenv(RequireEnv) == "1" }

// NeedCgroups skips the test (or fails it, under CFSPROBE_REQUIRE_CGROUPS=1)
// unless this process can create groups under the cpu controller. It
// returns the detected layout.
func NeedCgroups(t testing.TB) *cgroup.Layout {
	t.Helper()
	l, err := cgroup.Detect(hostfs.Default())
	if err == nil {
		err = cgroup.NewManager(l, "").CheckWritable()
	}
	if err != nil {
		if Required() {
			t.Fatalf("%s=1 but real cgroups are not usable: %v", RequireEnv, err)
		}
		t.Skipf("real cgroups not usable (%v); set %s=1 to make this a failure", err, RequireEnv)
	}
	return l
}

// ParentName is the name of a parent group a test creates its groups
// under: cfsprobe-<what>-<pid>. The PID keeps packages tested in parallel
// apart, and keeps a group left by a killed earlier run (its cleanup never
// ran) from failing the next run that would have used the same name;
// scripts/leftovers.sh reports such a group after make test.
func ParentName(what string) string { return fmt.Sprintf("cfsprobe-%s-%d", what, os.Getpid()) }

// Leftovers lists the directories of the parent group (and anything in
// them) in every cgroup hierarchy of the layout. Each test package uses a
// parent of its own, so packages tested in parallel do not see each
// other's groups.
func Leftovers(l *cgroup.Layout, parent string) []string {
	var out []string
	for _, h := range l.Hierarchies() {
		d := filepath.Join(h.Dir, parent)
		if _, err := os.Stat(d); err == nil {
			out = append(out, d)
		}
	}
	return out
}

// NoLeftovers fails the test if the parent group still exists anywhere.
func NoLeftovers(t testing.TB, l *cgroup.Layout, parent string) {
	t.Helper()
	if left := Leftovers(l, parent); len(left) > 0 {
		t.Errorf("cgroups left behind: %v", left)
	}
}

// FreeAddr is a loopback TCP address nothing listens on, for a server a
// test starts.
func FreeAddr(t testing.TB) string {
	t.Helper()
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(FreePort(t)))
}

// FreePort is a loopback TCP port nothing listens on.
func FreePort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// Cfsprobe is the cfsprobe binary a test runs the way a user does:
// $CFSPROBE_BIN (the qemu guest, where no Go toolchain runs, passes a
// prebuilt static one), else one built from this tree into dir.
func Cfsprobe(dir string) (string, error) {
	if b := os.Getenv("CFSPROBE_BIN"); b != "" {
		return b, nil
	}
	b := filepath.Join(dir, "cfsprobe")
	build := exec.Command("go", "build", "-o", b, "github.com/cfsprobe/cfsprobe/cmd/cfsprobe")
	if out, err := build.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build cfsprobe: %v\n%s", err, out)
	}
	return b, nil
}
