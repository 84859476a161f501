package monitor

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cfsprobe/cfsprobe/internal/cgroup"
	"github.com/cfsprobe/cfsprobe/internal/hostfs"
	"github.com/cfsprobe/cfsprobe/internal/testenv"
)

// On every fixture tree the Scanner finds the groups Discover finds, with
// the limits and counters the fixture's files hold.
func TestScannerFixtures(t *testing.T) {
	for _, tc := range discoverCases {
		t.Run(tc.name, func(t *testing.T) {
			r, err := OpenRoot(filepath.Join("testdata", tc.name))
			if err != nil {
				t.Fatal(err)
			}
			s := NewScanner(r, ScanOptions{})
			defer s.Close()
			if err := s.Ready(); !errors.Is(err, ErrNotWalked) {
				t.Errorf("Ready before the first walk = %v, want ErrNotWalked", err)
			}
			if err := s.Rescan(); err != nil {
				t.Fatal(err)
			}
			if err := s.Ready(); err != nil {
				t.Errorf("Ready = %v", err)
			}
			all, err := r.Discover(Options{All: true})
			if err != nil {
				t.Fatal(err)
			}
			if s.Walked() != len(all.Groups) {
				t.Errorf("Walked = %d, want %d (every group)", s.Walked(), len(all.Groups))
			}
			rs := s.Read(nil)
			if len(rs) != len(tc.groups) {
				t.Fatalf("Read gave %d groups, want %d", len(rs), len(tc.groups))
			}
			byPath := map[string]Reading{}
			for _, g := range rs {
				byPath[g.Group.Path] = g
			}
			for _, w := range tc.groups {
				g, ok := byPath[w.path]
				if !ok || g.Limits != w.lim || g.Stat != w.stat || g.Group.ID != w.id || g.Group.UsageUnknown() != w.unknown {
					t.Errorf("%s: read %v: %+v\nwant limits %+v, stat %+v, id %+v", w.path, ok, g, w.lim, w.stat, w.id)
					continue
				}
				burstFile := filepath.Join(g.Group.CPUDir, map[int]string{1: "cpu.cfs_burst_us", 2: "cpu.max.burst"}[g.Group.Version])
				if _, err := os.Stat(burstFile); (err == nil) != g.Burst {
					t.Errorf("%s: Burst = %v, but %s: %v", g.Group.Path, g.Burst, burstFile, err)
				}
			}
			if n := len(s.Errors().Counts()); n != 0 {
				t.Errorf("read errors %v, want none", s.Errors().Counts())
			}
			ts, gen := s.Targets(nil)
			if len(ts) != len(rs) || gen == 0 {
				t.Errorf("Targets: %d groups, generation %d", len(ts), gen)
			}
		})
	}
}

// ScanOptions.All follows groups without a limit too.
func TestScannerAll(t *testing.T) {
	r, err := OpenRoot(filepath.Join("testdata", "k8s-systemd-v1-containerd"))
	if err != nil {
		t.Fatal(err)
	}
	s := NewScanner(r, ScanOptions{All: true})
	defer s.Close()
	if err := s.Rescan(); err != nil {
		t.Fatal(err)
	}
	rs := s.Read(nil)
	if len(rs) != s.Walked() || len(rs) < 10 {
		t.Fatalf("Read gave %d groups of %d walked", len(rs), s.Walked())
	}
	unlimited := 0
	for _, g := range rs {
		if g.Limits.Unlimited() {
			unlimited++
		}
	}
	if unlimited == 0 {
		t.Error("no unlimited group read")
	}
}

