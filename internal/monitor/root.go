// Package monitor finds the cgroups of a machine that have a CPU limit,
// says what each one is (a Kubernetes container, a Docker container, a
// systemd service, ...) and reads their counters, for a scrape loop that
// runs every second over about a thousand groups.
//
// Discovery (walking the tree, see Root.Discover) is separate from reading
// (Group.Stat, Group.Limits), so a caller may rediscover less often than
// it reads. Nothing here logs or keeps state between calls.
package monitor

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"github.com/cfsprobe/cfsprobe/internal/cgroup"
	"github.com/cfsprobe/cfsprobe/internal/hostfs"
	"github.com/cfsprobe/cfsprobe/internal/trace"
)

// Root is a cgroup root directory with its layout worked out: where the
// cpu controller's hierarchy is and where usage (cpuacct) comes from.
type Root struct {
	Dir     string      // the directory OpenRoot was given
	Mode    cgroup.Mode // v1, hybrid or v2
	Version int         // the cgroup version through which cpu is used (1 or 2)
	CPUDir  string      // root of the hierarchy with the cpu controller
	AcctDir string      // root of the hierarchy with cpuacct; CPUDir when co-mounted and on v2
}

// v1CPUNames are the names under which a v1 cpu hierarchy is mounted:
// alone, or co-mounted with cpuacct in either order (systemd names it
// cpu,cpuacct; some hosts and container runtimes cpuacct,cpu).
var v1CPUNames = []string{"cpu", "cpu,cpuacct", "cpuacct,cpu"}

// v1AcctNames are the names under which a v1 cpuacct hierarchy is mounted.
var v1AcctNames = []string{"cpuacct", "cpuacct,cpu", "cpu,cpuacct"}

// OpenRoot works out the layout of the cgroup root dir (normally
// /sys/fs/cgroup; in a container that mounts the host's tree, e.g.
// /host/sys/fs/cgroup) from the directory alone, without mountinfo:
//
//   - v2 when dir/cgroup.controllers exists (and lists cpu);
//   - v1 when dir has a cpu hierarchy (cpu, cpu,cpuacct or cpuacct,cpu,
//     possibly symlinks) and cpuacct (in it or apart at dir/cpuacct);
//   - hybrid when, besides, dir/unified is a cgroup2 tree (cpu is then
//     used through v1, or through unified when no v1 hierarchy has it).
//
// When no hierarchy carries cpu the error wraps cgroup.ErrNoCPUController.
func OpenRoot(dir string) (*Root, error) {
	dir = filepath.Clean(dir)
	fi, err := os.Stat(dir)
	if err != nil {
		return nil, fmt.Errorf("cgroup root: %w", err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("cgroup root %s is not a directory: pass the directory the cgroup filesystems are mounted in, normally /sys/fs/cgroup", dir)
	}

	// cgroup v2: the root of a cgroup2 mount has cgroup.controllers.
	ctrls, ok, err := readControllers(dir)
	if err != nil {
		return nil, err
	}
	if ok {
		if !slices.Contains(ctrls, "cpu") {
			return nil, fmt.Errorf("%w: %s is a cgroup v2 tree whose cgroup.controllers lists %q, without cpu: enable cpu in the parent's cgroup.subtree_control",
				cgroup.ErrNoCPUController, dir, strings.Join(ctrls, " "))
		}
		return &Root{Dir: dir, Mode: cgroup.ModeV2, Version: 2, CPUDir: dir, AcctDir: dir}, nil
	}

	unified := filepath.Join(dir, "unified")
	uctrls, hasUnified, err := readControllers(unified)
	if err != nil {
		return nil, err
	}
	mode := cgroup.ModeV1
	if hasUnified {
		mode = cgroup.ModeHybrid
	}

	// cgroup v1: a cpu hierarchy is a directory with the CFS files.
	var unmounted []string // cpu directories without them (an empty tmpfs dir)
	cpuDir := ""
	for _, name := range v1CPUNames {
		d, ok := subdir(dir, name)
		if !ok {
			continue
		}
		if fileExists(filepath.Join(d, "cpu.cfs_quota_us")) {
			cpuDir = d
			break
		}
		unmounted = append(unmounted, filepath.Join(dir, name))
	}
	if cpuDir == "" {
		if hasUnified && slices.Contains(uctrls, "cpu") {
			return &Root{Dir: dir, Mode: cgroup.ModeHybrid, Version: 2, CPUDir: unified, AcctDir: unified}, nil
		}
		if len(unmounted) > 0 {
			return nil, fmt.Errorf("%w: %s has no cpu.cfs_quota_us: the cpu controller is not mounted there, or the kernel lacks CFS bandwidth control",
				cgroup.ErrNoCPUController, unmounted[0])
		}
		return nil, fmt.Errorf("%w: %s has neither cgroup.controllers (cgroup v2) nor a cpu, cpu,cpuacct or cpuacct,cpu directory (cgroup v1): pass the directory the cgroup filesystems are mounted in, normally /sys/fs/cgroup",
			cgroup.ErrNoCPUController, dir)
	}

	// Usage comes from cpuacct.usage: in the cpu hierarchy when the two
	// are co-mounted, else in a cpuacct hierarchy of its own.
	acctDir := ""
	if fileExists(filepath.Join(cpuDir, "cpuacct.usage")) {
		acctDir = cpuDir
	} else {
		for _, name := range v1AcctNames {
			if d, ok := subdir(dir, name); ok && fileExists(filepath.Join(d, "cpuacct.usage")) {
				acctDir = d
				break
			}
		}
	}
	if acctDir == "" {
		return nil, fmt.Errorf("%s has a cgroup v1 cpu hierarchy at %s but no cpuacct (no cpuacct.usage there, nor a %s directory with it): cfsprobe reads CPU usage from cpuacct on cgroup v1; mount it",
			dir, cpuDir, filepath.Join(dir, "cpuacct"))
	}
	return &Root{Dir: dir, Mode: mode, Version: 1, CPUDir: cpuDir, AcctDir: acctDir}, nil
}

// readControllers reads dir/cgroup.controllers; ok is false when there is
// no such file (dir is not the root of a cgroup2 tree).
func readControllers(dir string) (ctrls []string, ok bool, err error) {
	p := filepath.Join(dir, "cgroup.controllers")
	b, err := os.ReadFile(p)
	// ENOTDIR: dir is a file, so no cgroup2 tree either.
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("cgroup root: %w", err)
	}
	return strings.Fields(string(b)), true, nil
}

// subdir returns dir/name when it is a directory. A symlink (cpu ->
// cpu,cpuacct) is resolved to the sibling it names, so that co-mounted
// hierarchies compare equal; an absolute target is taken to be a sibling
// too, since in a container the host's tree is mounted somewhere else.
func subdir(dir, name string) (string, bool) {
	p := filepath.Join(dir, name)
	fi, err := os.Lstat(p)
	if err != nil {
		return "", false
	}
	if fi.Mode()&fs.ModeSymlink != 0 {
		t, err := os.Readlink(p)
		if err != nil {
			return "", false
		}
		if filepath.IsAbs(t) {
			p = filepath.Join(dir, filepath.Base(t))
		} else {
			p = filepath.Join(dir, t)
		}
		if fi, err = os.Stat(p); err != nil {
			return "", false
		}
	}
	return p, fi.IsDir()
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// HostFacts describes the machine whose cgroup tree r is (trace.ReadHost);
// fs locates its /proc and /sys.
func (r *Root) HostFacts(fs hostfs.FS) trace.Host {
	return trace.ReadHost(fs, r.Mode, &cgroup.Hierarchy{Version: r.Version, Dir: r.CPUDir})
}
