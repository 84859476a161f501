package monitor

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/cfsprobe/cfsprobe/internal/cgroup"
	"golang.org/x/sys/unix"
)

// Target is a group as the last walk left it: where it is, what it is and
// its limits.
type Target struct {
	Group  Group
	Limits cgroup.Limits
	Burst  bool // the kernel has CPU burst: the group has cpu.cfs_burst_us (v1) or cpu.max.burst (v2)
}

// Reading is a group's counters, read now, with the limits the last walk
// read.
type Reading struct {
	Target
	Stat cgroup.Stat
}

// ScanOptions say which groups a Scanner follows.
type ScanOptions struct {
	All bool // every group, not only those with a CPU quota (see Options.All)
}

// ErrNotWalked is what Scanner.Ready says before the first walk.
var ErrNotWalked = errors.New("the cgroup tree has not been walked yet")

// Scanner keeps the groups of a cgroup root between scrapes: Rescan walks
// the tree and reads every group's limits (seldom: limits change rarely),
// Read reads every group's counters (at each scrape). The counter files
// are kept open and read with pread, which costs the kernel a sixth of an
// open, read and close. A group that disappears drops out, at the next
// walk or as soon as a read finds it gone; it never makes Read fail.
// Other failed reads are counted in Errors by file name.
//
// A Scanner is safe for concurrent use.
type Scanner struct {
	root *Root
	opts ScanOptions
	errs *ReadErrors

	walkMu sync.Mutex // one walk at a time

	mu      sync.Mutex // guards what follows
	groups  []*scanned // in tree order
	byPath  map[string]*scanned
	walked  int    // groups in the last successful walk, limited or not
	walkErr error  // of the last walk
	gen     uint64 // bumped whenever the groups or their limits change
	buf     [statBufSize]byte
}

// scanned is a group the Scanner follows.
type scanned struct {
	Target
	files counters
}

// NewScanner returns a Scanner of root's groups. It has none until the
// first Rescan.
func NewScanner(root *Root, opts ScanOptions) *Scanner {
	return &Scanner{root: root, opts: opts, errs: NewReadErrors(), byPath: map[string]*scanned{}, walkErr: ErrNotWalked}
}

// Errors are the failed reads of the Scanner's files, by file name.
func (s *Scanner) Errors() *ReadErrors { return s.errs }

// Root is the cgroup root the Scanner reads.
func (s *Scanner) Root() *Root { return s.root }

// Rescan walks the tree: groups that appeared are added (their files
// opened), those that disappeared (or lost their quota) dropped, and every
// group's limits read again. Unreadable directories and files are counted
// in Errors and left out. The error is that of the walk itself (the root
// cannot be read); the groups of the last walk are then kept.
func (s *Scanner) Rescan() error {
	s.walkMu.Lock()
	defer s.walkMu.Unlock()

	d, err := s.root.Discover(Options{All: s.opts.All})
	if err != nil {
		s.mu.Lock()
		s.walkErr = err
		s.mu.Unlock()
		return err
	}
	for _, e := range d.Skipped {
		s.errs.Add(fileOf(e))
	}

	// Limits and new groups' files are read without the lock, so that
	// scrapes go on meanwhile; whether a group is new is decided again
	// under the lock, since a Read may have dropped one in between.
	s.mu.Lock()
	known := make(map[string]Group, len(s.byPath))
	for p, g := range s.byPath {
		known[p] = g.Group
	}
	s.mu.Unlock()

	type found struct {
		t     Target
		files counters
		fresh bool // files were opened here
	}
	list := make([]found, 0, len(d.Groups))
	for _, g := range d.Groups {
		lim, burst, err := readLimits(g)
		if err != nil {
			if !IsGone(err) {
				s.errs.Add(fileOf(err))
			}
			continue
		}
		if !s.opts.All && lim.Unlimited() {
			continue // the quota went between the walk and now
		}
		f := found{t: Target{Group: g, Limits: lim, Burst: burst}}
		if k, ok := known[g.Path]; !ok || !sameDirs(k, g) {
			c, err := openCounters(g)
			if err != nil {
				if !IsGone(err) {
					s.errs.Add(fileOf(err))
				}
				continue
			}
			f.files, f.fresh = c, true
		}
		list = append(list, f)
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	groups := make([]*scanned, 0, len(list))
	byPath := make(map[string]*scanned, len(list))
	changed := len(list) != len(s.groups)
	for _, f := range list {
		old := s.byPath[f.t.Group.Path]
		switch {
		case old != nil && sameDirs(old.Group, f.t.Group):
			if f.fresh {
				f.files.close() // a Read dropped and a walk re-added it meanwhile: keep one set
			}
			if old.Limits != f.t.Limits || old.Burst != f.t.Burst {
				changed = true
			}
			old.Target = f.t
			groups = append(groups, old)
			byPath[f.t.Group.Path] = old
			delete(s.byPath, f.t.Group.Path)
		case f.fresh:
			g := &scanned{Target: f.t, files: f.files}
			groups = append(groups, g)
			byPath[f.t.Group.Path] = g
			changed = true
		default:
			// Known at the start of the walk and dropped since by a
			// Read (it was gone): the next walk will tell.
			changed = true
		}
	}
	for _, g := range s.byPath { // what the walk no longer found
		g.files.close()
	}
	s.groups, s.byPath = groups, byPath
	s.walked, s.walkErr = d.Walked, nil
	if changed {
		s.gen++
	}
	return nil
}

// sameDirs reports whether a and b are read from the same directories: a
// group that gained its cpuacct directory (or lost it) between walks is
// read afresh.
func sameDirs(a, b Group) bool { return a.CPUDir == b.CPUDir && a.AcctDir == b.AcctDir }

// Read appends a Reading of every group to dst and returns it. Groups
// found gone are dropped; groups whose files cannot be read are left out
// of this Read and counted in Errors.
func (s *Scanner) Read(dst []Reading) []Reading {
	s.mu.Lock()
	defer s.mu.Unlock()
	kept := s.groups[:0]
	for _, g := range s.groups {
		st, file, err := g.files.read(s.buf[:])
		if err != nil {
			if IsGone(err) {
				g.files.close()
				delete(s.byPath, g.Group.Path)
				s.gen++
				continue
			}
			s.errs.Add(file)
			kept = append(kept, g)
			continue
		}
		kept = append(kept, g)
		dst = append(dst, Reading{Target: g.Target, Stat: st})
	}
	clear(s.groups[len(kept):]) // no pointers to dropped groups
	s.groups = kept
	return dst
}

// Targets appends the groups as the last walk left them (less those found
// gone since) to dst. gen changes whenever they do.
func (s *Scanner) Targets(dst []Target) (_ []Target, gen uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, g := range s.groups {
		dst = append(dst, g.Target)
	}
	return dst, s.gen
}

// Len is the number of groups the Scanner follows.
func (s *Scanner) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.groups)
}