// Groups that appear are found at the next walk, groups that go are
// dropped (their files closed), limits are read again, and a group whose
// files cannot be parsed is left out of a Read and counted, without
// failing it.
func TestScannerChanges(t *testing.T) {
	root := v1Tree(t, map[string]string{"": "-1", "/a": "20000", "/b": "30000", "/c": "-1"})
	r, err := OpenRoot(root)
	if err != nil {
		t.Fatal(err)
	}
	s := NewScanner(r, ScanOptions{})
	defer s.Close()
	paths := func() []string {
		var out []string
		for _, g := range s.Read(nil) {
			out = append(out, fmt.Sprintf("%s:%v", g.Group.Path, g.Limits.Quota))
		}
		return out
	}
	before := keptFiles.Load()
	if err := s.Rescan(); err != nil {
		t.Fatal(err)
	}
	if got, want := paths(), []string{"/a:20ms", "/b:30ms"}; !slices.Equal(got, want) {
		t.Fatalf("groups %q, want %q", got, want)
	}
	if n := keptFiles.Load() - before; n != 4 {
		t.Errorf("%d files kept open for 2 v1 groups, want 4", n)
	}
	_, gen := s.Targets(nil)

	// /c gets a quota, /a loses it, /b's changes, /d appears.
	writeFile(t, filepath.Join(root, "cpu", "c", "cpu.cfs_quota_us"), "40000\n")
	writeFile(t, filepath.Join(root, "cpu", "a", "cpu.cfs_quota_us"), "-1\n")
	writeFile(t, filepath.Join(root, "cpu", "b", "cpu.cfs_quota_us"), "50000\n")
	for _, f := range []string{"cpu/d/cpu.cfs_quota_us:10000", "cpu/d/cpu.cfs_period_us:100000", "cpu/d/cpu.stat:nr_periods 1", "cpuacct/d/cpuacct.usage:5"} {
		p, data, _ := strings.Cut(f, ":")
		writeFile(t, filepath.Join(root, p), data+"\n")
	}
	// Nothing changes until the next walk but the counters.
	if got, want := paths(), []string{"/a:20ms", "/b:30ms"}; !slices.Equal(got, want) {
		t.Fatalf("before the walk: groups %q, want %q", got, want)
	}
	if err := s.Rescan(); err != nil {
		t.Fatal(err)
	}
	if got, want := paths(), []string{"/b:50ms", "/c:40ms", "/d:10ms"}; !slices.Equal(got, want) {
		t.Fatalf("after the walk: groups %q, want %q", got, want)
	}
	if _, g := s.Targets(nil); g == gen {
		t.Error("generation did not change")
	}
	if n := keptFiles.Load() - before; n != 6 {
		t.Errorf("%d files kept open for 3 v1 groups, want 6", n)
	}

	// An unparsable cpu.stat: /c is left out and counted, each time.
	writeFile(t, filepath.Join(root, "cpu", "c", "cpu.stat"), "nr_periods lots\n")
	for i := 1; i <= 2; i++ {
		if got, want := paths(), []string{"/b:50ms", "/d:10ms"}; !slices.Equal(got, want) {
			t.Fatalf("with a broken cpu.stat: groups %q, want %q", got, want)
		}
		if got := s.Errors().Counts(); got["cpu.stat"] != uint64(i) || len(got) != 1 {
			t.Errorf("errors %v, want cpu.stat: %d", got, i)
		}
	}
	// An unparsable quota: counted at the walk.
	writeFile(t, filepath.Join(root, "cpu", "d", "cpu.cfs_quota_us"), "lots\n")
	if err := s.Rescan(); err != nil {
		t.Fatal(err)
	}
	if got := s.Errors().Counts(); got["cpu.cfs_quota_us"] != 1 {
		t.Errorf("errors %v, want cpu.cfs_quota_us: 1", got)
	}

	// The root goes: the walk fails, the groups stay, Ready says why.
	if err := os.RemoveAll(root); err != nil {
		t.Fatal(err)
	}
	if err := s.Rescan(); err == nil || s.Ready() == nil {
		t.Errorf("Rescan of a removed root: %v, Ready %v; want errors", err, s.Ready())
	}
	s.Close()
	if n := keptFiles.Load() - before; n != 0 {
		t.Errorf("%d files still open after Close", n)
	}
}

