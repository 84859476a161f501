package cpuview

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cfsprobe/cfsprobe/internal/golden"
	"github.com/cfsprobe/cfsprobe/internal/hostfs"
)

// viewCases are the fixture trees under testdata/<name>: proc/<pid>/
// {mountinfo,cgroup,status}, the cgroup files and
// sys/devices/system/cpu/online under fs/. Each names what Resolve must
// find: the fraction, the count under each rule, what limits it, the
// tightest level, and the warnings.
var viewCases = []struct {
	name                 string
	pid                  string // "self" when empty
	version              int
	group                string
	usable               int
	effective            float64
	ceil, floor, nearest int
	limitedBy            string
	tightest             string // cgroup of the tightest level ("" none)
	levels               int
	hidden               bool
	warnings             []string // substrings, in order
}{
	// Must show 2: quota 0.5, 1, 1.5 CPUs and a cpuset of one CPU.
	{name: "v1-apart-half", pid: "4242", version: 1, group: "/kubepods/pod1/c1", usable: 2, effective: 0.5,
		ceil: 1, floor: 1, nearest: 1, limitedBy: "quota", tightest: "/kubepods/pod1/c1", levels: 4},
	{name: "v1-apart-one", version: 1, group: "/kubepods/pod1/c1", usable: 2, effective: 1,
		ceil: 1, floor: 1, nearest: 1, limitedBy: "quota", tightest: "/kubepods/pod1/c1", levels: 4},
	{name: "v1-comounted-one-and-half", version: 1, group: "/system.slice/app.service", usable: 4, effective: 1.5,
		ceil: 2, floor: 1, nearest: 2, limitedBy: "quota", tightest: "/system.slice/app.service", levels: 3},
	{name: "hybrid-one-and-half", version: 1, group: "/user.slice", usable: 4, effective: 1.5,
		ceil: 2, floor: 1, nearest: 2, limitedBy: "quota", tightest: "/user.slice", levels: 2},
	{name: "v2-one-and-half", version: 2, group: "/system.slice/app.service", usable: 4, effective: 1.5,
		ceil: 2, floor: 1, nearest: 2, limitedBy: "quota", tightest: "/system.slice/app.service", levels: 3},
	{name: "v1-cpuset-one", version: 1, group: "/kubepods/pod1/c1", usable: 1, effective: 1,
		ceil: 1, floor: 1, nearest: 1, limitedBy: "cpuset", levels: 4, warnings: []string{"no CPU quota: the view is the CPU count (1)"}},
	{name: "v2-cpuset-one", version: 2, group: "/kubepods/pod1/c1", usable: 1, effective: 1,
		ceil: 1, floor: 1, nearest: 1, limitedBy: "cpuset", tightest: "/kubepods/pod1/c1", levels: 4},
	// Must show 3: a parent tighter than the child.
	{name: "v1-parent-tighter", version: 1, group: "/a/b", usable: 4, effective: 0.5,
		ceil: 1, floor: 1, nearest: 1, limitedBy: "quota", tightest: "/a", levels: 3},
	{name: "v2-parent-tighter", version: 2, group: "/a/b/c", usable: 4, effective: 1,
		ceil: 1, floor: 1, nearest: 1, limitedBy: "quota", tightest: "/a/b", levels: 4},
	// Containers: the walk stops at the mount root.
	{name: "container-v1", version: 1, group: "/kubepods/burstable/pod7c1e9b3a/8d2f4e6a0b1c", usable: 4, effective: 0.5,
		ceil: 1, floor: 1, nearest: 1, limitedBy: "quota", tightest: "/kubepods/burstable/pod7c1e9b3a/8d2f4e6a0b1c", levels: 1, hidden: true},
	{name: "container-v2", version: 2, group: "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod5f0c7a2e.slice/cri-containerd-3f9a1c2b.scope",
		usable: 4, effective: 1.5, ceil: 2, floor: 1, nearest: 2, limitedBy: "quota",
		tightest: "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod5f0c7a2e.slice/cri-containerd-3f9a1c2b.scope", levels: 1, hidden: true},
	// A cgroup namespace: the container's group is mounted as "/".
	{name: "container-v2-cgroupns", version: 2, group: "/", usable: 4, effective: 1,
		ceil: 1, floor: 1, nearest: 1, limitedBy: "quota", tightest: "/", levels: 1, hidden: true},
	// Must show 7: missing information falls back to the CPU count, with a warning.
	{name: "v1-no-quota", version: 1, group: "/kubepods/pod1/c1", usable: 2, effective: 2,
		ceil: 2, floor: 2, nearest: 2, limitedBy: "online", levels: 4, warnings: []string{"no CPU quota: the view is the CPU count (2)"}},
	{name: "v1-unreadable", version: 1, group: "/kubepods/pod1/c1", usable: 2, effective: 2,
		ceil: 2, floor: 2, nearest: 2, limitedBy: "online", levels: 4,
		warnings: []string{"cannot read the quota of /kubepods/pod1/c1", "no CPU quota: the view is the CPU count (2)"}},
	{name: "v2-no-cpu-controller", version: 0, usable: 2, effective: 2, ceil: 2, floor: 2, nearest: 2, limitedBy: "online",
		warnings: []string{"no cgroup hierarchy has the cpu controller", "no CPU quota is known: the view is the CPU count (2)"}},
	{name: "v1-affinity-one", version: 1, group: "/kubepods/pod1/c1", usable: 1, effective: 1,
		ceil: 1, floor: 1, nearest: 1, limitedBy: "affinity", levels: 4, warnings: []string{"no CPU quota: the view is the CPU count (1)"}},
}