// Walked is the number of groups, with a limit or without, that the last
// successful walk found.
func (s *Scanner) Walked() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.walked
}

// Ready is nil when the last walk succeeded, its error otherwise, and
// ErrNotWalked before the first.
func (s *Scanner) Ready() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.walkErr
}

// Close closes the files the Scanner keeps open and forgets its groups.
func (s *Scanner) Close() {
	s.walkMu.Lock()
	defer s.walkMu.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, g := range s.groups {
		g.files.close()
	}
	s.groups, s.byPath = nil, map[string]*scanned{}
	s.gen++
}

// readLimits reads a group's limits and whether its kernel has burst.
func readLimits(g Group) (cgroup.Limits, bool, error) {
	lim, err := g.Limits()
	if err != nil {
		return cgroup.Limits{}, false, err
	}
	name := "cpu.cfs_burst_us"
	if g.Version == 2 {
		name = "cpu.max.burst"
	}
	var st unix.Stat_t
	burst := unix.Stat(filepath.Join(g.CPUDir, name), &st) == nil
	return lim, burst, nil
}

// ReadErrors counts failed reads of cgroup files by file name. It is safe
// for concurrent use.
type ReadErrors struct {
	mu sync.Mutex
	n  map[string]uint64
}

// NewReadErrors returns an empty count.
func NewReadErrors() *ReadErrors { return &ReadErrors{n: map[string]uint64{}} }

// Add counts one failed read of file (a name such as cpu.stat).
func (e *ReadErrors) Add(file string) {
	e.mu.Lock()
	e.n[file]++
	e.mu.Unlock()
}

// Counts returns a copy of the counts.
func (e *ReadErrors) Counts() map[string]uint64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := make(map[string]uint64, len(e.n))
	for k, v := range e.n {
		out[k] = v
	}
	return out
}

// cgroupFiles are the files whose failed reads are counted under their
// own names; longest first, so that cpu.max.burst is not taken for cpu.max.
var cgroupFiles = []string{
	"cpu.cfs_period_us", "cpu.cfs_quota_us", "cpu.cfs_burst_us", "cpuacct.usage", "cpu.max.burst", "cpu.stat", "cpu.max",
}

// fileOf names the file an error is about, for counting: one of
// cgroupFiles, "directory" for a group's directory, "other" when the
// error does not say.
func fileOf(err error) string {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		base := filepath.Base(pe.Path)
		for _, f := range cgroupFiles {
			if base == f {
				return f
			}
		}
		if pe.Op == "readdirent" || pe.Op == "open" {
			return "directory"
		}
	}
	msg := err.Error()
	for _, f := range cgroupFiles {
		if strings.Contains(msg, f) {
			return f
		}
	}
	return "other"
}

