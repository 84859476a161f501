package monitor

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/cfsprobe/cfsprobe/internal/cgroup"
	"golang.org/x/sys/unix"
)

// Options say which groups Discover returns.
type Options struct {
	All      bool // every group, not only those with a CPU quota
	MaxDepth int  // only groups at most this many levels below the root (the root is level 0); 0 or less: no limit
}

// Group is one cgroup found by Discover. It is a plain value: reading its
// counters opens its files afresh each time, so a group that has gone
// gives an error for which IsGone is true and nothing else.
type Group struct {
	Path   string // relative to the hierarchy's root: "/" or "/kubepods.slice/..."
	CPUDir string // its directory in the cpu hierarchy (cpu.stat, the quota)
	// AcctDir is its directory in the cpuacct hierarchy (v1
	// cpuacct.usage); CPUDir when co-mounted and on v2; "" when the
	// group has none, so that its usage is unknown (UsageUnknown).
	AcctDir string
	Version int      // cgroup version of the cpu hierarchy (1 or 2)
	ID      Identity // what the path says the group is
}

// UsageUnknown says why a group's CPU usage cannot be read; it is "" when
// it can. Such a group is shown all the same, its throttling read from
// its cpu.stat: no throttled group is left out for want of its usage.
type UsageUnknown string

// UsageNoCpuacctGroup: the group exists in a cgroup v1 cpu hierarchy
// mounted apart from cpuacct, and not in the cpuacct hierarchy (it was
// made in the cpu hierarchy alone: mkdir there, cgcreate -g cpu:/x). On
// v1 a group's usage is kept by cpuacct (cpuacct.usage): v1's cpu.stat
// has the throttling counters only.
const UsageNoCpuacctGroup UsageUnknown = "no_cpuacct_group"

// Explain says in a sentence, for people, why the usage is unknown and
// how to have it.
func (u UsageUnknown) Explain() string {
	switch u {
	case "":
		return ""
	case UsageNoCpuacctGroup:
		return "the group exists in the cgroup v1 cpu hierarchy only, not in cpuacct (mounted apart), which is where v1 keeps CPU usage; " +
			"make it under the same path in both (cgcreate -g cpu,cpuacct:PATH) to see its usage"
	}
	return string(u)
}

// UsageUnknown says why the group's CPU usage cannot be read ("" when it
// can): Stat then leaves UsageNs 0.
func (g Group) UsageUnknown() UsageUnknown {
	if g.AcctDir == "" {
		return UsageNoCpuacctGroup
	}
	return ""
}

// Discovery is what a walk found.
type Discovery struct {
	Groups []Group // in tree order: parents before children, siblings by name
	// Skipped are the directories and quota files that could not be read
	// (permission denied, unparsable contents), each error naming its
	// path. Groups that vanished during the walk are left out silently.
	Skipped []error
	// Walked counts the groups whose directories the walk listed, with
	// a quota or without (within Options.MaxDepth).
	Walked int
}

// Discover walks the cpu hierarchy and returns the groups that have a CPU
// quota, or every group with Options.All; the root itself counts (in a
// container it is the container's own group). The walk lists each
// directory once (the kernel gives each entry's type: nothing is
// stat'ed) and, for limit detection, reads only the quota file (v1
// cpu.cfs_quota_us, v2 cpu.max); counters are read later through
// Group.Stat. With cpuacct mounted apart (v1), each group returned is
// paired with its directory in the cpuacct hierarchy, checked to exist
// (one access per group): a group without one is returned with AcctDir
// "" (UsageNoCpuacctGroup), never left out. Groups that vanish mid-walk are skipped; unreadable ones are
// recorded in Discovery.Skipped. The error is non-nil only when the root
// itself cannot be read.
func (r *Root) Discover(opts Options) (Discovery, error) {
	w := walker{root: r, opts: opts, apart: r.AcctDir != r.CPUDir, dents: make([]byte, 8192)}
	fd, err := openAt(unix.AT_FDCWD, r.CPUDir, dirFlags)
	if err != nil {
		return Discovery{}, fmt.Errorf("discover cgroups: %w", &fs.PathError{Op: "open", Path: r.CPUDir, Err: err})
	}
	defer unix.Close(fd)
	subdirs, hasMax, err := w.list(fd, r.CPUDir)
	if err != nil {
		return Discovery{}, fmt.Errorf("discover cgroups: %w", err)
	}
	w.visit(fd, r.CPUDir, r.AcctDir, "/", 0, subdirs, hasMax)
	return w.d, nil
}

// walker holds one walk's state. It opens each directory relative to its
// parent's descriptor and each quota file relative to its directory's, so
// that the kernel never resolves a long path twice.
type walker struct {
	root  *Root
	opts  Options
	apart bool // v1 with cpuacct mounted apart from cpu
	d     Discovery
	dents []byte    // for getdents
	buf   [128]byte // for quota files
}

