package top

import (
	"math"
	"slices"
	"testing"
	"time"

	"github.com/cfsprobe/cfsprobe/internal/cgroup"
	"github.com/cfsprobe/cfsprobe/internal/monitor"
)

const ms = int64(time.Millisecond)

var t0 = time.Date(2026, 11, 21, 14, 3, 22, 0, time.UTC)

// limited is a 0.2-CPU limit (20 ms per 100 ms).
var limited = cgroup.Limits{Quota: 20 * time.Millisecond, Period: 100 * time.Millisecond}

var unlimited = cgroup.Limits{Period: 100 * time.Millisecond}

func reading(path string, l cgroup.Limits, at time.Duration, s cgroup.Stat) Reading {
	return Reading{Path: path, ID: monitor.Identify(path), Limits: l, Stat: s, At: t0.Add(at)}
}

func snap(at time.Duration, rs ...Reading) Snapshot {
	return Snapshot{Readings: rs, Total: len(rs) + 10, At: t0.Add(at)}
}

func rowOf(t *testing.T, m *Model, path string) Row {
	t.Helper()
	for _, r := range m.Rows(SortName, false) {
		if r.Cgroup == path {
			return r
		}
	}
	t.Fatalf("no row %s", path)
	return Row{}
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

func TestModelRatesOverTheInterval(t *testing.T) {
	m := NewModel()
	s0 := cgroup.Stat{UsageNs: 5_000 * ms, NrPeriods: 1000, NrThrottled: 400, ThrottledNs: 30_000 * ms, NrBursts: 7, BurstNs: 70 * ms}
	m.Update(snap(0, reading("/a", limited, 0, s0)))
	r := rowOf(t, m, "/a")
	if r.Ready() || r.UsageCPUs != nil || r.ThrottledRatio != nil || r.WorstStallNs != nil {
		t.Fatalf("after one reading the row has figures: %+v", r)
	}
	if r.Limits.CPUs == nil || !near(*r.Limits.CPUs, 0.2) || *r.Limits.QuotaUs != 20000 || r.Limits.PeriodUs != 100000 {
		t.Errorf("limits %+v, want 0.2 CPUs (20000us/100000us)", r.Limits)
	}

	// Two seconds later: 0.4 s of CPU, 20 periods of which 16 throttled,
	// 1.28 s throttled (80 ms each), 2 bursts of 5 ms.
	s1 := s0
	s1.UsageNs += 400 * ms
	s1.NrPeriods += 20
	s1.NrThrottled += 16
	s1.ThrottledNs += 1280 * ms
	s1.NrBursts += 2
	s1.BurstNs += 10 * ms
	m.Update(snap(2*time.Second, reading("/a", limited, 2*time.Second, s1)))
	r = rowOf(t, m, "/a")
	if !r.Ready() {
		t.Fatal("after two readings the row has no figures")
	}
	got := *r.Interval
	if got.UsageNs == nil || *got.UsageNs != 400*ms {
		t.Errorf("interval usage %v, want 400ms", got.UsageNs)
	}
	got.UsageNs = nil
	want := Interval{WallNs: 2e9, NrPeriods: 20, NrThrottled: 16, ThrottledNs: 1280 * ms, NrBursts: 2, BurstNs: 10 * ms}
	if got != want {
		t.Errorf("interval %+v, want %+v", got, want)
	}
	if !near(*r.UsageCPUs, 0.2) {
		t.Errorf("usage %v CPUs, want 0.2", *r.UsageCPUs)
	}
	if !near(*r.ThrottledRatio, 0.8) {
		t.Errorf("throttled ratio %v, want 0.8", *r.ThrottledRatio)
	}
	if !near(*r.ThrottledPerSecond, 0.64) {
		t.Errorf("throttled s/s %v, want 0.64", *r.ThrottledPerSecond)
	}
	if r.WorstStallNs != nil {
		t.Errorf("worst stall %v with no period measured, want null", time.Duration(*r.WorstStallNs))
	}
}

// The worst stall is the per-period sampler's measurement that comes with
// each reading (null until it has measured a period), not an estimate
// from the interval's counters; an idle interval has a throttled ratio of
// 0, not NaN.
func TestModelWorstStallIsMeasured(t *testing.T) {
	m := NewModel()
	var s cgroup.Stat
	step := func(at time.Duration, periods, throttled, throttledNs int64, stall *int64) Row {
		s.NrPeriods += periods
		s.NrThrottled += throttled
		s.ThrottledNs += throttledNs
		r := reading("/a", limited, at, s)
		r.MaxStallNs = stall
		m.Update(snap(at, r))
		return rowOf(t, m, "/a")
	}
	ns := func(d int64) *int64 { return &d }
	step(0, 0, 0, 0, nil)
	steps := []struct {
		periods, throttled, throttledNs int64
		stall                           *int64
		wantRatio                       float64
	}{
		{10, 5, 150 * ms, nil, 0.5},          // the sampler is still learning the grid
		{10, 2, 180 * ms, ns(45 * ms), 0.2},  // two CPUs stopped 45 ms: 90 ms summed, 45 ms stall
		{10, 10, 400 * ms, ns(45 * ms), 1},   // shorter stalls: the worst stays
		{0, 0, 0, ns(45 * ms), 0},            // idle: no period, ratio 0
		{10, 1, 250 * ms, ns(125 * ms), 0.1}, // a longer one
	}
	for i, st := range steps {
		r := step(time.Duration(i+1)*time.Second, st.periods, st.throttled, st.throttledNs, st.stall)
		if (r.WorstStallNs == nil) != (st.stall == nil) || r.WorstStallNs != nil && *r.WorstStallNs != *st.stall {
			t.Errorf("step %d: worst stall %v, want %v", i, r.WorstStallNs, st.stall)
		}
		if !near(*r.ThrottledRatio, st.wantRatio) || math.IsNaN(*r.ThrottledRatio) {
			t.Errorf("step %d: throttled ratio %v, want %v", i, *r.ThrottledRatio, st.wantRatio)
		}
	}
}

// New groups have no figures until their second reading; vanished groups
// drop; a group made again under the same path (its counters went back)
// starts afresh, worst stall included.
func TestModelNewVanishedAndRecreatedGroups(t *testing.T) {
	m := NewModel()
	busy := func(n int64) cgroup.Stat {
		return cgroup.Stat{UsageNs: n * 200 * ms, NrPeriods: n * 10, NrThrottled: n * 8, ThrottledNs: n * 640 * ms}
	}
	m.Update(snap(0, reading("/a", limited, 0, busy(1)), reading("/b", limited, 0, busy(1))))
	m.Update(snap(time.Second,
		reading("/a", limited, time.Second, busy(2)),
		reading("/c", limited, time.Second, busy(5)))) // /b gone, /c new
	if m.Len() != 2 {
		t.Fatalf("%d groups, want 2 (/a and /c)", m.Len())
	}
	var paths []string
	for _, r := range m.Rows(SortName, false) {
		paths = append(paths, r.Cgroup)
	}
	if !slices.Equal(paths, []string{"/a", "/c"}) {
		t.Errorf("rows %v, want [/a /c]", paths)
	}
	if a := rowOf(t, m, "/a"); !a.Ready() {
		t.Errorf("/a, read twice, has no figures")
	}
	if c := rowOf(t, m, "/c"); c.Ready() {
		t.Errorf("/c, read once, has figures: %+v", c)
	}
	if m.Total() != 12 {
		t.Errorf("total %d, want the snapshot's 12", m.Total())
	}

	// /c ready after its second reading; /a recreated: counters from 0.
	m.Update(snap(2*time.Second,
		reading("/a", limited, 2*time.Second, cgroup.Stat{UsageNs: 1 * ms, NrPeriods: 1}),
		reading("/c", limited, 2*time.Second, busy(6))))
	if c := rowOf(t, m, "/c"); !c.Ready() || !near(*c.UsageCPUs, 0.2) {
		t.Errorf("/c after its second reading: %+v", c)
	}
	if a := rowOf(t, m, "/a"); a.Ready() {
		t.Errorf("/a recreated (counters went back) keeps figures: %+v", a)
	}
	m.Update(snap(3*time.Second,
		reading("/a", limited, 3*time.Second, cgroup.Stat{UsageNs: 101 * ms, NrPeriods: 11}),
		reading("/c", limited, 3*time.Second, busy(7))))
	if a := rowOf(t, m, "/a"); !a.Ready() || a.WorstStallNs != nil || !near(*a.UsageCPUs, 0.1) {
		t.Errorf("/a after recreation and two readings: usage %v worst %v, want 0.1 CPUs and no stall (the old group's is not kept)",
			*a.UsageCPUs, a.WorstStallNs)
	}

	// Everything gone.
	m.Update(Snapshot{At: t0.Add(4 * time.Second)})
	if m.Len() != 0 || len(m.Rows(SortThrottled, false)) != 0 {
		t.Errorf("%d groups after an empty snapshot", m.Len())
	}
}

// A group whose usage cannot be read (made in a cgroup v1 cpu hierarchy
// alone) has its throttling figures, its usage null and why; when its
// usage becomes known it starts afresh, as its usage counter does.
func TestModelUsageUnknown(t *testing.T) {
	m := NewModel()
	at := func(d time.Duration, n int64, u monitor.UsageUnknown) Reading {
		r := reading("/batch", limited, d, cgroup.Stat{NrPeriods: n * 10, NrThrottled: n * 10, ThrottledNs: n * 800 * ms})
		r.UsageUnknown = u
		return r
	}
	m.Update(snap(0, at(0, 1, monitor.UsageNoCpuacctGroup)))
	r := rowOf(t, m, "/batch")
	if r.Ready() || r.UsageUnknown == nil || r.UsageUnknown.Reason != monitor.UsageNoCpuacctGroup || r.UsageUnknown.Detail != monitor.UsageNoCpuacctGroup.Explain() {
		t.Fatalf("after one reading: %+v", r)
	}
	m.Update(snap(time.Second, at(time.Second, 2, monitor.UsageNoCpuacctGroup)))
	r = rowOf(t, m, "/batch")
	if !r.Ready() || r.HasUsage() || r.UsageCPUs != nil || r.Interval.UsageNs != nil {
		t.Fatalf("usage unknown, yet: ready %v usage %v interval usage %v", r.Ready(), r.UsageCPUs, r.Interval.UsageNs)
	}
	if r.Interval.NrThrottled != 10 || !near(*r.ThrottledRatio, 1) || !near(*r.ThrottledPerSecond, 0.8) || r.WorstStallNs != nil || r.UsageUnknown == nil {
		t.Errorf("throttling figures of a group without usage: %+v %+v", r, *r.Interval)
	}
	// cgcreate -g cpuacct:/batch: its usage counter starts now.
	known := at(2*time.Second, 3, "")
	known.Stat.UsageNs = 5 * ms
	m.Update(snap(2*time.Second, known))
	if r = rowOf(t, m, "/batch"); r.Ready() || r.UsageUnknown != nil {
		t.Errorf("usage became known: the row keeps figures or the reason: %+v", r)
	}
	known = at(3*time.Second, 4, "")
	known.Stat.UsageNs = 205 * ms
	m.Update(snap(3*time.Second, known))
	if r = rowOf(t, m, "/batch"); !r.HasUsage() || !near(*r.UsageCPUs, 0.2) || *r.Interval.UsageNs != 200*ms {
		t.Errorf("with its usage: %+v", r)
	}
}

// Each group's rates use its own reading times: with many groups a pass
// takes a while, and a group read late in one pass and early in the next
// has a shorter interval.
func TestModelUsesEachReadingsTime(t *testing.T) {
	m := NewModel()
	m.Update(snap(0, reading("/a", limited, 0, cgroup.Stat{})))
	m.Update(snap(time.Second, reading("/a", limited, 500*time.Millisecond, cgroup.Stat{UsageNs: 100 * ms})))
	if r := rowOf(t, m, "/a"); !near(*r.UsageCPUs, 0.2) || r.Interval.WallNs != 500*ms {
		t.Errorf("usage %v over %v, want 0.2 over 500ms", *r.UsageCPUs, time.Duration(r.Interval.WallNs))
	}
	// A reading that does not advance the clock cannot give rates.
	m.Update(snap(time.Second, reading("/a", limited, 500*time.Millisecond, cgroup.Stat{UsageNs: 200 * ms})))
	if r := rowOf(t, m, "/a"); r.Ready() {
		t.Errorf("zero wall time gave figures: %+v", r)
	}
}

// sortRows builds ready rows from (name, usage, ratio, perSec, stall,
// limit) and returns the names in the order of key.
type fig struct {
	name                 string
	usage, ratio, perSec float64
	stall                int64
	limit                float64 // 0: none
	ready                bool
	unknown              bool // usage unknown
}

func (f fig) row() Row {
	r := Row{Cgroup: "/" + f.name, Name: f.name}
	if f.limit > 0 {
		l := f.limit
		r.Limits.CPUs = &l
	}
	if f.ready {
		u, ra, p, s := f.usage, f.ratio, f.perSec, f.stall
		r.Interval = &Interval{}
		r.UsageCPUs, r.ThrottledRatio, r.ThrottledPerSecond, r.WorstStallNs = &u, &ra, &p, &s
	}
	if f.unknown {
		r.UsageCPUs, r.UsageUnknown = nil, &UsageUnknown{Reason: monitor.UsageNoCpuacctGroup}
	}
	return r
}

func TestSort(t *testing.T) {
	figs := []fig{
		{name: "b", usage: 0.5, ratio: 0.5, perSec: 0.1, stall: 10 * ms, limit: 1, ready: true},
		{name: "a", usage: 0.9, ratio: 0.5, perSec: 0.3, stall: 50 * ms, limit: 0.5, ready: true},
		{name: "new", limit: 4},                 // read once: no figures
		{name: "free", usage: 1.5, ready: true}, // no limit
		{name: "c", usage: 0.1, ratio: 0.9, perSec: 0.05, stall: 50 * ms, limit: 0.25, ready: true},
		{name: "d", usage: 0.1, ratio: 0, perSec: 0, stall: 0, limit: 2, ready: true},
		{name: "cpu-only", ratio: 1, perSec: 0.8, stall: 80 * ms, limit: 0.2, ready: true, unknown: true}, // usage unknown
	}
	cases := []struct {
		key     SortKey
		reverse bool
		want    []string
	}{
		// Ratio, then throttled time; ties by name.
		{SortThrottled, false, []string{"cpu-only", "c", "a", "b", "d", "free", "new"}},
		{SortThrottled, true, []string{"d", "free", "b", "a", "c", "cpu-only", "new"}},
		// Usage unknown: last either way, with the rows read once.
		{SortUsage, false, []string{"free", "a", "b", "c", "d", "cpu-only", "new"}},
		{SortUsage, true, []string{"c", "d", "b", "a", "free", "cpu-only", "new"}},
		{SortStall, false, []string{"cpu-only", "a", "c", "b", "d", "free", "new"}},
		{SortName, false, []string{"a", "b", "c", "cpu-only", "d", "free", "new"}},
		{SortName, true, []string{"new", "free", "d", "cpu-only", "c", "b", "a"}},
		// Without a limit: last either way.
		{SortLimit, false, []string{"new", "d", "b", "a", "c", "cpu-only", "free"}},
		{SortLimit, true, []string{"cpu-only", "c", "a", "b", "d", "new", "free"}},
	}
	for _, tc := range cases {
		rows := make([]Row, len(figs))
		for i, f := range figs {
			rows[i] = f.row()
		}
		Sort(rows, tc.key, tc.reverse)
		var got []string
		for _, r := range rows {
			got = append(got, r.Name)
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("sort %s reverse=%v: %v, want %v", tc.key, tc.reverse, got, tc.want)
		}
	}
}

// Groups with the same name (two systemd units of one name in different
// slices) keep a stable order: by path.
func TestSortTiesByPath(t *testing.T) {
	rows := []Row{{Cgroup: "/z/x.service", Name: "x.service"}, {Cgroup: "/a/x.service", Name: "x.service"}}
	Sort(rows, SortThrottled, false)
	if rows[0].Cgroup != "/a/x.service" {
		t.Errorf("order %s, %s: want /a first", rows[0].Cgroup, rows[1].Cgroup)
	}
}

func TestParseSortKey(t *testing.T) {
	for _, s := range []string{"throttled", "usage", "stall", "name", "limit", " Name "} {
		if _, ok := ParseSortKey(s); !ok {
			t.Errorf("ParseSortKey(%q) failed", s)
		}
	}
	for _, s := range []string{"", "cpu", "throttle"} {
		if k, ok := ParseSortKey(s); ok {
			t.Errorf("ParseSortKey(%q) = %q", s, k)
		}
	}
}
