package cgroup

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cfsprobe/cfsprobe/internal/hostfs"
)

// hier is what a test expects of one Hierarchy. Dir is relative to the
// fixture's fs/ root.
type hier struct {
	version     int
	dir         string
	root        string
	controllers []string // checked when not nil
}

// The cgroup paths of the two container fixtures (see testdata/container-*).
const (
	k8sV2Scope = "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod5f0c7a2e_3b1d_4c8e_9a6f_2d4b8c1e7f90.slice/cri-containerd-3f9a1c2b4d5e6f708192a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d6e7f8.scope"
	k8sV1Group = "/kubepods/burstable/pod7c1e9b3a-2f4d-4a6b-8c0e-1d3f5a7b9c2e/8d2f4e6a0b1c3d5e7f9a1b3c5d7e9f0a2b4c6d8e0f1a3b5c7d9e1f2a4b6c8d0e"
)

// layoutCases are the fixture trees under testdata/<name>: each holds
// proc/self/{mountinfo,cgroup} and the cgroup files under fs/.
var layoutCases = []struct {
	name    string
	mode    Mode
	err     error  // a sentinel Detect must return (errors.Is)
	errText string // or a substring of a non-sentinel error
	cpu     *hier
	cpuAcct *hier // nil: must be the same *Hierarchy as cpu
	cpuSet  *hier // nil: must be nil
	unified *hier // nil: must be nil
	// What ReadProcCgroup + DirOf give for the process's cpu and cpuacct
	// groups, relative to fs/, and what the files there say.
	cpuDir  string
	acctDir string
	stat    Stat
	max     Limits
}{
	{
		// This machine: cpu and cpuacct mounted apart, a cgroup2 mount at
		// unified with only hugetlb enabled: hybrid, cpu through v1.
		name:    "v1-apart",
		mode:    ModeHybrid,
		cpu:     &hier{1, "sys/fs/cgroup/cpu", "/", []string{"cpu"}},
		cpuAcct: &hier{1, "sys/fs/cgroup/cpuacct", "/", []string{"cpuacct"}},
		cpuSet:  &hier{1, "sys/fs/cgroup/cpuset", "/", []string{"cpuset"}},
		unified: &hier{2, "sys/fs/cgroup/unified", "/", []string{"hugetlb"}},
		cpuDir:  "sys/fs/cgroup/cpu/cfsprobe/cfsprobe-4242-0badcafe",
		acctDir: "sys/fs/cgroup/cpuacct/cfsprobe/cfsprobe-4242-0badcafe",
		stat:    Stat{UsageNs: 24691357802, NrPeriods: 1234, NrThrottled: 567, ThrottledNs: 8901234567},
		max:     Limits{Quota: 20 * time.Millisecond, Period: 100 * time.Millisecond},
	},
	{
		// The same without the cgroup2 mount, on a kernel without burst
		// counters; the process is in the root groups.
		name:    "v1-apart-no-unified",
		mode:    ModeV1,
		cpu:     &hier{1, "sys/fs/cgroup/cpu", "/", []string{"cpu"}},
		cpuAcct: &hier{1, "sys/fs/cgroup/cpuacct", "/", []string{"cpuacct"}},
		cpuSet:  &hier{1, "sys/fs/cgroup/cpuset", "/", []string{"cpuset"}},
		cpuDir:  "sys/fs/cgroup/cpu",
		acctDir: "sys/fs/cgroup/cpuacct",
		stat:    Stat{UsageNs: 347763830968},
		max:     Limits{Period: 100 * time.Millisecond},
	},
	{
		// CentOS 7: systemd's legacy layout, "cpuacct,cpu" in one mount
		// (the kernel lists the options in that order) with symlinks.
		name:    "v1-comounted",
		mode:    ModeV1,
		cpu:     &hier{1, "sys/fs/cgroup/cpu,cpuacct", "/", []string{"cpuacct", "cpu"}},
		cpuSet:  &hier{1, "sys/fs/cgroup/cpuset", "/", []string{"cpuset"}},
		cpuDir:  "sys/fs/cgroup/cpu,cpuacct/user.slice",
		acctDir: "sys/fs/cgroup/cpu,cpuacct/user.slice",
		stat:    Stat{UsageNs: 9876543210},
		max:     Limits{Period: 100 * time.Millisecond},
	},
	{
		// Ubuntu 22.04 with systemd.unified_cgroup_hierarchy=0: v1
		// controllers plus a controller-less cgroup2 at unified.
		name:    "hybrid",
		mode:    ModeHybrid,
		cpu:     &hier{1, "sys/fs/cgroup/cpu,cpuacct", "/", []string{"cpu", "cpuacct"}},
		cpuSet:  &hier{1, "sys/fs/cgroup/cpuset", "/", []string{"cpuset"}},
		unified: &hier{2, "sys/fs/cgroup/unified", "/", []string{}},
		cpuDir:  "sys/fs/cgroup/cpu,cpuacct/user.slice",
		acctDir: "sys/fs/cgroup/cpu,cpuacct/user.slice",
		stat:    Stat{UsageNs: 61234567890, NrPeriods: 311, NrThrottled: 42, ThrottledNs: 1593000000, NrBursts: 7, BurstNs: 35000000},
		max:     Limits{Quota: 150 * time.Millisecond, Period: 100 * time.Millisecond},
	},
	{
		// Hybrid booted with cgroup_no_v1=cpu,cpuacct: the cpu controller
		// is on the unified mount; cpuset stays on v1.
		name:    "hybrid-cpu-v2",
		mode:    ModeHybrid,
		cpu:     &hier{2, "sys/fs/cgroup/unified", "/", []string{"cpu"}},
		cpuSet:  &hier{1, "sys/fs/cgroup/cpuset", "/", []string{"cpuset"}},
		unified: &hier{2, "sys/fs/cgroup/unified", "/", []string{"cpu"}},
		cpuDir:  "sys/fs/cgroup/unified/user.slice/user-1000.slice/session-3.scope",
		acctDir: "sys/fs/cgroup/unified/user.slice/user-1000.slice/session-3.scope",
		stat:    Stat{UsageNs: 4711000 * 1000},
		max:     Limits{Period: 100 * time.Millisecond},
	},
	{
		// Debian 12: the unified hierarchy only.
		name:    "v2",
		mode:    ModeV2,
		cpu:     &hier{2, "sys/fs/cgroup", "/", []string{"cpuset", "cpu", "io", "memory", "pids"}},
		cpuSet:  &hier{2, "sys/fs/cgroup", "/", nil},
		unified: &hier{2, "sys/fs/cgroup", "/", nil},
		cpuDir:  "sys/fs/cgroup/user.slice/user-1000.slice/session-2.scope",
		acctDir: "sys/fs/cgroup/user.slice/user-1000.slice/session-2.scope",
		stat:    Stat{UsageNs: 2769105 * 1000},
		max:     Limits{Period: 100 * time.Millisecond},
	},
	{
		// A Kubernetes container in the host's cgroup namespace: the
		// mount's root is the container's scope, and /proc/self/cgroup
		// shows the full path, which DirOf maps to the mount point.
		name:    "container-v2",
		mode:    ModeV2,
		cpu:     &hier{2, "sys/fs/cgroup", k8sV2Scope, []string{"cpuset", "cpu", "io", "memory", "hugetlb", "pids", "rdma", "misc"}},
		cpuSet:  &hier{2, "sys/fs/cgroup", k8sV2Scope, nil},
		unified: &hier{2, "sys/fs/cgroup", k8sV2Scope, nil},
		cpuDir:  "sys/fs/cgroup",
		acctDir: "sys/fs/cgroup",
		stat:    Stat{UsageNs: 182736455 * 1000, NrPeriods: 52311, NrThrottled: 8812, ThrottledNs: 401223344 * 1000},
		max:     Limits{Quota: 50 * time.Millisecond, Period: 100 * time.Millisecond},
	},
	{
		// A Kubernetes container (docker, cgroupfs driver) on a v1 host.
		name:    "container-v1",
		mode:    ModeV1,
		cpu:     &hier{1, "sys/fs/cgroup/cpu,cpuacct", k8sV1Group, []string{"cpu", "cpuacct"}},
		cpuSet:  &hier{1, "sys/fs/cgroup/cpuset", k8sV1Group, []string{"cpuset"}},
		cpuDir:  "sys/fs/cgroup/cpu,cpuacct",
		acctDir: "sys/fs/cgroup/cpu,cpuacct",
		stat:    Stat{UsageNs: 182736455123, NrPeriods: 52311, NrThrottled: 8812, ThrottledNs: 401223344000},
		max:     Limits{Quota: 50 * time.Millisecond, Period: 100 * time.Millisecond},
	},
	{
		// Hybrid with cpu neither on a v1 mount nor enabled on unified.
		name: "no-cpu",
		mode: ModeHybrid,
		err:  ErrNoCPUController,
	},
	{
		name: "none",
		mode: ModeNone,
		err:  ErrNoCPUController,
	},
	{
		// cpu is mounted but cpuacct is not: no usage on v1.
		name:    "v1-cpu-no-cpuacct",
		mode:    ModeV1,
		errText: "cpuacct is not",
	},
}

