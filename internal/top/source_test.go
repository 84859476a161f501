package top

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/cfsprobe/cfsprobe/internal/cgroup"
	"github.com/cfsprobe/cfsprobe/internal/golden"
	"github.com/cfsprobe/cfsprobe/internal/monitor"
	"github.com/cfsprobe/cfsprobe/internal/trace"
)

const (
	nginxV1 = "/system.slice/nginx.service"
	podV2   = "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod0538ece5_db1f_45ab_a55e_2813132ab9a5.slice/cri-containerd-1b3167c067e27456ff2b48f6038063327d1ed79ab9e345f1362f4698b6145398.scope"
)

func paths(rs []Reading) []string {
	var out []string
	for _, r := range rs {
		out = append(out, r.Path)
	}
	return out
}

func openFixture(t *testing.T, dir string) *monitor.Root {
	t.Helper()
	r, err := monitor.OpenRoot(dir)
	if err != nil {
		t.Fatalf("OpenRoot(%s): %v", dir, err)
	}
	return r
}

// copiedSource is a TreeSource of a copy of the fixture tree at fixture,
// which the test may change (in dir), and the time it reads, which the
// test moves (from t0).
func copiedSource(t *testing.T, fixture string) (src *TreeSource, dir string, clock *time.Time) {
	t.Helper()
	dir = t.TempDir()
	if err := os.CopyFS(dir, os.DirFS(fixture)); err != nil {
		t.Fatal(err)
	}
	src = NewTreeSource(openFixture(t, dir), false, 2, nil)
	now := t0
	src.now = func() time.Time { return now }
	return src, dir, &now
}

// Each fixture tree (v1 with cpu and cpuacct apart, as on the test
// machine, and v2) gives the groups with a quota, or all of them, with
// their identity, limits and counters in ns.
func TestTreeSourceFixtures(t *testing.T) {
	cases := []struct {
		fixture      string
		limited, all []string
		total        int
		nginx        string
		nginxStat    cgroup.Stat
	}{
		{
			fixture: "v1-apart",
			limited: []string{"/cfsprobe-top-fixture/busy", "/cfsprobe-top-fixture/idle", nginxV1},
			all:     []string{"/", "/cfsprobe-top-fixture", "/cfsprobe-top-fixture/busy", "/cfsprobe-top-fixture/idle", "/cfsprobe-top-fixture/unlimited", "/system.slice", nginxV1},
			total:   7,
			nginx:   nginxV1,
			nginxStat: cgroup.Stat{UsageNs: 61_000_000_000, NrPeriods: 1200, NrThrottled: 300, ThrottledNs: 24_000_000_000,
				NrBursts: 4, BurstNs: 30_000_000},
		},
		{
			fixture: "v2",
			limited: []string{podV2, "/system.slice/nginx.service"},
			all: []string{"/", "/kubepods.slice", "/kubepods.slice/kubepods-burstable.slice",
				"/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod0538ece5_db1f_45ab_a55e_2813132ab9a5.slice",
				podV2, "/system.slice", "/system.slice/nginx.service"},
			total: 7,
			nginx: "/system.slice/nginx.service",
			nginxStat: cgroup.Stat{UsageNs: 61_000_000_000, NrPeriods: 1200, NrThrottled: 300, ThrottledNs: 24_000_000_000,
				NrBursts: 4, BurstNs: 30_000_000},
		},
	}
	for _, tc := range cases {
		t.Run(tc.fixture, func(t *testing.T) {
			root := openFixture(t, filepath.Join("testdata", tc.fixture))
			s, err := NewTreeSource(root, false, 2, nil).Read()
			if err != nil {
				t.Fatal(err)
			}
			if got := paths(s.Readings); !slices.Equal(got, tc.limited) {
				t.Errorf("groups with a limit %v, want %v", got, tc.limited)
			}
			if s.Total != tc.total || s.Skipped != 0 {
				t.Errorf("total %d skipped %d, want %d and 0", s.Total, s.Skipped, tc.total)
			}
			for _, r := range s.Readings {
				if r.At.IsZero() || r.ID.Kind == "" {
					t.Errorf("%s: no time or identity: %+v", r.Path, r)
				}
				if r.Path != tc.nginx {
					continue
				}
				if r.Stat != tc.nginxStat {
					t.Errorf("%s: stat %+v, want %+v", r.Path, r.Stat, tc.nginxStat)
				}
				want := cgroup.Limits{Quota: 50 * time.Millisecond, Period: 100 * time.Millisecond, Burst: 10 * time.Millisecond}
				if r.Limits != want {
					t.Errorf("%s: limits %+v, want %+v", r.Path, r.Limits, want)
				}
				if r.ID.Kind != monitor.KindSystemd || r.ID.Name != "nginx.service" {
					t.Errorf("%s: identity %+v", r.Path, r.ID)
				}
			}
			s, err = NewTreeSource(root, true, 2, nil).Read()
			if err != nil {
				t.Fatal(err)
			}
			if got := paths(s.Readings); !slices.Equal(got, tc.all) {
				t.Errorf("--all: groups %v, want %v", got, tc.all)
			}
		})
	}
}