// counters are the open files a group's counters are read from: cpu.stat
// and, on v1, cpuacct.usage (unless the group has no cpuacct directory:
// its usage is then unknown and left 0).
type counters struct {
	version   int
	stat      counterFile
	usage     counterFile // v1 only
	usageFile bool        // usage is read from usage
}

// openCounters opens a group's counter files.
func openCounters(g Group) (counters, error) {
	c := counters{version: g.Version, usageFile: g.Version == 1 && g.UsageUnknown() == ""}
	var err error
	if c.stat, err = openCounterFile(join(g.CPUDir, "cpu.stat")); err != nil {
		return counters{}, err
	}
	if c.usageFile {
		if c.usage, err = openCounterFile(join(g.AcctDir, "cpuacct.usage")); err != nil {
			c.stat.close()
			return counters{}, err
		}
	}
	return c, nil
}

// read reads the counters with buf as scratch; on error file names the
// file that failed.
func (c *counters) read(buf []byte) (st cgroup.Stat, file string, err error) {
	b, err := c.stat.read(buf)
	if err != nil {
		return cgroup.Stat{}, "cpu.stat", err
	}
	if st, err = cgroup.ParseCPUStat(b, c.version); err != nil {
		return cgroup.Stat{}, "cpu.stat", fmt.Errorf("parse %s: %w", c.stat.path, err)
	}
	if c.usageFile {
		if st.UsageNs, err = c.readUsage(buf); err != nil {
			return cgroup.Stat{}, "cpuacct.usage", err
		}
	}
	return st, "", nil
}

// readUsage reads v1 cpuacct.usage alone.
func (c *counters) readUsage(buf []byte) (int64, error) {
	b, err := c.usage.read(buf)
	if err != nil {
		return 0, err
	}
	v, err := cgroup.ParseUsage(b)
	if err != nil {
		return 0, fmt.Errorf("parse %s: %w", c.usage.path, err)
	}
	return v, nil
}

func (c *counters) close() {
	c.stat.close()
	c.usage.close()
}

// statBufSize bounds a counter file: cpu.stat has a dozen short lines.
const statBufSize = 4096

// counterFile is a kernel file read again and again: kept open when the
// process may hold one more descriptor, else opened for each read.
type counterFile struct {
	path string
	fd   int // -1: not kept open
	kept bool
}

// keptFiles counts the descriptors counterFiles hold, process-wide, so
// that a node with many groups does not run the process out of them.
var (
	keptFiles    atomic.Int64
	maxKeptOnce  sync.Once
	maxKeptFiles int64
)

// maxKept is how many descriptors counterFiles may hold: half of the
// process's limit (Go raises the soft limit to the hard one at start).
func maxKept() int64 {
	maxKeptOnce.Do(func() {
		var r unix.Rlimit
		switch {
		case unix.Getrlimit(unix.RLIMIT_NOFILE, &r) != nil:
			maxKeptFiles = 256
		case r.Cur == unix.RLIM_INFINITY || r.Cur > 1<<21:
			maxKeptFiles = 1 << 20
		default:
			maxKeptFiles = max(int64(r.Cur)/2, 16)
		}
	})
	return maxKeptFiles
}

// openCounterFile opens path to be read again and again; past the
// process's budget of kept descriptors it only checks that path exists.
func openCounterFile(path string) (counterFile, error) {
	if keptFiles.Add(1) > maxKept() {
		keptFiles.Add(-1)
		var st unix.Stat_t
		if err := unix.Stat(path, &st); err != nil {
			return counterFile{}, &fs.PathError{Op: "open", Path: path, Err: err}
		}
		return counterFile{path: path, fd: -1}, nil
	}
	fd, err := openAt(unix.AT_FDCWD, path, unix.O_RDONLY|unix.O_CLOEXEC)
	if err != nil {
		keptFiles.Add(-1)
		return counterFile{}, &fs.PathError{Op: "open", Path: path, Err: err}
	}
	return counterFile{path: path, fd: fd, kept: true}, nil
}

// read reads the whole file into buf from offset 0: kernfs regenerates
// the text of a file read at offset 0, so one descriptor serves every
// read. A file removed while open reads ENODEV (IsGone).
func (f *counterFile) read(buf []byte) ([]byte, error) {
	if !f.kept {
		if f.path == "" {
			return nil, &fs.PathError{Op: "read", Path: f.path, Err: fs.ErrClosed}
		}
		fd, err := openAt(unix.AT_FDCWD, f.path, unix.O_RDONLY|unix.O_CLOEXEC)
		if err != nil {
			return nil, &fs.PathError{Op: "open", Path: f.path, Err: err}
		}
		defer unix.Close(fd)
		return cgroup.PreadAll(fd, f.path, buf)
	}
	return cgroup.PreadAll(f.fd, f.path, buf)
}

func (f *counterFile) close() {
	if f.kept {
		unix.Close(f.fd)
		keptFiles.Add(-1)
	}
	*f = counterFile{fd: -1}
}
