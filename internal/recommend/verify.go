package recommend

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/cfsprobe/cfsprobe/internal/cgroup"
	"github.com/cfsprobe/cfsprobe/internal/cpuview"
	"github.com/cfsprobe/cfsprobe/internal/hostfs"
	"github.com/cfsprobe/cfsprobe/internal/lab"
	"github.com/cfsprobe/cfsprobe/internal/report"
	"github.com/cfsprobe/cfsprobe/internal/sim"
	"github.com/cfsprobe/cfsprobe/internal/trace"
	"github.com/cfsprobe/cfsprobe/internal/workload"
)

// VerifyOptions say where and how Verify reruns a workload.
type VerifyOptions struct {
	// Parent is the group under which each rerun's group is made
	// (cgroup.DefaultParent when empty).
	Parent string
	// FS is the machine whose cgroups are used (the zero FS: this one).
	FS hostfs.FS
	// Self is the cfsprobe executable that runs built-in workloads
	// (default: this executable).
	Self string
	// SampleInterval is how often the counters are read (0: the lab's
	// default, a tenth of the period).
	SampleInterval time.Duration
	// Stdout and Stderr receive the workload's output (nil: discarded).
	Stdout, Stderr io.Writer
	// Progress, when set, is called before each rerun: the i-th (from 0)
	// of n, under s.
	Progress func(i, n int, s Setting)
}

// Run is a workload rerun under a setting: what was measured.
type Run struct {
	Setting Setting
	// Trace is the rerun's, as cfsprobe run writes it; its spec says what
	// ran (a thread cap shows in its workload's threads or its view).
	Trace *trace.Trace
	// Warnings say what of the setting the rerun could not give the
	// workload exactly (a command's CPU view without the library, ...),
	// CapNotHeld among them.
	Warnings []string
	// CapNotHeld says that a command did not keep to the thread cap
	// ("" when it did, or there was none: capNotHeld).
	CapNotHeld string
}

// Rerunnable is nil when the workload of tr can be run again: a built-in
// workload (its spec's params, or for older traces its args) or a
// command. Otherwise it says in one sentence why not: a recorded live
// group, a synthetic trace and a simulated one have no program cfsprobe
// started.
func Rerunnable(tr *trace.Trace) error {
	sp := tr.Spec
	switch {
	case sp.Synthetic != "":
		return fmt.Errorf("the trace is synthetic (%s), not a run of a program: there is nothing to run again; verify a trace of `cfsprobe run` instead", sp.Synthetic)
	case sp.Simulated != nil:
		return fmt.Errorf("the trace of %q was written by the simulator, not measured: verify the trace of the run it was made from, or the workload run with `cfsprobe run`", sp.Workload)
	case sp.Workload == lab.Recorded:
		return errors.New("the trace is a recording of a live group, whose program cfsprobe did not start: run the program with `cfsprobe run -- COMMAND` to have a trace that can be run again")
	case sp.Workload == "command":
		if len(sp.Args) == 0 {
			return errors.New("the trace's spec has no command line to run again: it was not written by `cfsprobe run -- COMMAND`")
		}
		return nil
	}
	if _, err := builtin(sp); err != nil {
		return fmt.Errorf("the trace's workload cannot be run again: %w", err)
	}
	return nil
}

// builtin is the built-in workload a spec ran: from its params, or from
// its args in traces written before params were recorded.
func builtin(sp trace.Spec) (workload.Workload, error) {
	if sp.Params != nil {
		return workload.FromSpec(sp)
	}
	return workload.Parse(sp.Workload, sp.Args)
}

// Reference is the run a setting's op latency is compared with: the same
// workload, run as s runs it (the same thread cap: a capped built-in
// workload does each operation with fewer threads, so its operations are
// longer by construction), with no limit.
func Reference(s Setting) Setting {
	return Setting{Limits: cgroup.Limits{Period: s.Limits.Period, Cpuset: s.Limits.Cpuset}, Threads: s.Threads}
}

// Verify runs tr's workload again under s on a real cgroup, the way
// `cfsprobe run` does (internal/lab), and returns the rerun's trace. A
// setting with no limit runs unlimited: the reference run. A thread cap
// is given as the workload would be given it:
//
//   - a built-in workload runs with --threads at the cap, doing the same
//     work (workload.WithThreads: each operation of a periodic or bursty
//     workload is as many times longer as there were threads per thread
//     kept; parallel's --events count all threads' events);
//   - a command gets the CPU view of the cap (`cfsprobe run --view N`:
//     GOMAXPROCS and the other runtimes' variables, and the LD_PRELOAD
//     library for libc's count), so that it sizes its own thread pools for
//     that many CPUs.
//
// A command that ran with a view, under a setting without a thread cap,
// gets the view it ran with. The period of a setting without one is the
// trace's. Errors of the trace or the setting are *lab.UserError, and
// nothing is created for them.
func Verify(ctx context.Context, tr *trace.Trace, s Setting, opt VerifyOptions) (*trace.Trace, error) {
	runs, err := VerifyAll(ctx, tr, []Setting{s}, opt)
	if err != nil {
		return nil, err
	}
	return runs[0].Trace, nil
}