// Between two readings of a real tree: a group's counters move, one group
// is removed, one is made, one becomes unreadable. The model shows the
// moved one with figures, the new one without, drops the removed one, and
// the header counts the unreadable one.
func TestTreeSourceChangingTree(t *testing.T) {
	src, dir, clock := copiedSource(t, filepath.Join("testdata", "v1-apart"))
	m := NewModel()
	s, err := src.Read()
	if err != nil {
		t.Fatal(err)
	}
	m.Update(s)

	write := func(p, s string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cpu, acct := filepath.Join(dir, "cpu"), filepath.Join(dir, "cpuacct")
	// busy: 1 s later, 0.2 s more CPU, 10 periods, 8 throttled for 640 ms.
	write(filepath.Join(cpu, "cfsprobe-top-fixture/busy/cpu.stat"), "nr_periods 510\nnr_throttled 408\nthrottled_time 32640000000\n")
	write(filepath.Join(acct, "cfsprobe-top-fixture/busy/cpuacct.usage"), "10200000000\n")
	// idle: removed.
	for _, h := range []string{cpu, acct} {
		if err := os.RemoveAll(filepath.Join(h, "cfsprobe-top-fixture/idle")); err != nil {
			t.Fatal(err)
		}
	}
	// new: made, with a quota.
	for f, v := range map[string]string{"cpu.cfs_quota_us": "10000", "cpu.cfs_period_us": "100000", "cpu.stat": "nr_periods 3\n"} {
		write(filepath.Join(cpu, "cfsprobe-top-fixture/new", f), v)
	}
	write(filepath.Join(acct, "cfsprobe-top-fixture/new/cpuacct.usage"), "1000\n")
	// nginx: unreadable counters.
	write(filepath.Join(cpu, "system.slice/nginx.service/cpu.stat"), "nr_periods many\n")

	*clock = t0.Add(time.Second)
	s, err = src.Read()
	if err != nil {
		t.Fatal(err)
	}
	if s.Skipped != 1 {
		t.Errorf("skipped %d, want 1 (nginx)", s.Skipped)
	}
	m.Update(s)
	rows := m.Rows(SortName, false)
	var got []string
	for _, r := range rows {
		got = append(got, r.Cgroup)
	}
	if want := []string{"/cfsprobe-top-fixture/busy", "/cfsprobe-top-fixture/new"}; !slices.Equal(got, want) {
		t.Fatalf("rows %v, want %v", got, want)
	}
	busy, fresh := rows[0], rows[1]
	if !busy.Ready() || !near(*busy.UsageCPUs, 0.2) || !near(*busy.ThrottledRatio, 0.8) || busy.WorstStallNs != nil {
		t.Errorf("busy: %+v usage %v ratio %v stall %v (nothing measured in a fixture)", busy.Interval, *busy.UsageCPUs, *busy.ThrottledRatio, busy.WorstStallNs)
	}
	if fresh.Ready() || *fresh.Limits.CPUs != 0.1 {
		t.Errorf("new group: ready %v limits %+v", fresh.Ready(), fresh.Limits)
	}
	h := HeaderOf(m, Options{Interval: time.Second})
	if h.Shown != 2 || h.Skipped != 1 {
		t.Errorf("header: %d shown, %d unreadable; want 2 and 1", h.Shown, h.Skipped)
	}
}

func TestTreeSourceRootGone(t *testing.T) {
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS(filepath.Join("testdata", "v2"))); err != nil {
		t.Fatal(err)
	}
	src := NewTreeSource(openFixture(t, dir), false, 2, nil)
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if _, err := src.Read(); err == nil {
		t.Error("no error for a root that is gone")
	}
}