// A group made in the cpu hierarchy alone (cpuacct mounted apart) is
// followed like any other: its throttling read from cpu.stat, its usage
// unknown, one file kept open. When its cpuacct directory appears, the
// next walk reads it afresh with its usage, and when that goes again,
// without it.
func TestScannerCPUOnlyGroup(t *testing.T) {
	root := v1Tree(t, map[string]string{"": "-1", "/both": "20000", "/cpu-only": "30000"})
	acct := filepath.Join(root, "cpuacct", "cpu-only")
	if err := os.RemoveAll(acct); err != nil {
		t.Fatal(err)
	}
	r, err := OpenRoot(root)
	if err != nil {
		t.Fatal(err)
	}
	s := NewScanner(r, ScanOptions{})
	defer s.Close()
	type seen struct {
		path    string
		unknown UsageUnknown
		stat    cgroup.Stat
	}
	read := func() []seen {
		var out []seen
		for _, g := range s.Read(nil) {
			out = append(out, seen{g.Group.Path, g.Group.UsageUnknown(), g.Stat})
		}
		return out
	}
	thr := cgroup.Stat{NrPeriods: 3, NrThrottled: 2, ThrottledNs: 1000}
	withUsage := thr
	withUsage.UsageNs = 12345
	before := keptFiles.Load()
	if err := s.Rescan(); err != nil {
		t.Fatal(err)
	}
	want := []seen{{"/both", "", withUsage}, {"/cpu-only", UsageNoCpuacctGroup, thr}}
	if got := read(); !slices.Equal(got, want) {
		t.Fatalf("read %+v\nwant %+v", got, want)
	}
	if n := keptFiles.Load() - before; n != 3 {
		t.Errorf("%d files kept open, want 3 (cpu.stat and cpuacct.usage; cpu.stat alone)", n)
	}
	if n := len(s.Errors().Counts()); n != 0 {
		t.Errorf("read errors %v, want none", s.Errors().Counts())
	}

	// cgcreate -g cpuacct:/cpu-only: read with its usage from the next walk.
	writeFile(t, filepath.Join(acct, "cpuacct.usage"), "777\n")
	if got := read(); !slices.Equal(got, want) {
		t.Fatalf("before the walk: read %+v\nwant %+v", got, want)
	}
	_, gen := s.Targets(nil)
	if err := s.Rescan(); err != nil {
		t.Fatal(err)
	}
	if _, g := s.Targets(nil); g == gen {
		t.Error("generation did not change")
	}
	both := thr
	both.UsageNs = 777
	if got, want := read(), []seen{{"/both", "", withUsage}, {"/cpu-only", "", both}}; !slices.Equal(got, want) {
		t.Fatalf("after the walk: read %+v\nwant %+v", got, want)
	}
	if n := keptFiles.Load() - before; n != 4 {
		t.Errorf("%d files kept open, want 4", n)
	}

	// Its cpuacct directory goes (the group stays): the next walk finds
	// it without usage and reads it afresh.
	if err := os.RemoveAll(acct); err != nil {
		t.Fatal(err)
	}
	if err := s.Rescan(); err != nil {
		t.Fatal(err)
	}
	if got := read(); !slices.Equal(got, want) {
		t.Fatalf("without cpuacct again: read %+v\nwant %+v", got, want)
	}
	if n := len(s.Errors().Counts()); n != 0 {
		t.Errorf("read errors %v, want none", s.Errors().Counts())
	}
	s.Close()
	if n := keptFiles.Load() - before; n != 0 {
		t.Errorf("%d files still open after Close", n)
	}
}

// The sampler does not follow a group whose usage is unknown (made in the
// cpu hierarchy alone): per-period usage and stalls need the usage
// counter. Such groups take no place from those it can follow.
func TestSamplerSkipsUnknownUsage(t *testing.T) {
	r, err := OpenRoot(filepath.Join("testdata", "cpu-only-v1-apart"))
	if err != nil {
		t.Fatal(err)
	}
	sc := NewScanner(r, ScanOptions{})
	defer sc.Close()
	if err := sc.Rescan(); err != nil {
		t.Fatal(err)
	}
	ts, _ := sc.Targets(nil)
	unknown := 0
	for _, tg := range ts {
		if tg.Group.UsageUnknown() != "" {
			unknown++
		}
	}
	if len(ts) != 4 || unknown != 3 {
		t.Fatalf("%d targets, %d of them without usage; want 4 and 3", len(ts), unknown)
	}
	s := NewSampler(SamplerOptions{MaxGroups: 1})
	defer s.close()
	s.Follow(ts)
	var paths []string
	for _, g := range s.Snapshot(nil) {
		paths = append(paths, g.Path)
	}
	if want := []string{"/system.slice/nginx.service"}; !slices.Equal(paths, want) {
		t.Errorf("the sampler follows %q, want %q", paths, want)
	}
}

