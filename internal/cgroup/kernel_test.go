package cgroup_test

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/cfsprobe/cfsprobe/internal/cgroup"
	"github.com/cfsprobe/cfsprobe/internal/testenv"
)

// Manager.Check refuses exactly what the running kernel refuses: each
// case is written, value by value, to a fresh real group, bypassing
// Check, and the kernel's verdict is compared with Check's. On cgroup v1
// the cases also run under an ancestor limited to 1.5 CPUs.
func TestCheckAgreesWithKernel(t *testing.T) {
	l := testenv.NeedCgroups(t)
	const ms, us = time.Millisecond, time.Microsecond
	parent := testenv.ParentName("limits-test")
	root := filepath.Join(l.CPU.Dir, parent)
	if err := os.Mkdir(root, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = os.Remove(filepath.Join(root, "limited"))
		_ = os.Remove(root)
		testenv.NoLeftovers(t, l, parent)
	})
	if l.CPU.Version == 2 {
		enable(t, l.CPU.Dir)
		enable(t, root)
	}
	cases := []cgroup.Limits{
		{Period: ms, Quota: ms},
		{Period: 999 * us, Quota: ms},
		{Period: time.Second, Quota: ms},
		{Period: time.Second + us, Quota: ms},
		{Period: 100 * ms, Quota: 999 * us},
		{Period: 100 * ms, Quota: 150 * ms},
		{Period: 100 * ms, Quota: 150*ms + us},
		{Period: 333333 * us, Quota: 499999 * us},
		{Period: 333333 * us, Quota: 500000 * us},
		{Period: 100 * ms, Quota: cgroup.MaxQuota},
		{Period: 100 * ms, Quota: cgroup.MaxQuota + us},
		{Period: 100 * ms, Quota: 20 * ms, Burst: 20 * ms},
		{Period: 100 * ms, Quota: 20 * ms, Burst: 20*ms + us},
		{Period: time.Second, Quota: cgroup.MaxQuota - 10*time.Second, Burst: 10 * time.Second},
		{Period: time.Second, Quota: cgroup.MaxQuota - 10*time.Second, Burst: 10*time.Second + us},
	}
	run := func(t *testing.T, parent, dir string) {
		m := cgroup.NewManager(l, parent)
		refused := 0
		for i, lim := range cases {
			if lim.Burst > 0 && !m.BurstSupported() {
				continue
			}
			leaf := filepath.Join(dir, "case"+strconv.Itoa(i))
			if err := os.Mkdir(leaf, 0o755); err != nil {
				t.Fatal(err)
			}
			kernel := write(leaf, l.CPU.Version, lim)
			if err := os.Remove(leaf); err != nil {
				t.Fatal(err)
			}
			ours := m.Check(lim)
			var le *cgroup.LimitError
			if ours != nil && !errors.As(ours, &le) {
				t.Fatalf("%+v: Check: %v", lim, ours)
			}
			if (kernel == nil) != (ours == nil) {
				t.Errorf("%+v: the kernel says %v, Check says %v", lim, kernel, ours)
			}
			if kernel != nil {
				refused++
			}
		}
		if refused == 0 || refused == len(cases) {
			t.Errorf("the kernel refused %d of %d cases: the writes do not test anything", refused, len(cases))
		}
	}
	t.Run("unlimited parent", func(t *testing.T) { run(t, parent, root) })
	if l.CPU.Version == 1 {
		limited := filepath.Join(root, "limited")
		if err := os.Mkdir(limited, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := write(limited, 1, cgroup.Limits{Period: 100 * ms, Quota: 150 * ms}); err != nil {
			t.Fatal(err)
		}
		t.Run("parent of 1.5 CPUs", func(t *testing.T) { run(t, parent+"/limited", limited) })
	}
}

// write sets the limits in dir, file by file, as cgroup.Manager does,
// and returns the first error of the kernel.
func write(dir string, version int, l cgroup.Limits) error {
	us := func(d time.Duration) string { return strconv.FormatInt(int64(d/time.Microsecond), 10) }
	if version == 2 {
		if err := cgroup.WriteFile(filepath.Join(dir, "cpu.max"), us(l.Quota)+" "+us(l.Period)); err != nil {
			return err
		}
		return cgroup.WriteFile(filepath.Join(dir, "cpu.max.burst"), us(l.Burst))
	}
	for _, f := range []struct{ name, value string }{{"cpu.cfs_period_us", us(l.Period)}, {"cpu.cfs_quota_us", us(l.Quota)}, {"cpu.cfs_burst_us", us(l.Burst)}} {
		if f.name == "cpu.cfs_burst_us" && l.Burst == 0 {
			continue
		}
		if err := cgroup.WriteFile(filepath.Join(dir, f.name), f.value); err != nil {
			return err
		}
	}
	return nil
}

// enable turns the cpu controller on for dir's children (v2).
func enable(t *testing.T, dir string) {
	t.Helper()
	if err := cgroup.WriteFile(filepath.Join(dir, "cgroup.subtree_control"), "+cpu"); err != nil {
		t.Fatal(err)
	}
}
