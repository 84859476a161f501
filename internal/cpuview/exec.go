package cpuview

import (
	"fmt"
	"os"

	"github.com/cfsprobe/cfsprobe/internal/cgroup"
	"github.com/cfsprobe/cfsprobe/internal/hostfs"
	"github.com/cfsprobe/cfsprobe/internal/trace"
)

// ExecOptions say which view a program is given.
type ExecOptions struct {
	// CPUs is the view; 0 means auto: derived from the limits and
	// rounded by Round.
	CPUs  int
	Round Rounding
	// Limits, when set, are those of a group the program will be started
	// in (cfsprobe run --view); auto then rounds their quota. Otherwise
	// auto resolves the calling process's own view, and the library
	// follows its groups' quotas.
	Limits *cgroup.Limits
	// FS is the machine whose /proc, /sys and cgroup mounts are read (the
	// zero FS: this one).
	FS hostfs.FS
	// Environ is the environment to merge into (os.Environ()).
	Environ []string
	Debug   bool
	// Library is the LD_PRELOAD library's content (Library()); nil: the
	// binary has none, and only the variables are set.
	Library []byte
	// CacheDirs are where the library is written (CacheDirs(os.Getenv)).
	CacheDirs []string
}

// ExecOptionsHere are the options for a program this process starts: a
// view of cpus CPUs (0: auto, rounded by round) on the machine fs, merged
// into this process's environment, with the library this binary carries,
// written to the usual cache directories.
func ExecOptionsHere(cpus int, round Rounding, fs hostfs.FS) ExecOptions {
	return ExecOptions{
		CPUs: cpus, Round: round, FS: fs, Environ: os.Environ(),
		Library: Library(), CacheDirs: CacheDirs(os.Getenv),
	}
}

// ExecPlan is what a program is given.
type ExecPlan struct {
	CPUs int
	Auto bool
	// Round is how auto rounded.
	Round Rounding
	// View is the view auto was derived from (nil for a given count).
	View     *View
	Settings Settings
	// Env is the whole environment for the program; Changes what was set
	// or kept in it.
	Env     []string
	Changes []Change
	// Library is where the library was written ("" without one).
	Library string
	// Warnings say what is missing and what was done instead; the program
	// runs all the same.
	Warnings []string
	// environ is what Env was merged into (ExecOptions.Environ).
	environ []string
}

// PrepareExec works out the view and the environment. It never fails for
// lack of information: missing cgroup files give the CPU count and a
// warning, a missing library gives the variables alone and a warning.
func PrepareExec(o ExecOptions) *ExecPlan {
	if o.Round == "" {
		o.Round = Floor
	}
	p := &ExecPlan{CPUs: o.CPUs, Auto: o.CPUs == 0, Round: o.Round, environ: o.Environ}
	var v *View
	if o.Limits != nil {
		v = ForLimits(o.FS, *o.Limits)
	} else {
		var err error
		v, err = Resolve(o.FS, "self")
		if err != nil { // /proc/self always exists; keep the program running regardless
			v = &View{UsableCPUs: numCPU(), Warnings: []string{err.Error()}}
		}
	}
	s := Settings{Debug: o.Debug}
	if p.Auto {
		p.View = v
		p.Warnings = append(p.Warnings, v.Warnings...)
		p.CPUs = v.Threads(o.Round)
		if o.Limits == nil {
			s.Follow, s.Round = followDirs(v, &p.Warnings), o.Round
		}
	} else if p.CPUs > v.UsableCPUs && v.UsableCPUs > 0 {
		p.Warnings = append(p.Warnings, fmt.Sprintf("--cpus %d is more than the %d CPUs this process may use: the view is %d CPUs", p.CPUs, v.UsableCPUs, v.UsableCPUs))
		p.CPUs = v.UsableCPUs
	}
	s.CPUs = p.CPUs
	if o.Library == nil {
		p.Warnings = append(p.Warnings, ErrNoLibrary.Error())
	} else if lib, err := ExtractLibrary(o.Library, o.CacheDirs); err != nil {
		p.Warnings = append(p.Warnings, fmt.Sprintf("%v: programs that ask libc still see every CPU", err))
	} else {
		p.Library, s.Library = lib, lib
	}
	p.Settings = s
	p.Env, p.Changes = Merge(o.Environ, s)
	return p
}

// followDirs lists the levels whose quota files could be read, for the
// library to follow.
func followDirs(v *View, warnings *[]string) []FollowDir {
	var dirs []FollowDir
	for _, l := range v.Levels {
		if l.Error == "" && l.PeriodNs > 0 {
			dirs = append(dirs, FollowDir{Version: v.CgroupVersion, Dir: l.Dir})
		}
	}
	if _, err := FollowValue(dirs); err != nil {
		*warnings = append(*warnings, fmt.Sprintf("%v: the view is fixed at start and does not follow quota changes", err))
		return nil
	}
	return dirs
}

// TraceView is how the plan is recorded in a trace's spec.
func (p *ExecPlan) TraceView() *trace.View {
	tv := &trace.View{CPUs: p.CPUs, Auto: p.Auto, Library: p.Library != "", Env: Assignments(p.Changes)}
	if p.Auto {
		tv.Round = string(p.Round)
	}
	return tv
}

// ForLimits is the view a program will have in a new group with the given
// limits, started by the calling process: the online CPUs, this process's
// affinity (the program inherits it), the limits' cpuset or else this
// process's, and the limits' quota as the only level.
func ForLimits(fs hostfs.FS, lim cgroup.Limits) *View {
	self, err := Resolve(fs, "self")
	v := &View{Schema: Schema, Cgroup: "(the run's group)"}
	if err == nil {
		v.Online, v.Affinity, v.Cpuset = self.Online, self.Affinity, self.Cpuset
		v.CgroupVersion = self.CgroupVersion
	}
	if lim.Cpuset != "" {
		if cpus, err := cgroup.ParseCPUList(lim.Cpuset); err == nil && len(cpus) > 0 {
			v.Cpuset = &CPUList{List: lim.Cpuset, Count: len(cpus), cpus: cpus}
		}
	}
	l := Level{Cgroup: v.Cgroup}
	l.setLimits(lim)
	v.Levels = []Level{l}
	v.finish()
	return v
}