const dirFlags = unix.O_RDONLY | unix.O_DIRECTORY | unix.O_CLOEXEC

// visit considers the group at path, open as fd, whose cpu directory has
// the given subdirectories; then its children.
func (w *walker) visit(fd int, cpuDir, acctDir, path string, depth int, subdirs []string, hasMax bool) {
	acctDir = w.consider(fd, cpuDir, acctDir, path, hasMax)
	if w.opts.MaxDepth > 0 && depth >= w.opts.MaxDepth {
		return
	}
	for _, name := range subdirs {
		w.child(fd, cpuDir, acctDir, path, name, depth+1)
	}
}

// child opens and visits the child group name of the group open as pfd.
func (w *walker) child(pfd int, cpuDir, acctDir, path, name string, depth int) {
	dir := join(cpuDir, name)
	fd, err := openAt(pfd, name, dirFlags)
	if err != nil {
		w.skip(&fs.PathError{Op: "open", Path: dir, Err: err})
		return
	}
	defer unix.Close(fd)
	subdirs, hasMax, err := w.list(fd, dir)
	if err != nil {
		w.skip(err)
		return
	}
	adir := dir
	if w.apart {
		adir = ""
		if acctDir != "" { // else no descendant has one either
			adir = join(acctDir, name)
		}
	}
	w.visit(fd, dir, adir, join(path, name), depth, subdirs, hasMax)
}

// skip records an error, unless it says that the group has gone.
func (w *walker) skip(err error) {
	if !IsGone(err) {
		w.d.Skipped = append(w.d.Skipped, err)
	}
}

// consider adds the group when it is wanted. It returns the group's
// cpuacct directory: "" when it was found not to exist.
func (w *walker) consider(fd int, cpuDir, acctDir, path string, hasMax bool) string {
	w.d.Walked++
	if !w.opts.All {
		limited, err := w.limited(fd, cpuDir, hasMax)
		if err != nil {
			w.skip(err)
			return acctDir
		}
		if !limited {
			return acctDir
		}
	}
	if w.apart && acctDir != "" && !acctExists(acctDir) {
		acctDir = ""
	}
	w.d.Groups = append(w.d.Groups, Group{
		Path:    path,
		CPUDir:  cpuDir,
		AcctDir: acctDir,
		Version: w.root.Version,
		ID:      Identify(path),
	})
	return acctDir
}

// acctExists reports whether a group's directory in a cpuacct hierarchy
// mounted apart exists. Only its absence counts: a directory that cannot
// be checked for another reason is kept, and reading its cpuacct.usage
// later says what is wrong.
func acctExists(dir string) bool {
	for {
		err := unix.Faccessat(unix.AT_FDCWD, dir, unix.F_OK, 0)
		if err != unix.EINTR {
			return err != unix.ENOENT && err != unix.ENOTDIR
		}
	}
}

// limited reads the quota file of the group open as fd and reports
// whether a quota is set.
func (w *walker) limited(fd int, dir string, hasMax bool) (bool, error) {
	name := "cpu.cfs_quota_us"
	if w.root.Version == 2 {
		// Without the cpu controller enabled from its parent (and at
		// the root) a v2 group has no cpu.max: no quota.
		if !hasMax {
			return false, nil
		}
		name = "cpu.max"
	}
	b, err := readSmallAt(fd, name, dir, w.buf[:])
	if err != nil {
		return false, err
	}
	set, err := parseQuotaSet(b, w.root.Version)
	if err != nil {
		return false, fmt.Errorf("parse %s: %w", join(dir, name), err)
	}
	return set, nil
}

// list reads the entries of the directory open as fd: its subdirectories
// (the child groups), sorted, and whether it holds cpu.max. The raw
// entries go to the walk's buffer, so that only the subdirectories' names
// are allocated: a v2 group has some fifty files.
func (w *walker) list(fd int, dir string) (subdirs []string, hasMax bool, err error) {
	for {
		n, err := unix.Getdents(fd, w.dents)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, false, &fs.PathError{Op: "readdirent", Path: dir, Err: err}
		}
		if n <= 0 {
			break
		}
		subdirs, hasMax = parseDirents(w.dents[:n], subdirs, hasMax, func(name string) bool {
			// A file system that does not report types: ask.
			var st unix.Stat_t
			return unix.Fstatat(fd, name, &st, unix.AT_SYMLINK_NOFOLLOW) == nil && st.Mode&unix.S_IFMT == unix.S_IFDIR
		})
	}
	slices.Sort(subdirs)
	return subdirs, hasMax, nil
}

