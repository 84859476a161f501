// Package top is cfsprobe top: a live view of the machine's cgroups with a
// CPU limit, one row per group, refreshed every interval, showing how much
// of its limit each group uses and how much it is throttled.
//
// The package has three parts. The model (Model) turns successive readings
// of each group's counters into rates over the last interval; it is pure
// and is fed by a Source (TreeSource reads a cgroup tree through the
// monitor package; tests hand in fakes). The renderer (Frame, WriteTable,
// WriteJSON) lays rows out for a terminal of a given size. The live loop
// (Live) ties a Source, the model and a Screen (Terminal, or a fake)
// together with the keys.
//
// Figures per row, over the last interval (between the two latest
// readings of the group):
//
//   - usage: CPU time used / wall time, in CPUs; unknown for a group
//     whose usage cannot be read (monitor.UsageUnknown: made in a cgroup
//     v1 cpu hierarchy alone), whose throttling is shown all the same;
//   - throttled: nr_throttled / nr_periods increase, the share of the
//     enforcement periods in which the group was throttled (0 when no
//     period elapsed: an idle group);
//   - throttled s/s: throttled time / wall time, the kernel's throttled
//     time, which is summed over the CPUs whose run queues were stopped, so
//     a group stopped on two CPUs at once counts twice and the figure can
//     exceed 1;
//   - worst stall: the longest stall of one period since top began
//     following the group: the wall time the group stood still in a
//     throttled period (trace.Period.StallNs, docs/trace.md), measured per
//     period by the same sampler as the exporter's (monitor.Sampler); four
//     threads stopped for 75 ms on four CPUs stalled 75 ms. Null until the
//     sampler has seen a period closely (it learns the group's period
//     boundaries first, a second or two); 0 when never throttled since;
//   - bursts: the increase of nr_bursts and of the burst time (CPU time
//     taken beyond the quota from the burst allowance).
package top

import (
	"cmp"
	"slices"
	"strings"
	"time"

	"github.com/cfsprobe/cfsprobe/internal/cgroup"
	"github.com/cfsprobe/cfsprobe/internal/monitor"
	"github.com/cfsprobe/cfsprobe/internal/trace"
)

// Reading is one group's limits and counters at one moment.
type Reading struct {
	Path   string           // relative to the hierarchy's root; the group's key
	ID     monitor.Identity // what the path says the group is
	Names  trace.Names      // what its container runtime calls it (empty when unknown)
	Limits cgroup.Limits
	Stat   cgroup.Stat
	// UsageUnknown says why Stat.UsageNs is not the group's usage (it
	// cannot be read); "" when it is.
	UsageUnknown monitor.UsageUnknown
	At           time.Time // when Stat was read (with a monotonic clock reading)
	// MaxStallNs is the longest stall of a period of the group that the
	// per-period sampler measured (trace.Period.StallNs) since it began
	// following the group; nil when it measured none yet.
	MaxStallNs *int64
}

// Snapshot is one pass over the groups.
type Snapshot struct {
	Readings []Reading // the groups to show
	Total    int       // groups in the tree, with a limit or without
	Skipped  int       // groups that could not be read (not counting vanished ones)
	At       time.Time // when the pass ended
}

// Source reads the groups that top shows. TreeSource reads a cgroup tree;
// tests hand in fakes.
type Source interface {
	Read() (Snapshot, error)
}

// Interval is the increase of a group's counters between its two latest
// readings. The field names are those of a trace's summary.
type Interval struct {
	WallNs      int64  `json:"wall_ns"`
	UsageNs     *int64 `json:"usage_ns"` // nil when the usage is unknown (Row.UsageUnknown)
	NrPeriods   int64  `json:"nr_periods"`
	NrThrottled int64  `json:"nr_throttled"`
	ThrottledNs int64  `json:"throttled_ns"`
	NrBursts    int64  `json:"nr_bursts"`
	BurstNs     int64  `json:"burst_ns"`
}

