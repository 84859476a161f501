package cgroup

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"math/bits"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// DefaultParent is the group under which cfsprobe creates its transient
// groups, in every hierarchy it uses.
const DefaultParent = "cfsprobe"

// Group is a transient cgroup that cfsprobe created, on v1 or v2. Callers
// never branch on the version: New picks the implementation.
type Group interface {
	// Path is the group's path relative to the hierarchy root, e.g. "/cfsprobe/run-12-ab".
	Path() string
	// Dirs are the directories that make up the group (one per hierarchy).
	Dirs() []string
	// Version is the cgroup version behind the cpu controller (1 or 2).
	Version() int
	// AddProc moves a process into the group (in every hierarchy).
	AddProc(pid int) error
	// Procs lists the processes in the group.
	Procs() ([]int, error)
	// Stat reads the CPU counters, in nanoseconds.
	Stat() (Stat, error)
	// Destroy kills every task in the group, waits for them to go and
	// removes the directories (and the parent when it is left empty).
	Destroy() error
}

// Manager creates groups on one layout under one parent.
type Manager struct {
	Layout *Layout
	Parent string // relative to each hierarchy's root; DefaultParent when empty
}

// NewManager returns a manager for the layout.
func NewManager(l *Layout, parent string) *Manager {
	if parent == "" {
		parent = DefaultParent
	}
	return &Manager{Layout: l, Parent: strings.Trim(parent, "/")}
}

// CheckParent tells whether parent names a group below a hierarchy's
// root, as Manager joins it to each hierarchy's directory: a path such
// as "cfsprobe" or "tests/cfsprobe" (leading and trailing slashes are
// dropped), without "." or ".." and not the root itself. "" is the
// default parent.
func CheckParent(parent string) error {
	p := strings.Trim(parent, "/")
	if parent != "" && p == "" {
		return fmt.Errorf("%q is the root itself", parent)
	}
	for _, e := range strings.Split(p, "/") {
		if p != "" && (e == "" || e == "." || e == "..") {
			return fmt.Errorf("%q is not a plain path below the root (it has %q)", parent, "/"+e+"/")
		}
	}
	return nil
}

// GroupName makes a name that says which cfsprobe process created the
// group, so that `cfsprobe cleanup` can tell leftovers from live runs.
func GroupName(prefix string) string {
	var b [4]byte
	_, _ = readRandom(b[:])
	return fmt.Sprintf("%s-%d-%x", prefix, os.Getpid(), b)
}

func readRandom(b []byte) (int, error) {
	return unix.Getrandom(b, 0)
}

// CheckWritable returns ErrNotRoot (wrapped with advice) when the caller
// cannot create groups under the cpu hierarchy, ErrNotCgroupFS when a
// hierarchy's directory is not a cgroup filesystem, and says to check the
// fs root when the hierarchy's directory is not there at all.
func (m *Manager) CheckWritable() error {
	if err := m.Layout.CheckFS(); err != nil {
		return err
	}
	dir := m.Layout.CPU.Dir
	target := filepath.Join(dir, m.Parent)
	if _, err := os.Stat(target); err == nil {
		dir = target
	}
	err := unix.Access(dir, unix.W_OK)
	if errors.Is(err, unix.ENOENT) && dir != m.Layout.CPU.Dir {
		dir = m.Layout.CPU.Dir // another run removed the parent since the Stat
		err = unix.Access(dir, unix.W_OK)
	}
	if err != nil {
		if errors.Is(err, unix.ENOENT) {
			return fmt.Errorf("the cpu hierarchy's directory %s does not exist: check --fs-root (the directory the cgroup mount points of mountinfo are found under)", dir)
		}
		if os.Geteuid() != 0 {
			return fmt.Errorf("%w: %s is not writable by uid %d: run cfsprobe as root (sudo), or delegate a cgroup to this user", ErrNotRoot, dir, os.Geteuid())
		}
		return fmt.Errorf("%w: %s is not writable (%v): is the cgroup filesystem mounted read-only?", ErrNotRoot, dir, err)
	}
	return nil
}

