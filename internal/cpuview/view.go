// Package cpuview answers how many CPUs a process can really use, and gives
// programs that view.
//
// The answer joins what the kernel spreads over several places: the online
// CPUs, the process's affinity, its cpuset, and the CPU quota of its group
// and of every ancestor (the tightest wins), on cgroup v1 and v2. Resolve
// and ResolveCgroup build a View of it; the rounding rules turn its
// fractional CPU count into thread counts, as the common runtimes do.
//
// Exec prepares what a program is given to see that view: the variables that
// runtimes which bypass libc read (GOMAXPROCS, OMP_NUM_THREADS, ...), and an
// LD_PRELOAD library (native/cpuview, embedded at build time) for libc
// callers. docs/cpuview.md is the user's guide.
package cpuview

import (
	"errors"
	"fmt"
	"io/fs"
	"math/bits"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/cfsprobe/cfsprobe/internal/cgroup"
	"github.com/cfsprobe/cfsprobe/internal/hostfs"
)

// Schema is the value of the schema field of a View in JSON.
const Schema = "cfsprobe.cpuview/v1"

// CPUList is a set of CPUs as the kernel prints it, and where it was read.
type CPUList struct {
	List   string `json:"list"`
	Count  int    `json:"count"`
	Source string `json:"source,omitempty"`
	cpus   []int
}

// Level is one group on the way from the process's group up to the root
// of the mounted hierarchy.
type Level struct {
	Cgroup string `json:"cgroup"`
	Dir    string `json:"dir"`
	// QuotaNs is null when the level has no quota.
	QuotaNs  *int64 `json:"quota_ns"`
	PeriodNs int64  `json:"period_ns,omitempty"`
	// CPUs is quota/period, null without a quota.
	CPUs    *float64 `json:"cpus"`
	BurstNs int64    `json:"burst_ns"`
	// Shares (v1 cpu.shares) or Weight (v2 cpu.weight): relative, they
	// limit nothing when the CPUs are idle; shown because runtimes used to
	// read them (the JVM before JDK 19).
	Shares int64 `json:"shares,omitempty"`
	Weight int64 `json:"weight,omitempty"`
	// Tightest marks the level whose quota is the smallest in CPUs.
	Tightest bool `json:"tightest,omitempty"`
	// Error says why the level's quota could not be read (it is then
	// left out).
	Error string `json:"error,omitempty"`
}

// setLimits records the period, the burst and, when limited, the quota
// and its CPUs.
func (l *Level) setLimits(lim cgroup.Limits) {
	l.PeriodNs, l.BurstNs = int64(lim.Period), int64(lim.Burst)
	if !lim.Unlimited() {
		q, c := int64(lim.Quota), lim.CPUs()
		l.QuotaNs, l.CPUs = &q, &c
	}
}

func (l *Level) quota() (q, p int64, ok bool) {
	if l.QuotaNs == nil || l.PeriodNs <= 0 {
		return 0, 0, false
	}
	return *l.QuotaNs, l.PeriodNs, true
}

// View is what a process (or any process of a group) can use.
type View struct {
	Schema string `json:"schema"`
	// PID is the process looked at; 0 when a group was named instead.
	PID int `json:"pid,omitempty"`
	// Cgroup is the group in the cpu hierarchy, as in /proc/<pid>/cgroup.
	Cgroup string `json:"cgroup,omitempty"`
	// CgroupVersion is the version through which the cpu controller is
	// used (0: no cpu controller found).
	CgroupVersion int `json:"cgroup_version"`
	// MountRoot is the cgroup path mounted at the hierarchy's root: "/" on
	// a host. In a container it is the container's own group, and the
	// ancestors above it cannot be seen (AncestorsHidden).
	MountRoot       string `json:"mount_root,omitempty"`
	AncestorsHidden bool   `json:"ancestors_hidden,omitempty"`

	Online   CPUList  `json:"online"`
	Affinity *CPUList `json:"affinity"`
	Cpuset   *CPUList `json:"cpuset"`
	// UsableCPUs counts online ∩ affinity ∩ cpuset.
	UsableCPUs int `json:"usable_cpus"`

	// Levels go from the group up to the mount root.
	Levels []Level `json:"levels"`
	// QuotaCPUs is the tightest quota in CPUs, null when no level has one.
	QuotaCPUs *float64 `json:"quota_cpus"`
	// EffectiveCPUs = min(UsableCPUs, QuotaCPUs).
	EffectiveCPUs float64 `json:"effective_cpus"`
	// LimitedBy says what decides EffectiveCPUs: "quota", "cpuset",
	// "affinity" or "online".
	LimitedBy string `json:"limited_by"`

	Rules          []RuleResult   `json:"rules"`
	Recommendation Recommendation `json:"recommendation"`
	// Warnings say what could not be read and what was assumed instead.
	Warnings []string `json:"warnings"`

	// The tightest quota as integers, for exact rounding.
	quotaNs, periodNs int64
}

