package monitor

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cfsprobe/cfsprobe/internal/cgroup"
	"github.com/cfsprobe/cfsprobe/internal/hostfs"
	"github.com/cfsprobe/cfsprobe/internal/testenv"
	"github.com/cfsprobe/cfsprobe/internal/tied"
)

// On this machine's real cgroups: a parent with three children (no quota,
// 20 ms and 50 ms per 100 ms), a busy loop in the 20 ms one. Discover from
// /sys/fs/cgroup finds exactly the two with a quota, and their counters
// and limits read right.
func TestDiscoverRealCgroups(t *testing.T) {
	testenv.NeedCgroups(t)
	r, err := OpenRoot(hostfs.Default().CgroupDir())
	if err != nil {
		t.Fatalf("OpenRoot(/sys/fs/cgroup): %v", err)
	}
	t.Logf("cgroup root: %+v", *r)

	parent := testenv.ParentName("monitor")
	children := []string{"unlimited", "q20", "q50"}
	hierarchies := []string{r.CPUDir}
	if r.AcctDir != r.CPUDir {
		hierarchies = append(hierarchies, r.AcctDir)
	}
	var busy *exec.Cmd
	// Registered before anything is made, so that a failure at any step
	// still removes it all.
	t.Cleanup(func() {
		if busy != nil && busy.Process != nil {
			_ = busy.Process.Kill()
			_ = busy.Wait()
		}
		for _, h := range hierarchies {
			for _, c := range children {
				rmdir(t, filepath.Join(h, parent, c))
			}
			rmdir(t, filepath.Join(h, parent))
			if _, err := os.Stat(filepath.Join(h, parent)); err == nil {
				t.Errorf("cgroup %s left behind", filepath.Join(h, parent))
			}
		}
	})

	for _, h := range hierarchies {
		for _, d := range append([]string{parent}, prefix(parent+"/", children)...) {
			if err := os.Mkdir(filepath.Join(h, d), 0o755); err != nil {
				t.Fatalf("create cgroup: %v", err)
			}
			if r.Version == 2 && d == parent {
				enableCPU(t, h)
				enableCPU(t, filepath.Join(h, parent))
			}
		}
	}
	setQuota := func(child string, quota time.Duration) {
		dir := filepath.Join(r.CPUDir, parent, child)
		us := strconv.FormatInt(quota.Microseconds(), 10)
		var err error
		if r.Version == 2 {
			err = cgroup.WriteFile(filepath.Join(dir, "cpu.max"), us+" 100000")
		} else {
			err = cgroup.WriteFile(filepath.Join(dir, "cpu.cfs_quota_us"), us)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	setQuota("q20", 20*ms)
	setQuota("q50", 50*ms)

	// A busy loop in q20, moved in every hierarchy.
	busy = exec.Command("/bin/sh", "-c", "while :; do :; done")
	if err := tied.Start(busy); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	for _, h := range hierarchies {
		if err := cgroup.WriteFile(filepath.Join(h, parent, "q20", "cgroup.procs"), strconv.Itoa(busy.Process.Pid)); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(time.Second)

	d, err := r.Discover(Options{})
	if err != nil {
		t.Fatalf("Discover: %v", err)
	}
	for _, e := range d.Skipped {
		t.Logf("skipped (not ours): %v", e)
	}
	ours := func(d Discovery) []Group {
		var out []Group
		for _, g := range d.Groups {
			if g.Path == "/"+parent || strings.HasPrefix(g.Path, "/"+parent+"/") {
				out = append(out, g)
			}
		}
		return out
	}
	got := ours(d)
	var paths []string
	for _, g := range got {
		paths = append(paths, g.Path)
	}
	want := []string{"/" + parent + "/q20", "/" + parent + "/q50"}
	if !slices.Equal(paths, want) {
		t.Fatalf("Discover found %q under the parent, want %q", paths, want)
	}
	for i, g := range got {
		if g.CPUDir != filepath.Join(r.CPUDir, g.Path) || g.AcctDir != filepath.Join(r.AcctDir, g.Path) || g.Version != r.Version {
			t.Errorf("%s: dirs %s, %s, version %d", g.Path, g.CPUDir, g.AcctDir, g.Version)
		}
		if g.ID != (Identity{Kind: KindCgroup, Name: g.Path}) {
			t.Errorf("%s: ID = %+v, want a cgroup named by its path", g.Path, g.ID)
		}
		lim, err := g.Limits()
		if err != nil {
			t.Fatalf("%s: Limits: %v", g.Path, err)
		}
		wantQuota := []time.Duration{20 * ms, 50 * ms}[i]
		if lim != (cgroup.Limits{Quota: wantQuota, Period: 100 * ms}) {
			t.Errorf("%s: Limits = %+v, want quota %v per 100ms, no burst", g.Path, lim, wantQuota)
		}
	}

	// q20's busy loop used about 20% of a CPU and was throttled; q50 ran
	// nothing.
	st, err := got[0].Stat()
	elapsed := time.Since(start)
	if err != nil {
		t.Fatalf("Stat: %v", err)
	}
	t.Logf("q20 after %v: %+v", elapsed, st)
	// The kernel hands out quota in 5 ms slices per CPU and lets a period
	// overrun a little: allow a quarter more, and two periods' quota.
	maxUsage := time.Duration(float64(elapsed)*0.2*1.25) + 40*ms
	if st.UsageNs <= 0 || time.Duration(st.UsageNs) > maxUsage {
		t.Errorf("q20 used %v in %v, want more than 0 and at most %v", time.Duration(st.UsageNs), elapsed, maxUsage)
	}
	if st.NrPeriods < 5 || st.NrThrottled < 1 || st.ThrottledNs <= 0 || st.NrThrottled > st.NrPeriods {
		t.Errorf("q20 counters %+v: want periods >= 5, and throttled in at least one", st)
	}
	st, err = got[1].Stat()
	if err != nil {
		t.Fatalf("Stat: %v", err)
	}
	// Its period timer runs a little after the quota is set, so only the
	// periods may count.
	if st.UsageNs != 0 || st.NrThrottled != 0 || st.ThrottledNs != 0 {
		t.Errorf("q50 (empty) counters %+v, want no usage and no throttling", st)
	}

	// All adds the parent and the unlimited child.
	d, err = r.Discover(Options{All: true})
	if err != nil {
		t.Fatalf("Discover(All): %v", err)
	}
	paths = paths[:0]
	for _, g := range ours(d) {
		paths = append(paths, g.Path)
	}
	want = []string{"/" + parent, "/" + parent + "/q20", "/" + parent + "/q50", "/" + parent + "/unlimited"}
	if !slices.Equal(paths, want) {
		t.Errorf("Discover(All) found %q under the parent, want %q", paths, want)
	}
}

func prefix(p string, names []string) []string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = p + n
	}
	return out
}

// enableCPU enables the cpu controller for dir's children (cgroup v2).
func enableCPU(t *testing.T, dir string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "cgroup.subtree_control"))
	if err != nil {
		t.Fatal(err)
	}
	if slices.Contains(strings.Fields(string(b)), "cpu") {
		return
	}
	if err := cgroup.WriteFile(filepath.Join(dir, "cgroup.subtree_control"), "+cpu"); err != nil {
		t.Fatal(err)
	}
}

// rmdir removes a cgroup directory (cgroup.Rmdir) and fails the test if
// it cannot.
func rmdir(t *testing.T, dir string) {
	t.Helper()
	if err := cgroup.Rmdir(dir); err != nil {
		t.Error(err)
	}
}
