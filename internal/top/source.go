package top

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/cfsprobe/cfsprobe/internal/cgroup"
	"github.com/cfsprobe/cfsprobe/internal/monitor"
	"github.com/cfsprobe/cfsprobe/internal/trace"
)

// tree is what TreeSource asks of a cgroup tree: *monitor.Root.
type tree interface {
	Discover(monitor.Options) (monitor.Discovery, error)
}

// namer tells the names a container runtime gives a group's container or
// pod (a *containers.Resolver), from memory.
type namer interface {
	Names(id monitor.Identity) (trace.Names, bool)
}

// TreeSource reads the groups of a cgroup tree: those with a CPU quota, or
// all of them, named by their runtimes when a namer is given. Beside the readings, a per-period sampler (the exporter's,
// monitor.Sampler) follows the limited groups once Run has started it, and
// each reading carries the longest stall it measured.
type TreeSource struct {
	tree    tree
	all     bool
	now     func() time.Time
	sampler *monitor.Sampler
	stalls  []monitor.GroupPeriods
	names   namer // nil: path identity only
}

// maxSampled is how many groups top's sampler follows at most.
const maxSampled = 1000

// NewTreeSource reads the tree of root; all: every group, not only those
// with a quota. cpus is the node's online CPU count. names names
// containers and pods (nil: by their paths only).
func NewTreeSource(root *monitor.Root, all bool, cpus int, names namer) *TreeSource {
	return &TreeSource{tree: root, all: all, now: time.Now, names: names, sampler: monitor.NewSampler(monitor.SamplerOptions{
		MaxGroups: maxSampled, CPUs: cpus, UsageBuckets: []float64{1}, StallBuckets: []float64{1},
	})}
}

// Run runs the per-period sampler until ctx is done.
func (s *TreeSource) Run(ctx context.Context) {
	if s.sampler != nil {
		s.sampler.Run(ctx)
	}
}

// Read walks the tree once and reads each group's limits and counters.
// The walk reads only each group's quota file to pick those with a quota
// (which costs less than reading the limits of every group) and counts
// every group it lists, limited or not, for the header's total. Groups
// that vanish meanwhile are left out; groups that cannot be read are
// counted in Skipped.
func (s *TreeSource) Read() (Snapshot, error) {
	d, err := s.tree.Discover(monitor.Options{All: s.all})
	if err != nil {
		return Snapshot{}, err
	}
	snap := Snapshot{Total: d.Walked, Skipped: len(d.Skipped), Readings: make([]Reading, 0, len(d.Groups))}
	stall := map[string]*int64{}
	if s.sampler != nil {
		s.stalls = s.sampler.Snapshot(s.stalls[:0])
		for i := range s.stalls {
			if gp := s.stalls[i]; gp.Stall.Count > 0 || gp.Usage.Count > 0 {
				v := gp.MaxStallNs
				stall[gp.Path] = &v
			}
		}
	}
	var targets []monitor.Target
	for _, g := range d.Groups {
		l, err := g.Limits()
		if err == nil && l.Unlimited() && !s.all {
			continue // its quota was removed since the walk
		}
		var st cgroup.Stat
		at := s.now()
		if err == nil {
			st, err = g.Stat()
		}
		if err != nil {
			if !monitor.IsGone(err) {
				snap.Skipped++
			}
			continue
		}
		var names trace.Names
		if s.names != nil {
			names, _ = s.names.Names(g.ID)
		}
		snap.Readings = append(snap.Readings, Reading{Path: g.Path, ID: g.ID, Names: names, Limits: l, Stat: st, UsageUnknown: g.UsageUnknown(), At: at, MaxStallNs: stall[g.Path]})
		if !l.Unlimited() {
			targets = append(targets, monitor.Target{Group: g, Limits: l})
		}
	}
	if s.sampler != nil {
		s.sampler.Follow(targets)
	}
	snap.At = s.now()
	return snap, nil
}

// hostLine is the host part of the header: "node1  Linux 6.1.0  cgroup v1  2 CPUs".
func hostLine(h trace.Host) string {
	var parts []string
	if h.Hostname != "" {
		parts = append(parts, h.Hostname)
	}
	if h.Kernel != "" {
		parts = append(parts, "Linux "+h.Kernel)
	}
	if h.CgroupMode != "" {
		mode := "cgroup " + h.CgroupMode
		if h.CgroupMode == string(cgroup.ModeHybrid) {
			mode += fmt.Sprintf(" (cpu v%d)", h.CPUController)
		}
		parts = append(parts, mode)
	}
	if h.CPUs > 0 {
		parts = append(parts, fmt.Sprintf("%d CPUs", h.CPUs))
	}
	return strings.Join(parts, "  ")
}