// Row is one group as top shows it, and as --once --json prints it. The
// figures are null until the group has been read twice.
type Row struct {
	Cgroup      string          `json:"cgroup"` // the group's path, as /proc/PID/cgroup shows it
	Kind        monitor.Kind    `json:"kind"`
	Name        string          `json:"name"`
	PodUID      string          `json:"pod_uid"`
	QoS         monitor.QoS     `json:"qos"`
	ContainerID string          `json:"container_id"`
	Runtime     monitor.Runtime `json:"runtime"`
	Unit        string          `json:"unit"`
	// Names are the container runtime's names of the group's container
	// or pod (container_name, image, pod_namespace, pod_name; absent
	// when unknown); Name is then made of them (trace.Names.Label).
	trace.Names
	Limits trace.Limits `json:"limits"`
	// UsageUnknown says why the group's usage cannot be read (and
	// UsageCPUs and Interval.UsageNs are null); absent when it can.
	UsageUnknown *UsageUnknown `json:"usage_unknown,omitempty"`
	// Interval is the counters' increase over the last interval.
	Interval *Interval `json:"interval"`
	// UsageCPUs is usage / wall time over the interval.
	UsageCPUs *float64 `json:"usage_cpus"`
	// ThrottledRatio is nr_throttled / nr_periods over the interval (0
	// when no period elapsed).
	ThrottledRatio *float64 `json:"throttled_ratio"`
	// ThrottledPerSecond is throttled time / wall time over the interval
	// (seconds per second, summed over CPUs).
	ThrottledPerSecond *float64 `json:"throttled_seconds_per_second"`
	// WorstStallNs is the longest stall of one period measured since top
	// began following the group (see the package documentation); null
	// until a period has been measured, 0 when none was throttled.
	WorstStallNs *int64 `json:"worst_stall_ns"`
}

// UsageUnknown is why a group's usage cannot be read: the reason
// (monitor.UsageUnknown) and a sentence saying it.
type UsageUnknown struct {
	Reason monitor.UsageUnknown `json:"reason"`
	Detail string               `json:"detail"`
}

// Ready reports whether the row has figures (two readings exist).
func (r *Row) Ready() bool { return r.Interval != nil }

// HasUsage reports whether the row has a usage figure: it is ready and
// the group's usage can be read.
func (r *Row) HasUsage() bool { return r.Ready() && r.UsageCPUs != nil }

// group is what the model keeps of a group between readings.
type group struct {
	last Reading
	row  Row
}

// Model holds the groups seen in the last snapshot and their figures.
type Model struct {
	groups  map[string]*group
	total   int
	skipped int
	at      time.Time
}

// NewModel returns an empty model.
func NewModel() *Model { return &Model{groups: map[string]*group{}} }

// Update takes a new snapshot: groups read before get figures over the
// time since their previous reading, new groups get a row without figures,
// groups absent from the snapshot are dropped. A group whose counters went
// backwards was removed and made again under the same path between the
// readings: it starts afresh, as a new group.
func (m *Model) Update(s Snapshot) {
	seen := make(map[string]bool, len(s.Readings))
	for _, r := range s.Readings {
		seen[r.Path] = true
		g, ok := m.groups[r.Path]
		if !ok || !advance(g, r) {
			g = &group{last: r}
			g.row = baseRow(r)
			m.groups[r.Path] = g
		}
	}
	for p := range m.groups {
		if !seen[p] {
			delete(m.groups, p)
		}
	}
	m.total, m.skipped, m.at = s.Total, s.Skipped, s.At
}

// advance updates g with its next reading r; false when the counters went
// backwards, the clock did not move, or the usage became known or unknown
// (then g is to be replaced).
func advance(g *group, r Reading) bool {
	d := r.Stat.Sub(g.last.Stat)
	wall := r.At.Sub(g.last.At)
	if wall <= 0 || r.UsageUnknown != g.last.UsageUnknown || d.UsageNs < 0 || d.NrPeriods < 0 || d.NrThrottled < 0 || d.ThrottledNs < 0 || d.NrBursts < 0 || d.BurstNs < 0 {
		return false
	}
	row := baseRow(r)
	iv := Interval{
		WallNs: int64(wall), NrPeriods: d.NrPeriods, NrThrottled: d.NrThrottled,
		ThrottledNs: d.ThrottledNs, NrBursts: d.NrBursts, BurstNs: d.BurstNs,
	}
	var usage *float64
	if r.UsageUnknown == "" {
		u := float64(d.UsageNs) / float64(wall)
		iv.UsageNs, usage = &d.UsageNs, &u
	}
	ratio := 0.0
	if d.NrPeriods > 0 {
		ratio = min(float64(d.NrThrottled)/float64(d.NrPeriods), 1)
	}
	perSec := float64(d.ThrottledNs) / float64(wall)
	row.Interval, row.UsageCPUs, row.ThrottledRatio, row.ThrottledPerSecond, row.WorstStallNs = &iv, usage, &ratio, &perSec, r.MaxStallNs
	g.row, g.last = row, r
	return true
}