// Check tells whether a group with the limits can be made under the
// manager's parent, before anything is written: Validate's rules, then
// the host's. On cgroup v1 the kernel refuses a quota per period above
// that of the nearest ancestor with a quota (tg_cfs_schedulable_down; v2
// caps it instead); a burst needs a kernel with CPU burst (5.14); a
// cpuset needs the cpuset controller and CPUs the parent has. Each
// refusal is a *LimitError; other errors say what could not be read.
func (m *Manager) Check(l Limits) error {
	if err := l.Validate(); err != nil {
		return err
	}
	if m.Layout.CPU.Version == 1 && !l.Unlimited() {
		if err := m.checkAncestorQuota(l); err != nil {
			return err
		}
	}
	if l.Burst > 0 && !m.BurstSupported() {
		return &LimitError{Field: FieldBurst, Value: l.Burst.String(), Reason: "needs CPU burst, which this kernel does not have (Linux 5.14 or newer has it)", Err: ErrNoBurst}
	}
	if l.Cpuset != "" {
		return m.checkCpuset(l.Cpuset)
	}
	return nil
}

// checkAncestorQuota applies cgroup v1's rule: a group may not have more
// quota per period than the nearest ancestor that has a quota, compared
// as the kernel does (to_ratio: quota << 20 / period, in microseconds).
func (m *Manager) checkAncestorQuota(l Limits) error {
	root := filepath.Clean(m.Layout.CPU.Dir)
	for dir := filepath.Join(root, m.Parent); ; dir = filepath.Dir(dir) {
		a, err := readMax(dir, 1) // the quota and period: burst does not count
		switch {
		case errors.Is(err, fs.ErrNotExist): // the parent is made later
		case err != nil:
			return fmt.Errorf("read the limits of an ancestor group: %w", err)
		case !a.Unlimited():
			parent := bwRatio(a.Quota, a.Period)
			if bwRatio(l.Quota, l.Period) <= parent {
				return nil
			}
			path := "/" + strings.TrimPrefix(strings.TrimPrefix(dir, root), "/")
			return &LimitError{Field: FieldQuota, Value: l.Quota.String(), Period: l.Period,
				Reason: fmt.Sprintf("is more than its ancestor group %s allows (quota %v per %v period, %s CPU), which cgroup v1 refuses", path, a.Quota, a.Period, strconv.FormatFloat(a.CPUs(), 'g', 4, 64)),
				Max:    maxQuotaUnder(parent, l.Period), HasMax: true}
		}
		if dir == root || !strings.HasPrefix(dir, root+"/") {
			return nil
		}
	}
}

// bwShift is the kernel's BW_SHIFT: bandwidth ratios are fixed point
// numbers with 20 fractional bits.
const bwShift = 20

// bwRatio is the kernel's to_ratio(period, quota) on microseconds. Quotas
// are at most MaxQuota (2^44-1 us), so the shift does not overflow.
func bwRatio(quota, period time.Duration) uint64 {
	q, p := uint64(min(quota, MaxQuota)/time.Microsecond), uint64(period/time.Microsecond)
	if p == 0 {
		return 0
	}
	return q << bwShift / p
}

// maxQuotaUnder is the largest quota per period whose ratio is at most
// ratio: q << 20 / p <= ratio while q < ((ratio+1) * p) >> 20.
func maxQuotaUnder(ratio uint64, period time.Duration) time.Duration {
	hi, lo := bits.Mul64(ratio+1, uint64(period/time.Microsecond))
	lo, borrow := bits.Sub64(lo, 1, 0)
	hi -= borrow
	q := hi<<(64-bwShift) | lo>>bwShift
	if hi>>bwShift != 0 || q > uint64(MaxQuota/time.Microsecond) {
		return MaxQuota
	}
	return time.Duration(q) * time.Microsecond
}

// checkCpuset verifies that every CPU of the list exists in the parent's
// cpuset (or is online when cpuset is not mounted).
func (m *Manager) checkCpuset(list string) error {
	le := func(reason string, err error) error {
		return &LimitError{Field: FieldCpuset, Value: strconv.Quote(list), Reason: reason, Err: err}
	}
	want, err := ParseCPUList(list)
	if err != nil {
		return le("is not a CPU list like 0-1 or 0,2", err)
	}
	if len(want) == 0 {
		return nil
	}
	if m.Layout.CPUSet == nil {
		return le("needs the cpuset controller, which is not mounted (v1) or not enabled (v2) here", nil)
	}
	availStr, err := readTrim(m.availableCPUsFile())
	if err != nil {
		return err
	}
	avail, err := ParseCPUList(availStr)
	if err != nil {
		return fmt.Errorf("parse %s (%q): %w", m.availableCPUsFile(), availStr, err)
	}
	have := map[int]bool{}
	for _, c := range avail {
		have[c] = true
	}
	for _, c := range want {
		if !have[c] {
			return le(fmt.Sprintf("names CPU %d, which does not exist here (available: %s): pick CPUs from that list", c, availStr), nil)
		}
	}
	return nil
}