// A snapshot of the sampler's histograms taken again into the last one
// (as a scrape does) allocates nothing, and is a copy: what the sampler
// counts next does not change it.
func TestSamplerSnapshotAllocs(t *testing.T) {
	r, err := OpenRoot(filepath.Join("testdata", "k8s-systemd-v1-containerd"))
	if err != nil {
		t.Fatal(err)
	}
	sc := NewScanner(r, ScanOptions{})
	if err := sc.Rescan(); err != nil {
		t.Fatal(err)
	}
	defer sc.Close()
	ts, _ := sc.Targets(nil)
	s := NewSampler(SamplerOptions{MaxGroups: len(ts), DemandBuckets: []float64{0.5, 1, 2}})
	defer s.close()
	s.Follow(ts)
	snap := s.Snapshot(nil)
	if len(snap) == 0 {
		t.Fatal("the sampler follows no group of the fixture")
	}
	if allocs := testing.AllocsPerRun(20, func() { snap = s.Snapshot(snap[:0]) }); allocs != 0 {
		t.Errorf("Snapshot into the last one allocates %.0f times, want 0", allocs)
	}
	s.mu.Lock()
	s.groups[0].hist.Demand.Observe(0.5)
	s.mu.Unlock()
	if snap[0].Demand.Count != 0 || slices.ContainsFunc(snap[0].Demand.Counts, func(n uint64) bool { return n != 0 }) {
		t.Errorf("the snapshot changed with the sampler's histograms: %+v", snap[0].Demand)
	}
}

// Reading every group at a scrape allocates nothing but the readings.
func TestScannerReadAllocs(t *testing.T) {
	for _, name := range []string{"k8s-systemd-v1-containerd", "k8s-systemd-v2-containerd"} {
		r, err := OpenRoot(filepath.Join("testdata", name))
		if err != nil {
			t.Fatal(err)
		}
		s := NewScanner(r, ScanOptions{})
		if err := s.Rescan(); err != nil {
			t.Fatal(err)
		}
		buf := s.Read(nil)
		if allocs := testing.AllocsPerRun(20, func() { buf = s.Read(buf[:0]) }); allocs != 0 {
			t.Errorf("%s: Read allocates %.0f times, want 0", name, allocs)
		}
		s.Close()
	}
}

// parseStat reads what cgroup.ReadStat reads.
func FuzzParseStat(f *testing.F) {
	for _, s := range []string{
		"nr_periods 4567\nnr_throttled 123\nthrottled_time 45678000\nnr_bursts 0\nburst_time 0\n",
		"usage_usec 1234567\nuser_usec 1000000\nsystem_usec 234567\nnr_periods 4567\nnr_throttled 123\nthrottled_usec 45678\n",
		"nr_periods -5\n", "nr_periods 99999999999999999999\n", "nr_periods x\n", "a b c\n", "\n\n", "usage_usec\t7\r\n", "nr_periods\u00a05\n",
		"throttled_usec 9223372036854775807\n", "nr_periods +3\n",
	} {
		f.Add(s, "1234\n", 1)
		f.Add(s, " 99 ", 2)
	}
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, stat, usage string, version int) {
		if len(stat) >= statBufSize || version < 1 || version > 2 {
			return
		}
		if err := os.WriteFile(filepath.Join(dir, "cpu.stat"), []byte(stat), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "cpuacct.usage"), []byte(usage), 0o644); err != nil {
			t.Fatal(err)
		}
		want, wantErr := cgroup.ReadStat(dir, dir, version)
		if version == 1 && len(usage) >= statBufSize {
			return
		}
		c, err := openCounters(Group{CPUDir: dir, AcctDir: dir, Version: version})
		if err != nil {
			t.Fatal(err)
		}
		defer c.close()
		var buf [statBufSize]byte
		got, _, err := c.read(buf[:])
		if (err != nil) != (wantErr != nil) || got != want {
			t.Errorf("cpu.stat %q, usage %q, v%d: got %+v, %v; cgroup.ReadStat: %+v, %v", stat, usage, version, got, err, want, wantErr)
		}
	})
}

