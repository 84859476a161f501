package monitor

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/cfsprobe/cfsprobe/internal/cgroup"
	"github.com/cfsprobe/cfsprobe/internal/hostfs"
)

// Selector names one group, the ways a user knows it: its path (as
// /proc/PID/cgroup shows it, relative to the hierarchy's root), a process
// in it, or, as Identify names groups, a container ID (or a prefix of
// one) or a Kubernetes pod UID. Exactly one field is set.
type Selector struct {
	Path      string
	PID       int
	Container string
	Pod       string
}

// String is the selector as the user gave it, for messages.
func (s Selector) String() string {
	switch {
	case s.PID > 0:
		return "pid " + strconv.Itoa(s.PID)
	case s.Container != "":
		return "container " + s.Container
	case s.Pod != "":
		return "pod " + s.Pod
	}
	return "cgroup " + s.Path
}

// ErrNoGroup is returned by Find when nothing matches the selector.
var ErrNoGroup = errors.New("no such cgroup")

// Find returns the group sel names; a PID's group is read from fs's
// proc. A container or pod that matches several groups is an error that
// lists them.
func (r *Root) Find(sel Selector, fs hostfs.FS) (Group, error) {
	switch {
	case sel.PID > 0:
		p, err := r.pathOf(sel.PID, fs)
		if err != nil {
			return Group{}, err
		}
		return r.GroupAt(p)
	case sel.Container != "" || sel.Pod != "":
		d, err := r.Discover(Options{All: true})
		if err != nil {
			return Group{}, err
		}
		var found []Group
		for _, g := range d.Groups {
			if sel.Container != "" && g.ID.ContainerID != "" && strings.HasPrefix(g.ID.ContainerID, sel.Container) {
				found = append(found, g)
			}
			if sel.Pod != "" && g.ID.PodUID == sel.Pod && g.ID.ContainerID == "" && g.ID.Kind == KindKubernetes {
				found = append(found, g)
			}
		}
		if sel.Pod != "" && len(found) > 1 {
			// The pod's own group is the shallowest one of its UID.
			slices.SortFunc(found, func(a, b Group) int { return strings.Count(a.Path, "/") - strings.Count(b.Path, "/") })
			if strings.Count(found[0].Path, "/") < strings.Count(found[1].Path, "/") {
				found = found[:1]
			}
		}
		switch len(found) {
		case 0:
			return Group{}, fmt.Errorf("%w: no group of %s under %s (cfsprobe top --all lists the groups and their IDs)", ErrNoGroup, sel, r.CPUDir)
		case 1:
			return found[0], nil
		}
		paths := make([]string, len(found))
		for i, g := range found {
			paths[i] = g.Path
		}
		return Group{}, fmt.Errorf("%s matches %d groups (%s): give more of the ID, or the cgroup path", sel, len(found), strings.Join(paths, ", "))
	}
	return r.GroupAt(sel.Path)
}

// GroupAt is the group at path (relative to the hierarchy's root; "/"
// is the root), which must exist in the cpu hierarchy. As Discover, it
// leaves AcctDir "" when cpuacct is mounted apart and has no such group
// (Group.UsageUnknown).
func (r *Root) GroupAt(p string) (Group, error) {
	if !strings.HasPrefix(p, "/") {
		p = "/" + p
	}
	p = path.Clean(p)
	dir, acct := filepath.Join(r.CPUDir, p), filepath.Join(r.AcctDir, p)
	fi, err := os.Stat(dir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return Group{}, fmt.Errorf("%w: %s does not exist in the cpu hierarchy (%s): give the path as /proc/PID/cgroup shows it", ErrNoGroup, p, dir)
		}
		return Group{}, err
	}
	if !fi.IsDir() {
		return Group{}, fmt.Errorf("%w: %s is not a cgroup directory", ErrNoGroup, dir)
	}
	if r.AcctDir != r.CPUDir && !acctExists(acct) {
		acct = ""
	}
	return Group{Path: p, CPUDir: dir, AcctDir: acct, Version: r.Version, ID: Identify(p)}, nil
}

// pathOf is the path of pid's group in the hierarchy that has the cpu
// controller, from /proc/PID/cgroup.
func (r *Root) pathOf(pid int, host hostfs.FS) (string, error) {
	lines, err := cgroup.ReadProcCgroup(host, strconv.Itoa(pid))
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return "", fmt.Errorf("%w: no process %d (under %s)", ErrNoGroup, pid, host.Proc())
		}
		return "", err
	}
	for _, l := range lines {
		if r.Version == 2 && l.HierarchyID == 0 && len(l.Controllers) == 0 {
			return l.Path, nil
		}
		if r.Version == 1 && slices.Contains(l.Controllers, "cpu") {
			return l.Path, nil
		}
	}
	return "", fmt.Errorf("%w: %s names no group in the cgroup v%d hierarchy with the cpu controller", ErrNoGroup, host.Proc(strconv.Itoa(pid), "cgroup"), r.Version)
}
