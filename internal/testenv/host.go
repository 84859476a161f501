package testenv

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"

	"github.com/cfsprobe/cfsprobe/internal/cgroup"
	"github.com/cfsprobe/cfsprobe/internal/hostfs"
)

// What tests that start daemons (a private dockerd, a Kubernetes node)
// use to leave nothing behind.

// ProcessesNaming lists the processes whose command line contains s (a
// daemon's private directory: its own processes, and the shims that name
// its socket), except this one.
func ProcessesNaming(s string) ([]int, error) {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	var pids []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue // exited
		}
		if bytes.Contains(b, []byte(s)) {
			pids = append(pids, pid)
		}
	}
	return pids, nil
}

// MountsUnder lists the mount points of this process at or below dir,
// deepest first.
func MountsUnder(dir string) ([]string, error) {
	mounts, err := cgroup.ReadMountinfo(hostfs.Default(), "self")
	if err != nil {
		return nil, err
	}
	var points []string
	for _, m := range mounts {
		if m.MountPoint == dir || strings.HasPrefix(m.MountPoint, dir+"/") {
			points = append(points, m.MountPoint)
		}
	}
	sort.SliceStable(points, func(i, j int) bool { return len(points[i]) > len(points[j]) })
	return points, nil
}

// UnmountUnder unmounts every mount at or below dir, deepest first: a
// plain unmount, else a lazy one (a mount still in use goes when its last
// user does).
func UnmountUnder(dir string) error {
	points, err := MountsUnder(dir)
	if err != nil {
		return err
	}
	var errs []error
	for _, p := range points {
		err := syscall.Unmount(p, 0)
		if err != nil && !errors.Is(err, syscall.EINVAL) {
			err = syscall.Unmount(p, syscall.MNT_DETACH)
		}
		if err != nil && !errors.Is(err, syscall.EINVAL) {
			errs = append(errs, fmt.Errorf("unmount %s: %w", p, err))
		}
	}
	return errors.Join(errs...)
}
