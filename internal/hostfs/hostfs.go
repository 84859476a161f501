// Package hostfs locates a machine's kernel files: its /proc, its /sys,
// and the directories its mount table names. Everything cfsprobe reads
// about a machine goes through one FS value, so that tests read fixture
// trees and a DaemonSet reads the node's tree mounted at /host, as
// prometheus/procfs builds everything on NewFS(mountPoint).
//
// An FS only makes paths; reading and parsing stay with the packages
// that know the files. It imports nothing of cfsprobe's.
package hostfs

import "path/filepath"

// FS is a machine's file tree, rooted at a directory: "/" for the
// machine cfsprobe runs on, a fixture directory in tests, /host for a
// node's root mounted in a container. Its proc is root/proc unless
// WithProc moved it. The zero FS is Default().
type FS struct {
	root string // "" means "/"
	proc string // "" means root/proc
}

// Default is the machine cfsprobe runs on: /proc, /sys, mount points as
// they are.
func Default() FS { return FS{} }

// New is the tree rooted at root: root/proc, root/sys, and the mount
// point /x at root/x. New("/") and New("") are Default().
func New(root string) FS {
	if root == "" || filepath.Clean(root) == "/" {
		return FS{}
	}
	return FS{root: root}
}

// WithProc is f with proc mounted at dir (a --proc-root given apart
// from the root). An empty dir leaves f as it is.
func (f FS) WithProc(dir string) FS {
	f.proc = dir
	return f
}

// Proc is the path of a file under proc: Proc("self", "mountinfo"),
// Proc(pid, "cgroup"), Proc("sys", "kernel", "osrelease"); Proc() is
// proc itself.
func (f FS) Proc(elem ...string) string {
	dir := f.proc
	if dir == "" {
		dir = f.Path("/proc")
	}
	return filepath.Join(append([]string{dir}, elem...)...)
}

// Sys is the path of a file under sys: Sys("fs", "cgroup").
func (f FS) Sys(elem ...string) string {
	return filepath.Join(append([]string{f.Path("/sys")}, elem...)...)
}

// Path is where the machine's path p (absolute, as the mount table
// gives mount points) is in this tree.
func (f FS) Path(p string) string {
	if f.root == "" {
		return filepath.Clean("/" + p)
	}
	return filepath.Join(f.root, p)
}

// CgroupDir is where the cgroup filesystems are normally mounted
// (sys/fs/cgroup): what top, record and the exporter walk unless told
// otherwise. Detection from the mount table does not assume it.
func (f FS) CgroupDir() string { return f.Sys("fs", "cgroup") }

// OnlineFile lists the online CPUs ("0-3,8-11").
func (f FS) OnlineFile() string { return f.Sys("devices", "system", "cpu", "online") }