// InputError is a bad pid or group: one sentence saying what is wrong and
// how to fix it.
type InputError struct{ Err error }

func (e *InputError) Error() string { return e.Err.Error() }
func (e *InputError) Unwrap() error { return e.Err }

func inputErr(format string, a ...any) error { return &InputError{fmt.Errorf(format, a...)} }

// Resolve builds the view of process pid ("self" or a number) on the
// machine fs locates (hostfs.Default(); fixture trees in tests, the
// host's root mounted elsewhere in a container). Whatever cannot be read
// becomes a warning and the view falls back to the CPU count; only a pid
// that does not exist is an error (*InputError).
func Resolve(fs hostfs.FS, pid string) (*View, error) {
	v := &View{Schema: Schema}
	if pid == "self" {
		if t, err := os.Readlink(fs.Proc("self")); err == nil {
			v.PID, _ = parsePID(t)
		}
	} else {
		n, ok := parsePID(pid)
		if !ok {
			return nil, inputErr("--pid %q is not a process ID: give a positive number", pid)
		}
		// The files below are read as proc/<pid>/...: "007" or "+7"
		// would name no directory.
		pid = strconv.Itoa(n)
		if _, err := os.Stat(fs.Proc(pid)); err != nil {
			return nil, inputErr("no process %d (%s does not exist): give the ID of a running process", n, fs.Proc(pid))
		}
		v.PID = n
	}
	v.readOnline(fs)
	if a, err := ReadAffinity(fs, pid); err != nil {
		v.warn("cannot read the affinity of process %s (%v): assuming every online CPU", pid, err)
	} else {
		v.Affinity = a
	}

	layout, lerr := cgroup.Detect(fs)
	if layout == nil {
		v.warn("cannot read the mount table (%v): no cgroup limits are known", lerr)
		v.finish()
		return v, nil
	}
	groups, err := cgroup.ReadProcCgroup(fs, pid)
	if err != nil {
		v.warn("cannot read the cgroups of process %s (%v): no cgroup limits are known", pid, err)
		v.finish()
		return v, nil
	}
	if h := layout.CPUSet; h != nil {
		if p, ok := groupPath(groups, h, "cpuset"); ok {
			v.readCpuset(h, p)
		}
	}
	h := layout.CPU
	if h == nil {
		v.warn("no cgroup hierarchy has the cpu controller (%s): no quota applies", modeText(layout))
		v.finish()
		return v, nil
	}
	p, ok := groupPath(groups, h, "cpu")
	if !ok {
		v.warn("process %s is in no group of the cpu hierarchy: no quota is known", pid)
		v.finish()
		return v, nil
	}
	v.Cgroup, v.CgroupVersion = p, h.Version
	dir, ok := h.DirOf(p)
	if !ok {
		v.warn("group %s is outside what is mounted at %s (%s): its quota cannot be read here", p, h.Dir, h.Root)
		v.finish()
		return v, nil
	}
	v.walk(h, p, dir)
	v.finish()
	return v, nil
}

// ResolveCgroup builds the view of any process of a group, named by its
// path as in /proc/<pid>/cgroup ("/kubepods/...") or by its directory
// under the cgroup mount ("/sys/fs/cgroup/cpu/kubepods/..."). There is no
// process, so no affinity. An unknown group is an *InputError.
func ResolveCgroup(fs hostfs.FS, group string) (*View, error) {
	layout, err := cgroup.Detect(fs)
	if layout == nil || layout.CPU == nil {
		if err == nil {
			err = cgroup.ErrNoCPUController
		}
		return nil, inputErr("--cgroup needs the cgroup hierarchy of the cpu controller, but %v: look at a process with --pid instead", err)
	}
	h := layout.CPU
	p := cgroupPathOf(layout, fs, group)
	dir, ok := h.DirOf(p)
	if !ok {
		return nil, inputErr("group %s is outside what is mounted at %s (the mount shows %s): give a path below it", p, h.Dir, h.Root)
	}
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		return nil, inputErr("no group %s in the cpu hierarchy (%s does not exist): give a path as in /proc/PID/cgroup, e.g. /kubepods/..., or a directory under %s", p, dir, h.Dir)
	}
	v := &View{Schema: Schema, Cgroup: p, CgroupVersion: h.Version}
	v.readOnline(fs)
	if cs := layout.CPUSet; cs != nil {
		v.readCpuset(cs, p)
	}
	v.walk(h, p, dir)
	v.finish()
	return v, nil
}