func TestDetectFixtures(t *testing.T) {
	for _, tc := range layoutCases {
		t.Run(tc.name, func(t *testing.T) {
			root := filepath.Join("testdata", tc.name)
			l, err := Detect(hostfs.New(root))
			switch {
			case tc.err != nil:
				if !errors.Is(err, tc.err) {
					t.Fatalf("Detect: err = %v, want %v", err, tc.err)
				}
			case tc.errText != "":
				if err == nil || !strings.Contains(err.Error(), tc.errText) {
					t.Fatalf("Detect: err = %v, want one containing %q", err, tc.errText)
				}
			case err != nil:
				t.Fatalf("Detect: %v", err)
			}
			if l == nil {
				t.Fatalf("Detect returned no layout (err %v)", err)
			}
			if l.Mode != tc.mode {
				t.Errorf("Mode = %q, want %q", l.Mode, tc.mode)
			}
			if err != nil {
				return
			}
			checkHier(t, "CPU", l.CPU, tc.cpu, root)
			if tc.cpuAcct == nil {
				if l.CPUAcct != l.CPU {
					t.Errorf("CPUAcct = %+v, want the CPU hierarchy itself", l.CPUAcct)
				}
			} else {
				checkHier(t, "CPUAcct", l.CPUAcct, tc.cpuAcct, root)
			}
			checkHier(t, "CPUSet", l.CPUSet, tc.cpuSet, root)
			checkHier(t, "Unified", l.Unified, tc.unified, root)

			cgs, err := ReadProcCgroup(hostfs.New(root), "self")
			if err != nil {
				t.Fatalf("ReadProcCgroup: %v", err)
			}
			cpuDir := groupDir(t, cgs, l.CPU, "cpu")
			acctDir := groupDir(t, cgs, l.CPUAcct, "cpuacct")
			if want := filepath.Join(root, tc.cpuDir); cpuDir != want {
				t.Errorf("cpu group dir = %q, want %q", cpuDir, want)
			}
			if want := filepath.Join(root, tc.acctDir); acctDir != want {
				t.Errorf("cpuacct group dir = %q, want %q", acctDir, want)
			}

			// The files found there parse to what the fixture says.
			st, mx := readGroupFiles(t, l.CPU.Version, cpuDir, acctDir)
			if st != tc.stat {
				t.Errorf("stat = %+v, want %+v", st, tc.stat)
			}
			if mx != tc.max {
				t.Errorf("max = %+v, want %+v", mx, tc.max)
			}
		})
	}
}