func fixture(name string) hostfs.FS { return hostfs.New(filepath.Join("testdata", name)) }

func TestResolveFixtures(t *testing.T) {
	for _, tc := range viewCases {
		t.Run(tc.name, func(t *testing.T) {
			pid := tc.pid
			if pid == "" {
				pid = "self"
			}
			v, err := Resolve(fixture(tc.name), pid)
			if err != nil {
				t.Fatal(err)
			}
			checkView(t, v, tc.version, tc.group, tc.usable, tc.effective, tc.limitedBy, tc.tightest, tc.levels, tc.hidden)
			for r, want := range map[Rounding]int{Ceil: tc.ceil, Floor: tc.floor, Nearest: tc.nearest} {
				if got := v.Threads(r); got != want {
					t.Errorf("%s: %d threads, want %d", r, got, want)
				}
				if got := ruleThreads(v, string(r)); got != want {
					t.Errorf("rules[%s].threads = %d, want %d", r, got, want)
				}
			}
			if got := v.Recommendation.Threads; got != tc.floor {
				t.Errorf("recommendation %d threads, want floor's %d", got, tc.floor)
			}
			if v.Recommendation.Reason == "" {
				t.Error("recommendation without a reason")
			}
			checkWarnings(t, v.Warnings, tc.warnings)
			checkGolden(t, v)
		})
	}
}

func checkView(t *testing.T, v *View, version int, group string, usable int, eff float64, limitedBy, tightest string, levels int, hidden bool) {
	t.Helper()
	if v.CgroupVersion != version {
		t.Errorf("cgroup_version %d, want %d", v.CgroupVersion, version)
	}
	if v.Cgroup != group {
		t.Errorf("cgroup %q, want %q", v.Cgroup, group)
	}
	if v.UsableCPUs != usable {
		t.Errorf("usable_cpus %d, want %d", v.UsableCPUs, usable)
	}
	if v.EffectiveCPUs != eff {
		t.Errorf("effective_cpus %v, want %v", v.EffectiveCPUs, eff)
	}
	if v.LimitedBy != limitedBy {
		t.Errorf("limited_by %q, want %q", v.LimitedBy, limitedBy)
	}
	if len(v.Levels) != levels {
		t.Errorf("%d levels, want %d: %+v", len(v.Levels), levels, v.Levels)
	}
	got := ""
	for _, l := range v.Levels {
		if l.Tightest {
			if got != "" {
				t.Errorf("two tightest levels: %s and %s", got, l.Cgroup)
			}
			got = l.Cgroup
		}
	}
	if got != tightest {
		t.Errorf("tightest level %q, want %q", got, tightest)
	}
	if v.AncestorsHidden != hidden {
		t.Errorf("ancestors_hidden %v, want %v", v.AncestorsHidden, hidden)
	}
}

func ruleThreads(v *View, rule string) int {
	for _, r := range v.Rules {
		if r.Rule == rule {
			return r.Threads
		}
	}
	return -1
}

func checkWarnings(t *testing.T, got, want []string) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("warnings %q, want %d matching %q", got, len(want), want)
		return
	}
	for i := range want {
		if !strings.Contains(got[i], want[i]) {
			t.Errorf("warning %d is %q, want it to contain %q", i, got[i], want[i])
		}
	}
}

// checkGolden compares the JSON and the text of a view with
// testdata/golden/<test>.{json,txt}; -update rewrites them.
func checkGolden(t *testing.T, v *View) {
	t.Helper()
	var j, txt bytes.Buffer
	if err := v.Write(&j); err != nil {
		t.Fatal(err)
	}
	if err := v.WriteText(&txt); err != nil {
		t.Fatal(err)
	}
	base := filepath.Join("testdata", "golden", strings.ReplaceAll(t.Name(), "/", "_"))
	golden.Check(t, base+".json", j.Bytes())
	golden.Check(t, base+".txt", txt.Bytes())
}

