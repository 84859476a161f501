package cgroup

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/cfsprobe/cfsprobe/internal/hostfs"
)

// Mode is how the cgroup hierarchies of a host are arranged.
type Mode string

const (
	ModeV1     Mode = "v1"     // only v1 hierarchies ("legacy")
	ModeHybrid Mode = "hybrid" // v1 controllers plus a cgroup2 mount (e.g. /sys/fs/cgroup/unified)
	ModeV2     Mode = "v2"     // only the unified hierarchy
	ModeNone   Mode = "none"   // no cgroup filesystem mounted
)

// Sentinel errors that callers act on.
var (
	ErrNoCPUController = errors.New("no cgroup hierarchy with the cpu controller is mounted")
	ErrNotRoot         = errors.New("not permitted to create cgroups")
	ErrNoBurst         = errors.New("this kernel has no CPU burst support (cpu.cfs_burst_us / cpu.max.burst)")
	errSyntax          = errors.New("invalid syntax")
)

// Hierarchy is one mounted cgroup hierarchy.
type Hierarchy struct {
	Version     int      // 1 or 2
	Dir         string   // where its root is on disk (the mount point under the hostfs.FS)
	Root        string   // the cgroup path mounted there ("/" on a host, "/kubepods/..." in a container)
	Controllers []string // v1: from the mount options; v2: from cgroup.controllers
}

// Has reports whether the hierarchy carries the controller.
func (h *Hierarchy) Has(controller string) bool {
	return h != nil && slices.Contains(h.Controllers, controller)
}

// DirOf maps a cgroup path as seen in /proc/<pid>/cgroup to a directory on
// disk, accounting for a mount whose root is not "/" (containers). It
// returns false when the path is not below the mounted root.
func (h *Hierarchy) DirOf(cgroupPath string) (string, bool) {
	root := strings.TrimSuffix(h.Root, "/")
	if root == "" {
		return filepath.Join(h.Dir, cgroupPath), true
	}
	if cgroupPath == root {
		return h.Dir, true
	}
	if strings.HasPrefix(cgroupPath, root+"/") {
		return filepath.Join(h.Dir, strings.TrimPrefix(cgroupPath, root)), true
	}
	return "", false
}

// Layout says where the controllers cfsprobe needs are mounted.
type Layout struct {
	Mode    Mode
	CPU     *Hierarchy // the hierarchy carrying the cpu controller
	CPUAcct *Hierarchy // v1: the one carrying cpuacct (may be CPU itself); v2: CPU
	CPUSet  *Hierarchy // nil when cpuset is not mounted (or not enabled on v2)
	Unified *Hierarchy // the cgroup2 mount, if any
}

// Hierarchies are the layout's mounted hierarchies, each directory once
// (cpu and cpuacct may be one): CPU, CPUAcct, CPUSet, Unified.
func (l *Layout) Hierarchies() []*Hierarchy {
	var out []*Hierarchy
	for _, h := range []*Hierarchy{l.CPU, l.CPUAcct, l.CPUSet, l.Unified} {
		if h != nil && !slices.ContainsFunc(out, func(o *Hierarchy) bool { return o.Dir == h.Dir }) {
			out = append(out, h)
		}
	}
	return out
}

// Detect finds the layout of the calling process from fs's
// proc/self/mountinfo, its mount points taken under fs (hostfs.Default()
// on the machine itself, a fixture tree in tests, the host's root in a
// container that mounts it elsewhere).
func Detect(fs hostfs.FS) (*Layout, error) {
	mounts, err := ReadMountinfo(fs, "self")
	if err != nil {
		return nil, err
	}
	return layoutFromMounts(mounts, fs)
}

// layoutFromMounts picks the hierarchies out of a mount table. For the
// cgroup2 mount it reads cgroup.controllers below fs to learn which
// controllers are enabled there.
func layoutFromMounts(mounts []Mount, fs hostfs.FS) (*Layout, error) {
	l := &Layout{Mode: ModeNone}
	haveV1 := false
	for _, m := range mounts {
		switch m.FSType {
		case "cgroup":
			var ctrls []string
			for _, o := range m.SuperOptions {
				switch o {
				case "cpu", "cpuacct", "cpuset", "memory", "pids", "blkio", "devices",
					"freezer", "net_cls", "net_prio", "perf_event", "hugetlb", "rdma", "misc":
					ctrls = append(ctrls, o)
				}
			}
			if len(ctrls) == 0 {
				continue // name=systemd and friends
			}
			haveV1 = true
			h := &Hierarchy{Version: 1, Dir: fs.Path(m.MountPoint), Root: m.Root, Controllers: ctrls}
			l.CPU = prefer(l.CPU, h, "cpu")
			l.CPUAcct = prefer(l.CPUAcct, h, "cpuacct")
			l.CPUSet = prefer(l.CPUSet, h, "cpuset")
		case "cgroup2":
			if l.Unified != nil && l.Unified.Root == "/" {
				continue
			}
			dir := fs.Path(m.MountPoint)
			h := &Hierarchy{Version: 2, Dir: dir, Root: m.Root}
			if b, err := os.ReadFile(filepath.Join(dir, "cgroup.controllers")); err == nil {
				h.Controllers = strings.Fields(string(b))
			}
			l.Unified = h
		}
	}
	switch {
	case haveV1 && l.Unified != nil:
		l.Mode = ModeHybrid
	case haveV1:
		l.Mode = ModeV1
	case l.Unified != nil:
		l.Mode = ModeV2
	}
	// The cpu controller is used through v1 when a v1 hierarchy has it;
	// otherwise through the unified hierarchy if it is enabled there.
	if l.CPU == nil && l.Unified.Has("cpu") {
		l.CPU, l.CPUAcct = l.Unified, l.Unified
	}
	if l.CPUSet == nil && l.Unified.Has("cpuset") && l.CPU == l.Unified {
		l.CPUSet = l.Unified
	}
	if l.CPU == nil {
		return l, fmt.Errorf("%w (mode %s)", ErrNoCPUController, l.Mode)
	}
	if l.CPUAcct == nil { // v1 without cpuacct: usage comes from nowhere
		return l, fmt.Errorf("the cpu controller is mounted but cpuacct is not: cfsprobe needs cpuacct for usage on cgroup v1")
	}
	return l, nil
}

// prefer keeps the current hierarchy for a controller unless it has none,
// preferring a mount of the hierarchy's root over a bind mount of a subtree.
func prefer(cur, h *Hierarchy, controller string) *Hierarchy {
	if !h.Has(controller) {
		return cur
	}
	if cur == nil || (cur.Root != "/" && h.Root == "/") {
		return h
	}
	return cur
}