// TestFixturesAllTested keeps fixture directories and the table in step.
func TestFixturesAllTested(t *testing.T) {
	entries, err := os.ReadDir("testdata")
	if err != nil {
		t.Fatal(err)
	}
	tested := map[string]bool{}
	for _, tc := range layoutCases {
		tested[tc.name] = true
	}
	for _, e := range entries {
		if !e.IsDir() || e.Name() == "fuzz" {
			continue
		}
		if !tested[e.Name()] {
			t.Errorf("testdata/%s has no case in layoutCases", e.Name())
		}
		delete(tested, e.Name())
	}
	for name := range tested {
		t.Errorf("layoutCases has %q but testdata/%s does not exist", name, name)
	}
}

// Hierarchies lists each mounted hierarchy once, in the order CPU,
// CPUAcct, CPUSet, Unified: co-mounted cpu,cpuacct and a v2 tree that
// carries them all are one.
func TestHierarchies(t *testing.T) {
	for name, want := range map[string][]string{
		"v1-apart":      {"cpu", "cpuacct", "cpuset", "unified"},
		"v1-comounted":  {"cpu,cpuacct", "cpuset"},
		"hybrid-cpu-v2": {"unified", "cpuset"},
		"v2":            {""},
	} {
		root := filepath.Join("testdata", name)
		l, err := Detect(hostfs.New(root))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		var got []string
		for _, h := range l.Hierarchies() {
			got = append(got, strings.TrimPrefix(strings.TrimPrefix(h.Dir, filepath.Join(root, "sys/fs/cgroup")), "/"))
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s: Hierarchies() = %q, want %q", name, got, want)
		}
	}
}