// Groups made in a cgroup v1 cpu hierarchy alone (cpuacct mounted apart:
// monitor's fixture cpu-only-v1-apart) are shown with their throttling,
// their usage unknown and why: "n/a" in the table, null and the reason in
// the JSON (golden files cpu-only-v1-apart.txt and .json).
func TestTreeSourceUsageUnknown(t *testing.T) {
	src, dir, clock := copiedSource(t, filepath.Join("..", "monitor", "testdata", "cpu-only-v1-apart"))
	m := NewModel()
	s, err := src.Read()
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"/batch", "/batch/job-7", nginxV1, "/tenant/worker"}; !slices.Equal(paths(s.Readings), want) {
		t.Fatalf("groups %v, want %v", paths(s.Readings), want)
	}
	for _, r := range s.Readings {
		if want := map[bool]monitor.UsageUnknown{true: "", false: monitor.UsageNoCpuacctGroup}[r.Path == nginxV1]; r.UsageUnknown != want {
			t.Errorf("%s: usage unknown %q, want %q", r.Path, r.UsageUnknown, want)
		}
	}
	m.Update(s)
	// A second later: /batch throttled in its 10 periods, 80 ms each;
	// nginx used 0.3 s in 10 periods, 1 throttled for 20 ms.
	write := func(rel, data string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, rel), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("cpu/batch/cpu.stat", "nr_periods 150017\nnr_throttled 150017\nthrottled_time 12800560000\nnr_bursts 0\nburst_time 0\n")
	write("cpu/system.slice/nginx.service/cpu.stat", "nr_periods 140017\nnr_throttled 2336\nthrottled_time 113390000\nnr_bursts 0\nburst_time 0\n")
	write("cpuacct/system.slice/nginx.service/cpuacct.usage", "7287654123\n")
	*clock = t0.Add(time.Second)
	if s, err = src.Read(); err != nil {
		t.Fatal(err)
	}
	m.Update(s)
	rows := m.Rows(SortThrottled, false)
	if len(rows) != 4 || rows[0].Cgroup != "/batch" || !rows[0].Ready() || *rows[0].ThrottledRatio != 1 || rows[0].Interval.NrThrottled != 10 || rows[0].UsageCPUs != nil {
		t.Errorf("the throttled group without usage is not first with its figures: %+v", rows[0])
	}
	var b bytes.Buffer
	if err := WriteTable(&b, HeaderOf(m, Options{Interval: time.Second, Host: testHost}), rows, 0, SortThrottled, false); err != nil {
		t.Fatal(err)
	}
	golden.Check(t, filepath.Join("testdata", "golden", "cpu-only-v1-apart.txt"), b.Bytes())
	b.Reset()
	if err := WriteJSON(&b, rows); err != nil {
		t.Fatal(err)
	}
	golden.Check(t, filepath.Join("testdata", "golden", "cpu-only-v1-apart.json"), b.Bytes())
}

// fakeNamer names the groups of the container IDs it has.
type fakeNamer map[string]trace.Names

func (f fakeNamer) Names(id monitor.Identity) (trace.Names, bool) {
	n, ok := f[id.ContainerID]
	return n, ok
}

// A group its runtime names is shown by its names, in the table and in
// the JSON; the others by their paths.
func TestTreeSourceNames(t *testing.T) {
	src, _, clock := copiedSource(t, filepath.Join("testdata", "v2"))
	src.names = fakeNamer{"1b3167c067e27456ff2b48f6038063327d1ed79ab9e345f1362f4698b6145398": {
		ContainerName: "app", Image: "registry.local/api:2", PodNamespace: "shop", PodName: "api-7d9f",
	}}
	m := NewModel()
	for i := range 2 {
		*clock = t0.Add(time.Duration(i) * time.Second)
		s, err := src.Read()
		if err != nil {
			t.Fatal(err)
		}
		m.Update(s)
	}
	rows := m.Rows(SortName, false)
	var b bytes.Buffer
	if err := WriteTable(&b, HeaderOf(m, Options{Interval: time.Second, Host: testHost}), rows, 0, SortName, false); err != nil {
		t.Fatal(err)
	}
	if err := WriteJSON(&b, rows); err != nil {
		t.Fatal(err)
	}
	golden.Check(t, filepath.Join("testdata", "golden", "v2-names.txt"), b.Bytes())
	if len(rows) != 2 || rows[1].Name != "shop/api-7d9f/app" || rows[1].ContainerName != "app" || rows[0].Name != "nginx.service" || !rows[0].Names.IsZero() {
		t.Errorf("rows: %+v", rows)
	}
}