func TestFileOf(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want string
	}{
		{&fs.PathError{Op: "open", Path: "/x/cpu.max.burst", Err: fs.ErrPermission}, "cpu.max.burst"},
		{&fs.PathError{Op: "read", Path: "/x/cpu.max", Err: fs.ErrPermission}, "cpu.max"},
		{&fs.PathError{Op: "open", Path: "/x/kubepods.slice", Err: fs.ErrPermission}, "directory"},
		{&fs.PathError{Op: "readdirent", Path: "/x/cpu.stat.d", Err: fs.ErrPermission}, "directory"},
		{fmt.Errorf("parse /x/cpu.cfs_quota_us: %w", errors.New("invalid syntax")), "cpu.cfs_quota_us"},
		{fmt.Errorf("parse /x: cpu.cfs_period_us \"\": %w", errors.New("invalid syntax")), "cpu.cfs_period_us"},
		{errors.New("something"), "other"},
	} {
		if got := fileOf(tc.err); got != tc.want {
			t.Errorf("fileOf(%v) = %q, want %q", tc.err, got, tc.want)
		}
	}
}

// On this machine's cgroups: a group removed after a walk is dropped by
// the next Read, which neither fails nor counts an error; its files are
// closed.
func TestScannerRealGroupGone(t *testing.T) {
	testenv.NeedCgroups(t)
	r, err := OpenRoot(hostfs.Default().CgroupDir())
	if err != nil {
		t.Fatal(err)
	}
	name := fmt.Sprintf("cfsprobe-scan-%d", os.Getpid())
	dirs := []string{filepath.Join(r.CPUDir, name)}
	if r.AcctDir != r.CPUDir {
		dirs = append(dirs, filepath.Join(r.AcctDir, name))
	}
	t.Cleanup(func() {
		for _, d := range dirs {
			rmdir(t, d)
		}
	})
	for _, d := range dirs {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if r.Version == 2 {
		enableCPU(t, r.CPUDir)
		if err := cgroup.WriteFile(filepath.Join(dirs[0], "cpu.max"), "20000 100000"); err != nil {
			t.Fatal(err)
		}
	} else if err := cgroup.WriteFile(filepath.Join(dirs[0], "cpu.cfs_quota_us"), "20000"); err != nil {
		t.Fatal(err)
	}
	s := NewScanner(r, ScanOptions{})
	defer s.Close()
	if err := s.Rescan(); err != nil {
		t.Fatal(err)
	}
	ours := func() int {
		n := 0
		for _, g := range s.Read(nil) {
			if g.Group.Path == "/"+name {
				n++
				if g.Limits.Quota != 20*ms || !g.Burst {
					t.Errorf("limits %+v, burst %v", g.Limits, g.Burst)
				}
			}
		}
		return n
	}
	if n := ours(); n != 1 {
		t.Fatalf("group read %d times, want once", n)
	}
	for _, d := range dirs {
		rmdir(t, d)
	}
	if n := ours(); n != 0 {
		t.Errorf("removed group still read")
	}
	if errs := s.Errors().Counts(); len(errs) != 0 {
		t.Errorf("errors counted for a removed group: %v", errs)
	}
	start := time.Now()
	if err := s.Rescan(); err != nil {
		t.Fatal(err)
	}
	t.Logf("walk of %s: %d groups (%d limited) in %v", r.CPUDir, s.Walked(), s.Len(), time.Since(start))
	_ = strconv.Itoa
}