func checkHier(t *testing.T, what string, got *Hierarchy, want *hier, root string) {
	t.Helper()
	if want == nil {
		if got != nil {
			t.Errorf("%s = %+v, want nil", what, got)
		}
		return
	}
	if got == nil {
		t.Errorf("%s = nil, want %+v", what, want)
		return
	}
	if got.Version != want.version {
		t.Errorf("%s.Version = %d, want %d", what, got.Version, want.version)
	}
	if wd := filepath.Join(root, want.dir); got.Dir != wd {
		t.Errorf("%s.Dir = %q, want %q", what, got.Dir, wd)
	}
	if got.Root != want.root {
		t.Errorf("%s.Root = %q, want %q", what, got.Root, want.root)
	}
	if want.controllers != nil && !slices.Equal(got.Controllers, want.controllers) &&
		(len(got.Controllers) != 0 || len(want.controllers) != 0) {
		t.Errorf("%s.Controllers = %q, want %q", what, got.Controllers, want.controllers)
	}
}

// groupDir finds the process's group in hierarchy h the way a monitor
// would: the /proc/self/cgroup line of that hierarchy, mapped by DirOf.
func groupDir(t *testing.T, cgs []ProcCgroup, h *Hierarchy, controller string) string {
	t.Helper()
	for _, c := range cgs {
		v2line := c.HierarchyID == 0 && len(c.Controllers) == 0
		if (h.Version == 2 && v2line) || (h.Version == 1 && slices.Contains(c.Controllers, controller)) {
			d, ok := h.DirOf(c.Path)
			if !ok {
				t.Fatalf("DirOf(%q) with root %q: not below the mount", c.Path, h.Root)
			}
			return d
		}
	}
	t.Fatalf("no /proc/self/cgroup line for %s (v%d)", controller, h.Version)
	return ""
}

func readGroupFiles(t *testing.T, version int, cpuDir, acctDir string) (Stat, Limits) {
	t.Helper()
	open := func(dir, name string) *os.File {
		f, err := os.Open(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() })
		return f
	}
	st, err := parseCPUStat(open(cpuDir, "cpu.stat"), version)
	if err != nil {
		t.Fatalf("cpu.stat: %v", err)
	}
	var mx Limits
	if version == 1 {
		if st.UsageNs, err = parseUsage(open(acctDir, "cpuacct.usage")); err != nil {
			t.Fatalf("cpuacct.usage: %v", err)
		}
		mx, err = parseV1Max(open(cpuDir, "cpu.cfs_quota_us"), open(cpuDir, "cpu.cfs_period_us"))
	} else {
		mx, err = parseCPUMax(open(cpuDir, "cpu.max"))
	}
	if err != nil {
		t.Fatalf("max: %v", err)
	}
	return st, mx
}