// parseDirents reads linux_dirent64 records (getdents64): it appends the
// names of directories (but . and ..) to subdirs and notes cpu.max.
// isDir is asked about entries of unknown type.
func parseDirents(b []byte, subdirs []string, hasMax bool, isDir func(string) bool) ([]string, bool) {
	// struct linux_dirent64 { u64 d_ino; s64 d_off; u16 d_reclen; u8 d_type; char d_name[]; }
	const nameOff = 19
	for len(b) >= nameOff {
		reclen := int(binary.NativeEndian.Uint16(b[16:18]))
		if reclen < nameOff || reclen > len(b) {
			break // not a record: stop rather than misread
		}
		typ, name := b[18], b[nameOff:reclen]
		b = b[reclen:]
		if i := bytes.IndexByte(name, 0); i >= 0 {
			name = name[:i]
		}
		if len(name) == 0 || bytes.IndexByte(name, '/') >= 0 {
			continue // no name the kernel gives: walking it would loop
		}
		switch typ {
		case unix.DT_DIR:
			if string(name) != "." && string(name) != ".." {
				subdirs = append(subdirs, string(name))
			}
		case unix.DT_REG:
			if string(name) == "cpu.max" {
				hasMax = true
			}
		case unix.DT_UNKNOWN:
			if s := string(name); s == "cpu.max" {
				hasMax = true
			} else if s != "." && s != ".." && isDir(s) {
				subdirs = append(subdirs, s)
			}
		}
	}
	return subdirs, hasMax
}

// parseQuotaSet reports whether a quota file's contents set a quota: v1
// cpu.cfs_quota_us ("-1" or us), v2 cpu.max ("max 100000" or "50000 100000").
func parseQuotaSet(b []byte, version int) (bool, error) {
	line := bytes.TrimSpace(b)
	if version == 2 {
		if i := bytes.IndexAny(line, " \t"); i >= 0 {
			line = line[:i]
		}
		if string(line) == "max" {
			return false, nil
		}
	}
	q, err := strconv.ParseInt(string(line), 10, 64)
	if err != nil {
		if version == 2 {
			return false, fmt.Errorf("%q: the quota is neither \"max\" nor microseconds", b)
		}
		return false, fmt.Errorf("%q: the quota is neither -1 nor microseconds", b)
	}
	// v1 shows -1 for no quota; v2 writes "max". Anything not positive
	// (a kernel bug or a fixture's 0) sets no limit either.
	return q > 0, nil
}

// readSmallAt reads the small kernel file name in the directory open as
// dirfd (dir on disk, for errors) into buf, without allocating a buffer
// or an *os.File: Discover reads one per group per walk. A short read of
// a newline-terminated text is the whole file (cgroupfs gives it in one
// read), which saves the read that would return 0.
func readSmallAt(dirfd int, name, dir string, buf []byte) ([]byte, error) {
	fd, err := openAt(dirfd, name, unix.O_RDONLY|unix.O_CLOEXEC)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: join(dir, name), Err: err}
	}
	defer unix.Close(fd)
	n := 0
	for n < len(buf) {
		m, err := unix.Read(fd, buf[n:])
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, &fs.PathError{Op: "read", Path: join(dir, name), Err: err}
		}
		n += m
		if m == 0 || (n < len(buf) && buf[n-1] == '\n') {
			return buf[:n], nil
		}
	}
	return nil, &fs.PathError{Op: "read", Path: join(dir, name), Err: fmt.Errorf("longer than %d bytes", len(buf))}
}

func openAt(dirfd int, name string, flags int) (int, error) {
	for {
		fd, err := unix.Openat(dirfd, name, flags, 0)
		if err != unix.EINTR {
			return fd, err
		}
	}
}

// join joins a directory and a name like filepath.Join, for the clean
// paths of a walk, without cleaning again.
func join(dir, name string) string {
	if strings.HasSuffix(dir, "/") {
		return dir + name
	}
	return dir + "/" + name
}

// Stat reads the group's CPU counters, in nanoseconds (v1 cpu.stat and
// cpuacct.usage, v2 cpu.stat); UsageNs is 0 when UsageUnknown says why.
func (g Group) Stat() (cgroup.Stat, error) {
	return cgroup.ReadStat(g.CPUDir, g.AcctDir, g.Version)
}

// Limits reads the group's quota, period and burst (cgroup.ReadLimits):
// Quota is 0 when no quota is set, and also for a v2 group without
// cpu.max (the root, or a group whose parent does not enable the cpu
// controller), whose period is the kernel's default.
func (g Group) Limits() (cgroup.Limits, error) {
	l, err := cgroup.ReadLimits(g.CPUDir, g.Version)
	if err != nil && g.Version == 2 && errors.Is(err, fs.ErrNotExist) && fileExists(filepath.Join(g.CPUDir, "cpu.stat")) {
		return cgroup.Limits{Period: cgroup.DefaultPeriod}, nil
	}
	return l, err
}

// IsGone reports whether an error from reading a group means that the
// group was removed: its files are gone (ENOENT), or were removed while
// open (ENODEV).
func IsGone(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENODEV)
}