// cgroupPathOf turns what the user gave into a cgroup path: a directory
// under one of the mounted hierarchies (with or without fs's root in
// front) becomes the path of that group; anything else is taken as a
// cgroup path already.
func cgroupPathOf(l *cgroup.Layout, fs hostfs.FS, group string) string {
	for _, h := range []*cgroup.Hierarchy{l.CPU, l.CPUSet, l.CPUAcct, l.Unified} {
		if h == nil {
			continue
		}
		root := filepath.Clean(h.Dir)
		for _, cand := range []string{filepath.Clean(group), fs.Path(group)} {
			if cand == root || strings.HasPrefix(cand, root+"/") {
				return path.Join("/", h.Root, strings.TrimPrefix(cand, root))
			}
		}
	}
	return path.Clean("/" + group)
}

// groupPath finds the process's group in hierarchy h: on v2 the "0::"
// line, on v1 the line that names the controller.
func groupPath(groups []cgroup.ProcCgroup, h *cgroup.Hierarchy, controller string) (string, bool) {
	for _, g := range groups {
		if h.Version == 2 && g.HierarchyID == 0 && len(g.Controllers) == 0 {
			return g.Path, true
		}
		if h.Version == 1 {
			for _, c := range g.Controllers {
				if c == controller {
					return g.Path, true
				}
			}
		}
	}
	return "", false
}

func modeText(l *cgroup.Layout) string {
	if l.Mode == cgroup.ModeNone {
		return "no cgroup filesystem is mounted"
	}
	return fmt.Sprintf("cgroup mode %s", l.Mode)
}

// walk reads the quota of the group at dir and of every ancestor up to
// the hierarchy's mounted root.
func (v *View) walk(h *cgroup.Hierarchy, p, dir string) {
	root := filepath.Clean(h.Dir)
	v.MountRoot = h.Root
	v.AncestorsHidden = h.Root != "/"
	dir = filepath.Clean(dir)
	for {
		v.Levels = append(v.Levels, readLevel(h.Version, p, dir))
		if dir == root || !strings.HasPrefix(dir, root+"/") {
			break
		}
		dir, p = filepath.Dir(dir), path.Dir(p)
	}
	// A cgroup namespace mounts the container's group as "/": on v2 the
	// real root has no cpu.max, so a root level with one is not the top.
	if last := v.Levels[len(v.Levels)-1]; h.Version == 2 && (last.QuotaNs != nil || last.Weight > 0) {
		v.AncestorsHidden = true
	}
	for i := range v.Levels {
		if e := v.Levels[i].Error; e != "" {
			v.warn("cannot read the quota of %s (%s): that level is left out", v.Levels[i].Cgroup, e)
		}
	}
}

func readLevel(version int, p, dir string) Level {
	l := Level{Cgroup: p, Dir: dir}
	lim, err := cgroup.ReadLimits(dir, version)
	switch {
	case err == nil:
		l.setLimits(lim)
	case version == 2 && errors.Is(err, fs.ErrNotExist):
		// The v2 root, or a group whose parent does not enable the cpu
		// controller for it: no quota at this level.
	default:
		l.Error = shortErr(err)
	}
	w, _ := cgroup.ReadWeight(dir, version)
	if version == 2 {
		l.Weight = w
	} else {
		l.Shares = w
	}
	return l
}

// shortErr drops the *PathError's operation ("open"), keeping the path
// and the reason.
func shortErr(err error) string {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Path + ": " + pe.Err.Error()
	}
	return err.Error()
}

func (v *View) readOnline(fs hostfs.FS) {
	p := fs.OnlineFile()
	l, err := readCPUListFile(p)
	if err != nil || l.Count == 0 {
		if err == nil {
			err = errors.New("empty")
		}
		v.warn("cannot read the online CPUs from %s (%v): counting on the affinity and cpuset alone", p, err)
		return
	}
	v.Online = *l
}