// VerifyAll reruns tr's workload under each setting in turn, as Verify
// does; every setting is checked before the first rerun starts. The runs
// are in the order of settings.
func VerifyAll(ctx context.Context, tr *trace.Trace, settings []Setting, opt VerifyOptions) ([]Run, error) {
	r, err := PrepareReruns(tr, settings, opt)
	if err != nil {
		return nil, err
	}
	return r.Run(ctx)
}

// Reruns are reruns of one trace's workload, checked and ready to run:
// nothing is created before Run.
type Reruns struct {
	plans []*lab.Plan
	runs  []Run
	opt   VerifyOptions
}

// PrepareReruns checks that tr's workload can be rerun under every
// setting, as Verify would, without creating anything: callers with
// several traces check them all before the first rerun starts. Its
// errors of the trace or a setting are *lab.UserError.
func PrepareReruns(tr *trace.Trace, settings []Setting, opt VerifyOptions) (*Reruns, error) {
	if err := Rerunnable(tr); err != nil {
		return nil, &lab.UserError{Err: err}
	}
	r := &Reruns{plans: make([]*lab.Plan, len(settings)), runs: make([]Run, len(settings)), opt: opt}
	for i, s := range settings {
		cfg, warnings, err := rerunConfig(tr, s, opt)
		if err != nil {
			return nil, &lab.UserError{Err: err}
		}
		if r.plans[i], err = lab.Prepare(cfg); err != nil {
			return nil, fmt.Errorf("rerun under %s: %w", s, err)
		}
		r.runs[i] = Run{Setting: s, Warnings: warnings}
	}
	return r, nil
}

// Run reruns the workload under each setting in turn; the runs are in
// the order of the settings.
func (r *Reruns) Run(ctx context.Context) ([]Run, error) {
	runs := slices.Clone(r.runs)
	for i, p := range r.plans {
		if r.opt.Progress != nil {
			r.opt.Progress(i, len(r.plans), runs[i].Setting)
		}
		t, err := p.Run(ctx)
		if err != nil {
			return nil, fmt.Errorf("rerun under %s: %w", runs[i].Setting, err)
		}
		runs[i].Trace = t
		if w := capNotHeld(runs[i].Setting, t); w != "" {
			runs[i].CapNotHeld, runs[i].Warnings = w, append(runs[i].Warnings, w)
		}
	}
	return runs, nil
}

// capNotHeld says, for a command rerun under a thread cap, when the cap
// did not hold: the command ran on more CPUs at once than the cap, as a
// replay reads its trace (sim.Parallelism). A command that sets its
// thread count itself (sysbench --threads=4, a worker-count flag) does
// not size it by the CPU view, and takes no cap from cfsprobe.
func capNotHeld(s Setting, t *trace.Trace) string {
	if s.Threads <= 0 || t == nil || t.Spec.Workload != "command" {
		return ""
	}
	par, from, err := sim.Parallelism(t)
	if err != nil || par <= s.Threads {
		return ""
	}
	return fmt.Sprintf("the thread cap did not hold: with a CPU view of %s the command ran on %s at once (from %s): it sets its thread count itself, so cap that (its threads or workers flag)",
		report.CPUs(float64(s.Threads)), report.CPUs(float64(par)), from)
}

// rerunConfig is the lab's configuration that runs tr's workload under
// s, and what the user should be told of it.
func rerunConfig(tr *trace.Trace, s Setting, opt VerifyOptions) (lab.Config, []string, error) {
	if s.Threads < 0 {
		return lab.Config{}, nil, fmt.Errorf("setting %s: a thread cap of %d is not one: give 1 or more, or 0 for none", s, s.Threads)
	}
	lim := s.Limits
	if lim.Period == 0 {
		lim.Period = tr.Limits.Cgroup().PeriodOrDefault()
	}
	cfg := lab.Config{
		Limits: lim, FS: opt.FS, Parent: opt.Parent, Self: opt.Self,
		SampleInterval: opt.SampleInterval, Stdout: opt.Stdout, Stderr: opt.Stderr,
	}
	if cfg.Parent == "" {
		cfg.Parent = cgroup.DefaultParent
	}
	if cfg.Stdout == nil {
		cfg.Stdout = io.Discard
	}
	if cfg.Stderr == nil {
		cfg.Stderr = io.Discard
	}
	sp := tr.Spec
	view := sp.View
	if sp.Workload == "command" {
		cfg.Command = append([]string{}, sp.Args...)
		if s.Threads > 0 {
			view = &trace.View{CPUs: s.Threads}
		}
	} else {
		w, err := builtin(sp)
		if err != nil {
			return cfg, nil, err
		}
		if s.Threads > 0 {
			if w, err = workload.WithThreads(w, s.Threads); err != nil {
				return cfg, nil, err
			}
		}
		cfg.Workload, cfg.WorkloadArgs = w.Name(), workload.Flags(w)
	}
	var warnings []string
	if view != nil {
		cpus := view.CPUs
		if view.Auto {
			cpus = 0
		}
		round, err := cpuview.ParseRounding(view.Round)
		if err != nil {
			round = cpuview.Floor
		}
		warnings = cfg.SetView(cpuview.ExecOptionsHere(cpus, round, opt.FS))
	}
	return cfg, warnings, nil
}