// baseRow is the row of a reading without figures.
func baseRow(r Reading) Row {
	row := Row{
		Cgroup: r.Path, Kind: r.ID.Kind, Name: r.Names.Label(r.ID.Name), PodUID: r.ID.PodUID, QoS: r.ID.QoS,
		ContainerID: r.ID.ContainerID, Runtime: r.ID.Runtime, Unit: r.ID.Unit, Names: r.Names,
		Limits: trace.LimitsOf(r.Limits),
	}
	if r.UsageUnknown != "" {
		row.UsageUnknown = &UsageUnknown{Reason: r.UsageUnknown, Detail: r.UsageUnknown.Explain()}
	}
	return row
}

// Len is the number of groups in the model.
func (m *Model) Len() int { return len(m.groups) }

// Total is the number of groups in the tree at the last snapshot.
func (m *Model) Total() int { return m.total }

// Skipped is the number of groups the last snapshot could not read.
func (m *Model) Skipped() int { return m.skipped }

// At is when the last snapshot was taken.
func (m *Model) At() time.Time { return m.at }

// Rows returns the rows sorted by key (reversed when reverse is set).
func (m *Model) Rows(key SortKey, reverse bool) []Row {
	rows := make([]Row, 0, len(m.groups))
	for _, g := range m.groups {
		rows = append(rows, g.row)
	}
	Sort(rows, key, reverse)
	return rows
}

// SortKey is the column rows are sorted by.
type SortKey string

const (
	SortThrottled SortKey = "throttled" // throttled share of periods, then throttled time, largest first
	SortUsage     SortKey = "usage"     // CPUs used, largest first
	SortStall     SortKey = "stall"     // worst stall, longest first
	SortName      SortKey = "name"      // name, A to Z
	SortLimit     SortKey = "limit"     // limit in CPUs, largest first
)

// SortKeys lists the sort keys in the order --help shows them.
var SortKeys = []SortKey{SortThrottled, SortUsage, SortStall, SortName, SortLimit}

// ParseSortKey returns the key named s.
func ParseSortKey(s string) (SortKey, bool) {
	k := SortKey(strings.ToLower(strings.TrimSpace(s)))
	return k, slices.Contains(SortKeys, k)
}

// Describe names the order for the footer: "throttled", "name (reversed)".
func (k SortKey) Describe(reverse bool) string {
	if reverse {
		return string(k) + ", reversed"
	}
	return string(k)
}

// Sort sorts rows by key: numbers largest first, names A to Z, reverse
// turning either round. Rows without the figure (read once so far; no
// limit, for SortLimit; usage unknown, for SortUsage) go last whichever the direction. Ties are broken by
// name and path, so that rows do not swap places between refreshes.
func Sort(rows []Row, key SortKey, reverse bool) {
	slices.SortStableFunc(rows, func(a, b Row) int {
		if c := compareKey(&a, &b, key, reverse); c != 0 {
			return c
		}
		if c := strings.Compare(a.Name, b.Name); c != 0 {
			return c
		}
		return strings.Compare(a.Cgroup, b.Cgroup)
	})
}

func compareKey(a, b *Row, key SortKey, reverse bool) int {
	if key == SortName {
		c := strings.Compare(a.Name, b.Name)
		if reverse {
			c = -c
		}
		return c
	}
	var va, vb []float64 // nil: no figure
	pick := func(r *Row) []float64 {
		switch key {
		case SortLimit:
			if r.Limits.CPUs == nil {
				return nil
			}
			return []float64{*r.Limits.CPUs}
		}
		if !r.Ready() {
			return nil
		}
		switch key {
		case SortUsage:
			if !r.HasUsage() {
				return nil
			}
			return []float64{*r.UsageCPUs}
		case SortStall:
			if r.WorstStallNs == nil {
				return nil
			}
			return []float64{float64(*r.WorstStallNs)}
		default: // throttled
			return []float64{*r.ThrottledRatio, *r.ThrottledPerSecond}
		}
	}
	va, vb = pick(a), pick(b)
	switch {
	case va == nil && vb == nil:
		return 0
	case va == nil:
		return 1
	case vb == nil:
		return -1
	}
	c := slices.CompareFunc(va, vb, cmp.Compare[float64])
	if !reverse {
		c = -c // largest first
	}
	return c
}