func TestDirOf(t *testing.T) {
	tests := []struct {
		name, root, path string
		want             string
		ok               bool
	}{
		{"host root", "/", "/user.slice/session-1.scope", "/sys/fs/cgroup/user.slice/session-1.scope", true},
		{"host root, path root", "/", "/", "/sys/fs/cgroup", true},
		{"empty root", "", "/a", "/sys/fs/cgroup/a", true},
		{"container, its own group", "/kubepods/pod1/c1", "/kubepods/pod1/c1", "/sys/fs/cgroup", true},
		{"container, a child", "/kubepods/pod1/c1", "/kubepods/pod1/c1/sub", "/sys/fs/cgroup/sub", true},
		{"container root with trailing slash", "/kubepods/pod1/c1/", "/kubepods/pod1/c1/sub", "/sys/fs/cgroup/sub", true},
		{"container, a sibling", "/kubepods/pod1/c1", "/kubepods/pod1/c2", "", false},
		{"container, shared name prefix", "/kubepods/pod1/c1", "/kubepods/pod1/c10", "", false},
		{"container, the parent", "/kubepods/pod1/c1", "/kubepods/pod1", "", false},
		{"container, namespaced view", "/kubepods/pod1/c1", "/", "", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := &Hierarchy{Version: 2, Dir: "/sys/fs/cgroup", Root: tc.root}
			got, ok := h.DirOf(tc.path)
			if got != tc.want || ok != tc.ok {
				t.Errorf("DirOf(%q) with root %q = %q, %v; want %q, %v", tc.path, tc.root, got, ok, tc.want, tc.ok)
			}
		})
	}
}

// TestLayoutFromMountsPreference covers mount tables that the fixtures do
// not: the same hierarchy mounted twice, once as a subtree (a bind mount
// into a container) and once whole.
func TestLayoutFromMountsPreference(t *testing.T) {
	fsRoot := t.TempDir()
	for _, d := range []string{"whole", "sub"} {
		if err := os.MkdirAll(filepath.Join(fsRoot, d), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(fsRoot, d, "cgroup.controllers"), []byte("cpuset cpu io memory pids\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	v1 := func(point, root, opts string) Mount {
		return Mount{MountPoint: point, Root: root, FSType: "cgroup", SuperOptions: strings.Split(opts, ",")}
	}
	v2 := func(point, root string) Mount {
		return Mount{MountPoint: point, Root: root, FSType: "cgroup2"}
	}
	tests := []struct {
		name    string
		mounts  []Mount
		mode    Mode
		cpuDir  string
		unified string
	}{
		{"v1 subtree then whole", []Mount{v1("/sub", "/a", "rw,cpu,cpuacct"), v1("/whole", "/", "rw,cpu,cpuacct")}, ModeV1, "whole", ""},
		{"v1 whole then subtree", []Mount{v1("/whole", "/", "rw,cpu,cpuacct"), v1("/sub", "/a", "rw,cpu,cpuacct")}, ModeV1, "whole", ""},
		{"v2 subtree then whole", []Mount{v2("/sub", "/a"), v2("/whole", "/")}, ModeV2, "whole", "whole"},
		{"v2 whole then subtree", []Mount{v2("/whole", "/"), v2("/sub", "/a")}, ModeV2, "whole", "whole"},
		{"v1 name=systemd only is not v1", []Mount{v1("/sub", "/", "rw,xattr,name=systemd"), v2("/whole", "/")}, ModeV2, "whole", "whole"},
		{"unknown v1 option is not a controller", []Mount{v1("/sub", "/", "rw,cpu_bogus,noprefix"), v2("/whole", "/")}, ModeV2, "whole", "whole"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			l, err := layoutFromMounts(tc.mounts, hostfs.New(fsRoot))
			if err != nil {
				t.Fatal(err)
			}
			if l.Mode != tc.mode {
				t.Errorf("Mode = %q, want %q", l.Mode, tc.mode)
			}
			if want := filepath.Join(fsRoot, tc.cpuDir); l.CPU.Dir != want {
				t.Errorf("CPU.Dir = %q, want %q", l.CPU.Dir, want)
			}
			if tc.unified != "" {
				if want := filepath.Join(fsRoot, tc.unified); l.Unified == nil || l.Unified.Dir != want {
					t.Errorf("Unified = %+v, want dir %q", l.Unified, want)
				}
			}
		})
	}
}
