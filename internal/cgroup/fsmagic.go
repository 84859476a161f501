package cgroup

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// ErrNotCgroupFS is returned when a directory cfsprobe was to write, kill
// or remove under is not on a cgroup filesystem: a root given by the user
// (--fs-root, a mount table) that points at ordinary files, whose
// "cgroup.procs" could name any process.
var ErrNotCgroupFS = errors.New("not a cgroup filesystem")

// Magic numbers of statfs's f_type (linux/magic.h).
const (
	cgroupSuperMagic  = 0x27e0eb
	cgroup2SuperMagic = 0x63677270
)

// checkStatfs says whether a statfs result is a cgroup filesystem's.
func checkStatfs(path string, st *unix.Statfs_t) error {
	switch st.Type {
	case cgroupSuperMagic, cgroup2SuperMagic:
		return nil
	}
	return fmt.Errorf("%w: %s is on a file system of type 0x%x, not cgroup (0x%x) or cgroup2 (0x%x)", ErrNotCgroupFS, path, st.Type, cgroupSuperMagic, cgroup2SuperMagic)
}

// CheckFS returns an error wrapping ErrNotCgroupFS when path is not on a
// cgroup filesystem (v1 or v2), and the error of statfs when it cannot
// be asked.
func CheckFS(path string) error {
	var st unix.Statfs_t
	for {
		err := unix.Statfs(path, &st)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return &os.PathError{Op: "statfs", Path: path, Err: err}
		}
		return checkStatfs(path, &st)
	}
}

// CheckFS checks that every hierarchy of the layout is a cgroup
// filesystem, before anything is written, killed or removed under it. A
// hierarchy whose directory does not exist passes: nothing can be made
// there, and whatever tries says so.
func (l *Layout) CheckFS() error {
	for _, h := range l.Hierarchies() {
		if err := CheckFS(h.Dir); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("%w: check --fs-root and --proc-root (the mount table and the directory its cgroup mount points are found under)", err)
		}
	}
	return nil
}

// checkFd is CheckFS of an open file.
func checkFd(f *os.File) error {
	var st unix.Statfs_t
	for {
		err := unix.Fstatfs(int(f.Fd()), &st)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return &os.PathError{Op: "fstatfs", Path: f.Name(), Err: err}
		}
		return checkStatfs(f.Name(), &st)
	}
}