// --cgroup takes a cgroup path or a directory under the mount, with or
// without the fs root in front; both give the same levels as the process.
func TestResolveCgroupForms(t *testing.T) {
	fs := fixture("v1-parent-tighter")
	for _, g := range []string{"/a/b", "a/b", "/a/b/", fs.Path("/sys/fs/cgroup/cpu/a/b"), "/sys/fs/cgroup/cpu/a/b", "/sys/fs/cgroup/cpuset/a/b"} {
		v, err := ResolveCgroup(fs, g)
		if err != nil {
			t.Errorf("%s: %v", g, err)
			continue
		}
		checkView(t, v, 1, "/a/b", 4, 0.5, "quota", "/a", 3, false)
		if v.Affinity != nil || v.PID != 0 {
			t.Errorf("%s: a group has no affinity or pid: %+v %d", g, v.Affinity, v.PID)
		}
	}
	// A container's group: the path as /proc/self/cgroup shows it.
	fs = fixture("container-v1")
	v, err := ResolveCgroup(fs, "/kubepods/burstable/pod7c1e9b3a/8d2f4e6a0b1c")
	if err != nil {
		t.Fatal(err)
	}
	checkView(t, v, 1, "/kubepods/burstable/pod7c1e9b3a/8d2f4e6a0b1c", 4, 0.5, "quota", "/kubepods/burstable/pod7c1e9b3a/8d2f4e6a0b1c", 1, true)
}

func TestResolveErrors(t *testing.T) {
	fs := fixture("v1-parent-tighter")
	cases := []struct {
		name string
		f    func() error
		want string
	}{
		{"unknown group", func() error { _, err := ResolveCgroup(fs, "/no/such/group"); return err }, "no group /no/such/group in the cpu hierarchy"},
		{"outside the container's mount", func() error {
			f := fixture("container-v1")
			_, err := ResolveCgroup(f, "/system.slice")
			return err
		}, "outside what is mounted"},
		{"no cpu controller", func() error {
			f := fixture("v2-no-cpu-controller")
			_, err := ResolveCgroup(f, "/user.slice")
			return err
		}, "--cgroup needs the cgroup hierarchy of the cpu controller"},
		{"pid not a number", func() error { _, err := Resolve(fs, "abc"); return err }, `--pid "abc" is not a process ID`},
		{"pid zero", func() error { _, err := Resolve(fs, "0"); return err }, `--pid "0" is not a process ID`},
		{"no such process", func() error { _, err := Resolve(fs, "999999"); return err }, "no process 999999"},
	}
	for _, tc := range cases {
		err := tc.f()
		var ie *InputError
		if !errors.As(err, &ie) {
			t.Errorf("%s: error %v is not an *InputError", tc.name, err)
			continue
		}
		if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %q does not say %q", tc.name, err, tc.want)
		}
	}
}

// Missing files that are not about cgroups (status, online) are warnings
// too, and the count still comes out.
func TestResolveMissingProcFiles(t *testing.T) {
	dir := t.TempDir()
	fs := hostfs.New(dir)
	if err := os.MkdirAll(fs.Proc("self"), 0o755); err != nil {
		t.Fatal(err)
	}
	v, err := Resolve(fs, "self")
	if err != nil {
		t.Fatal(err)
	}
	if v.UsableCPUs != numCPU() || v.EffectiveCPUs != float64(numCPU()) {
		t.Errorf("usable %d effective %v, want the CPU count %d", v.UsableCPUs, v.EffectiveCPUs, numCPU())
	}
	checkWarnings(t, v.Warnings, []string{"cannot read the online CPUs", "cannot read the affinity", "cannot read the mount table", "no CPU quota is known"})
}

func TestRoundQuota(t *testing.T) {
	const p = 100000
	cases := []struct {
		q                    int64
		ceil, floor, nearest int
	}{
		{1000, 1, 1, 1},
		{49999, 1, 1, 1},
		{50000, 1, 1, 1},
		{100000, 1, 1, 1},
		{100001, 2, 1, 1},
		{149999, 2, 1, 1},
		{150000, 2, 1, 2},
		{200000, 2, 2, 2},
		{250000, 3, 2, 3},
		{333333, 4, 3, 3},
	}
	for _, c := range cases {
		for r, want := range map[Rounding]int{Ceil: c.ceil, Floor: c.floor, Nearest: c.nearest} {
			if got := roundQuota(c.q, p, r); got != want {
				t.Errorf("%d/%d %s = %d, want %d", c.q, p, r, got, want)
			}
		}
	}
}

func TestParseAffinity(t *testing.T) {
	got, err := parseAffinity(strings.NewReader("Name:\tx\nCpus_allowed:\tf\nCpus_allowed_list:\t0-3,5\nMems_allowed_list:\t0\n"))
	if err != nil || got != "0-3,5" {
		t.Errorf("got %q, %v", got, err)
	}
	if _, err := parseAffinity(strings.NewReader("Name:\tx\n")); err == nil {
		t.Error("no Cpus_allowed_list line: want an error")
	}
}

func FuzzParseAffinity(f *testing.F) {
	f.Add("Cpus_allowed_list:\t0-1\n")
	f.Add("Name:\tcat\nCpus_allowed_list:\t0,2-3\n")
	f.Add("Cpus_allowed_list:")
	f.Fuzz(func(t *testing.T, s string) {
		v, err := parseAffinity(strings.NewReader(s))
		if err == nil && strings.ContainsAny(v, "\n") {
			t.Errorf("value %q spans lines", v)
		}
	})
}