// readCpuset reads the CPUs of group p's cpuset: the effective list
// (v1 cpuset.effective_cpus, v2 cpuset.cpus.effective) or, on an old v1
// kernel, cpuset.cpus. A group without its own list (v2 without the
// cpuset controller enabled, an unset v1 list) has its parent's.
func (v *View) readCpuset(h *cgroup.Hierarchy, p string) {
	dir, ok := h.DirOf(p)
	if !ok {
		v.warn("cpuset group %s is outside what is mounted at %s: its CPUs are not known", p, h.Dir)
		return
	}
	names := []string{"cpuset.effective_cpus", "cpuset.cpus"}
	if h.Version == 2 {
		names = []string{"cpuset.cpus.effective"}
	}
	root := filepath.Clean(h.Dir)
	for dir = filepath.Clean(dir); ; dir = filepath.Dir(dir) {
		for _, n := range names {
			l, err := readCPUListFile(filepath.Join(dir, n))
			if errors.Is(err, fs.ErrNotExist) {
				continue
			}
			if err != nil {
				v.warn("cannot read the cpuset of %s (%s): its CPUs are not known", p, shortErr(err))
				return
			}
			if l.Count > 0 {
				v.Cpuset = l
				return
			}
		}
		if dir == root || !strings.HasPrefix(dir, root+"/") {
			return
		}
	}
}

func readCPUListFile(p string) (*CPUList, error) {
	b, err := os.ReadFile(p)
	if err != nil {
		return nil, err
	}
	s := strings.TrimSpace(string(b))
	cpus, err := cgroup.ParseCPUList(s)
	if err != nil {
		return nil, fmt.Errorf("parse %s (%q): %w", p, s, err)
	}
	return &CPUList{List: s, Count: len(cpus), Source: p, cpus: cpus}, nil
}

func (v *View) warn(format string, a ...any) {
	v.Warnings = append(v.Warnings, fmt.Sprintf(format, a...))
}

// finish computes the usable CPUs, the tightest quota, the effective CPUs,
// the rules and the recommendation.
func (v *View) finish() {
	v.UsableCPUs, v.LimitedBy = v.usable()
	best := -1
	for i := range v.Levels {
		q, p, ok := v.Levels[i].quota()
		if !ok {
			continue
		}
		// q/p < bq/bp, compared without rounding.
		if best < 0 || mulLess(q, v.periodNs, v.quotaNs, p) {
			best, v.quotaNs, v.periodNs = i, q, p
		}
	}
	v.EffectiveCPUs = float64(v.UsableCPUs)
	if best >= 0 {
		v.Levels[best].Tightest = true
		c := float64(v.quotaNs) / float64(v.periodNs)
		v.QuotaCPUs = &c
		if c < v.EffectiveCPUs {
			v.EffectiveCPUs, v.LimitedBy = c, "quota"
		}
	} else {
		w := "no CPU quota: the view is the CPU count"
		if len(v.Levels) == 0 {
			w = "no CPU quota is known: the view is the CPU count"
		}
		v.warn("%s (%d)", w, v.UsableCPUs)
	}
	if v.Warnings == nil {
		v.Warnings = []string{}
	}
	v.Rules = v.rules()
	v.Recommendation = v.recommend()
}

// mulLess reports whether a*b < c*d for non-negative values, exactly.
func mulLess(a, b, c, d int64) bool {
	h1, l1 := bits.Mul64(uint64(a), uint64(b))
	h2, l2 := bits.Mul64(uint64(c), uint64(d))
	return h1 < h2 || (h1 == h2 && l1 < l2)
}

// usable counts online ∩ affinity ∩ cpuset and says which of them is the
// smallest constraint.
func (v *View) usable() (int, string) {
	sets := []struct {
		name string
		l    *CPUList
	}{{"online", &v.Online}, {"affinity", v.Affinity}, {"cpuset", v.Cpuset}}
	var have map[int]bool
	by := "online"
	smallest := 0
	for _, s := range sets {
		if s.l == nil || s.l.Count == 0 {
			continue
		}
		if have == nil {
			have = map[int]bool{}
			for _, c := range s.l.cpus {
				have[c] = true
			}
			by, smallest = s.name, s.l.Count
			continue
		}
		next := map[int]bool{}
		for _, c := range s.l.cpus {
			if have[c] {
				next[c] = true
			}
		}
		if len(next) < smallest {
			by, smallest = s.name, len(next)
		}
		have = next
	}
	if have == nil { // neither the online list nor the affinity could be read
		return numCPU(), "online"
	}
	return max(len(have), 1), by
}