func (m *Manager) availableCPUsFile() string {
	h := m.Layout.CPUSet
	if f := filepath.Join(h.Dir, "cpuset.effective_cpus"); fileExists(f) {
		return f
	}
	if f := filepath.Join(h.Dir, "cpuset.cpus.effective"); fileExists(f) {
		return f
	}
	return filepath.Join(h.Dir, "cpuset.cpus")
}

// BurstSupported reports whether the running kernel exposes CPU burst.
func (m *Manager) BurstSupported() bool {
	return BurstSupported(m.Layout.CPU, runningRelease())
}

// Create makes the group `name` with the given limits. Inputs are checked
// (Check) before anything is written; if any step fails, what was created is
// removed again.
func (m *Manager) Create(name string, lim Limits) (Group, error) {
	if err := m.Check(lim); err != nil {
		return nil, err
	}
	if m.Layout.CPU.Version == 2 {
		return m.createV2(name, lim)
	}
	return m.createV1(name, lim)
}

// base holds what both versions share.
type base struct {
	statMu  sync.Mutex // Stat may be called from several goroutines
	path    string     // relative path, with leading "/"
	dirs    []string   // leaf directories, one per hierarchy, cpu first
	parents []string   // parent directories we may remove when empty
	statFD  *os.File
	usageFD *os.File
	cpuDir  string
}

func (b *base) Path() string   { return b.path }
func (b *base) Dirs() []string { return b.dirs }

func (b *base) AddProc(pid int) error {
	for _, d := range b.dirs {
		if err := WriteFile(filepath.Join(d, "cgroup.procs"), strconv.Itoa(pid)); err != nil {
			return err
		}
	}
	return nil
}

func (b *base) Procs() ([]int, error) {
	return readPids(filepath.Join(b.cpuDir, "cgroup.procs"))
}

// destroy kills every task and removes the directories. kill, when not
// nil, is a whole-group kill (v2 cgroup.kill) tried first.
func (b *base) destroy(kill func() error) error {
	if b.statFD != nil {
		b.statFD.Close()
	}
	if b.usageFD != nil {
		b.usageFD.Close()
	}
	var errs []error
	for _, d := range b.dirs {
		if err := killAll(d, kill); err != nil {
			errs = append(errs, err)
		}
		kill = nil // one cgroup.kill is enough
	}
	for _, d := range b.dirs {
		if err := Rmdir(d); err != nil {
			errs = append(errs, err)
		}
	}
	for _, p := range b.parents {
		removeIfEmpty(p)
	}
	return errors.Join(errs...)
}

// killAll SIGKILLs the tasks of the group directory until none is left.
// New tasks forked during the loop are caught by the next round.
func killAll(dir string, groupKill func() error) error {
	if groupKill != nil {
		_ = groupKill()
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		pids, err := readPids(filepath.Join(dir, "cgroup.procs"))
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		if len(pids) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("tasks %v of %s did not exit after SIGKILL", pids, dir)
		}
		for _, p := range pids {
			_ = syscall.Kill(p, syscall.SIGKILL)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Rmdir removes a cgroup directory, retrying for up to 5 s while the
// kernel reports it busy: it may for a moment after the last task has
// exited. A directory already gone is not an error.
func Rmdir(dir string) error {
	deadline := time.Now().Add(5 * time.Second)
	for {
		err := unix.Rmdir(dir)
		if err == nil || errors.Is(err, unix.ENOENT) {
			return nil
		}
		if time.Now().After(deadline) || !(errors.Is(err, unix.EBUSY) || errors.Is(err, unix.EAGAIN)) {
			return fmt.Errorf("remove cgroup %s: %w", dir, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// removeIfEmpty removes a parent group when no child group is left in it;
// another cfsprobe run may still be using it, which is not an error.
func removeIfEmpty(dir string) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range entries {
		if e.IsDir() {
			return
		}
	}
	_ = unix.Rmdir(dir)
}

// mkdirGroup creates the parent (if missing) and the leaf. created lists
// the directories this call made, for undo.
func mkdirGroup(root, parent, name string, setupParent func(dir string) error) (leaf string, created []string, err error) {
	pdir := filepath.Join(root, parent)
	for attempt := 0; attempt < 5; attempt++ {
		if err = os.Mkdir(pdir, 0o755); err == nil {
			created = append(created, pdir)
			if setupParent != nil {
				if err = setupParent(pdir); err != nil {
					return "", created, err
				}
			}
		} else if !errors.Is(err, fs.ErrExist) {
			return "", created, fmt.Errorf("create cgroup %s: %w", pdir, err)
		}
		leaf = filepath.Join(pdir, name)
		err = os.Mkdir(leaf, 0o755)
		if err == nil {
			return leaf, append(created, leaf), nil
		}
		// Another run may have removed the empty parent between our two
		// mkdirs: try again.
		if !errors.Is(err, fs.ErrNotExist) {
			return "", created, fmt.Errorf("create cgroup %s: %w", leaf, err)
		}
	}
	return "", created, fmt.Errorf("create cgroup %s: %w", leaf, err)
}

func undo(created []string) {
	for i := len(created) - 1; i >= 0; i-- {
		_ = unix.Rmdir(created[i])
	}
}

// WriteFile is the one function through which cfsprobe writes to
// cgroupfs. Its error names the file and the value. It writes nothing to
// a file that is not on a cgroup filesystem (ErrNotCgroupFS).
func WriteFile(path, value string) error {
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return fmt.Errorf("write %q to %s: %w", value, path, err)
	}
	if err = checkFd(f); err == nil {
		_, err = f.WriteString(value)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("write %q to %s: %w", value, path, err)
	}
	return nil
}

func readTrim(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(b)), nil
}

func readPids(path string) ([]int, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var pids []int
	for _, f := range bytes.Fields(b) {
		p, err := strconv.Atoi(string(f))
		if err != nil {
			return nil, fmt.Errorf("parse %s (%q): %w", path, f, errSyntax)
		}
		pids = append(pids, p)
	}
	return pids, nil
}

// PreadAll reads a small file (a cgroup's counters) from offset 0 into
// buf: an open file re-read on every sample, cheaper than opening it
// again. A file that fills buf is an error.
//
// The pread is a raw system call: the runtime is not told that the
// thread may block, which a read of a cgroup file does not (it formats a
// few counters), and its bookkeeping for a call that may block costs
// about as much as the read, and wakes its monitor thread
// (internal/alarm).
func PreadAll(fd int, path string, buf []byte) ([]byte, error) {
	for {
		r, _, errno := unix.RawSyscall6(unix.SYS_PREAD64, uintptr(fd), uintptr(unsafe.Pointer(unsafe.SliceData(buf))), uintptr(len(buf)), 0, 0, 0)
		if errno == unix.EINTR {
			continue
		}
		if errno != 0 {
			return nil, &fs.PathError{Op: "read", Path: path, Err: errno}
		}
		n := int(r)
		if n == len(buf) {
			return nil, &fs.PathError{Op: "read", Path: path, Err: fmt.Errorf("longer than %d bytes", len(buf))}
		}
		return buf[:n], nil
	}
}

// preadFile is PreadAll of an open file, which it keeps open. Its
// descriptor is taken through the file's raw connection: File.Fd makes
// a system call (fcntl) on every use.
func preadFile(f *os.File, buf []byte) ([]byte, error) {
	rc, err := f.SyscallConn()
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", f.Name(), err)
	}
	var b []byte
	cerr := rc.Control(func(fd uintptr) { b, err = PreadAll(int(fd), f.Name(), buf) })
	if cerr != nil {
		return nil, fmt.Errorf("read %s: %w", f.Name(), cerr)
	}
	return b, err
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

func durUs(d time.Duration) string { return strconv.FormatInt(int64(d/time.Microsecond), 10) }

// runningRelease is the running kernel's release ("" when unknown).
func runningRelease() string {
	var u unix.Utsname
	if unix.Uname(&u) != nil {
		return ""
	}
	return unix.ByteSliceToString(u.Release[:])
}

// ParseKernelRelease extracts major and minor from a release such as "6.18.44-fc".
func ParseKernelRelease(rel string) (major, minor int, ok bool) {
	parts := strings.SplitN(rel, ".", 3)
	if len(parts) < 2 {
		return 0, 0, false
	}
	ma, err1 := strconv.Atoi(parts[0])
	mis := parts[1]
	for i, c := range mis {
		if c < '0' || c > '9' {
			mis = mis[:i]
			break
		}
	}
	mi, err2 := strconv.Atoi(mis)
	if err1 != nil || err2 != nil {
		return 0, 0, false
	}
	return ma, mi, true
}
