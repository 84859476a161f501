package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"golang.org/x/sys/unix"

	"github.com/cfsprobe/cfsprobe/internal/cgroup"
	"github.com/cfsprobe/cfsprobe/internal/cpuview"
	"github.com/cfsprobe/cfsprobe/internal/lab"
	"github.com/cfsprobe/cfsprobe/internal/report"
	"github.com/cfsprobe/cfsprobe/internal/trace"
	"github.com/cfsprobe/cfsprobe/internal/workload"
)

type runFlags struct {
	limitFlags
	outputFlags
	parent         string
	roots          hostRoots
	sampleInterval time.Duration
	view           string
	viewRound      string
}

// limitFlags are a group's limits as run and simulate take them.
type limitFlags struct {
	cpus          float64
	quota, period time.Duration
	burst         time.Duration
	cpuset        string
}

func (f *limitFlags) add(fl *pflag.FlagSet) {
	fl.Float64Var(&f.cpus, "cpus", 0, "CPU limit in CPUs: quota = cpus x period (like docker --cpus)")
	fl.DurationVar(&f.quota, "quota", 0, "CPU time per period (cpu.cfs_quota_us / cpu.max), e.g. 20ms")
	fl.DurationVar(&f.period, "period", cgroup.DefaultPeriod, "enforcement period, 1ms to 1s")
	fl.DurationVar(&f.burst, "burst", 0, "CPU time a period may borrow from earlier idle ones, at most the quota")
	fl.StringVar(&f.cpuset, "cpuset", "", "CPUs the group may use, e.g. 0 or 0-1")
}

// outputFlags say where run and simulate put the trace.
type outputFlags struct {
	json   bool
	out    string
	report string
}

// add defines the flags; jsonUsage is --json's help, of what the trace
// is of ("run", "recording") for --report's.
func (f *outputFlags) add(fl *pflag.FlagSet, jsonUsage, of string) {
	fl.BoolVar(&f.json, "json", false, jsonUsage)
	fl.StringVarP(&f.out, "out", "o", "", "save the trace to this file")
	fl.StringVar(&f.report, "report", "", "write a report of the "+of+": FILE.html (charts), .md, .json or .txt")
}

// check fails before anything runs when the trace or the report could
// not be written.
func (f *outputFlags) check() error {
	if f.out != "" {
		if err := checkWritable(f.out); err != nil {
			return usageErr("cannot write the trace to %s: %v", f.out, err)
		}
	}
	return checkReportPath(f.report)
}

// write saves the trace to --out (if given), writes its report (if
// given), and prints it: as JSON with --json, else its summary.
func (f *outputFlags) write(c *cobra.Command, tr *trace.Trace) error {
	if f.out != "" {
		if err := tr.WriteFile(f.out); err != nil {
			return err
		}
	}
	if f.report != "" {
		if err := saveReport(f.report, "", []*trace.Trace{tr}); err != nil {
			return err
		}
	}
	if f.json {
		return tr.Write(c.OutOrStdout())
	}
	report.Summary(c.OutOrStdout(), tr)
	if f.out != "" {
		fmt.Fprintf(c.OutOrStdout(), "trace      %s\n", f.out)
	}
	return nil
}

func newRunCmd() *cobra.Command {
	f := &runFlags{}
	c := &cobra.Command{
		Use:   "run [LIMITS] WORKLOAD [WORKLOAD FLAGS] | run [LIMITS] -- COMMAND [ARGS...]",
		Short: "run a workload in a fresh cgroup with CPU limits and record a trace",
		Long: `Creates a transient cgroup (under cfsprobe/ in the cpu hierarchy), gives it the
limits, starts the workload inside it from its first instruction, reads the
group's counters ten times per period, and removes the group when the workload
ends (also on Ctrl-C or SIGTERM). Without limits the workload still runs in its
own group, as an unlimited baseline measured the same way.

The trace holds a per-period timeline (CPU used, throttled or not, stall time),
the latency of every operation of a built-in workload, and a summary whose
counters are the kernel's (nr_periods, nr_throttled, throttled time).

Built-in workloads (cfsprobe run WORKLOAD --help for their flags):
` + workloadTable(workload.Names(), workload.Summary) + `
Any other program runs after --; its output still reaches the terminal.

--view N|auto gives the workload the CPU view of cfsprobe exec (see its
--help): N CPUs, or with auto the run's quota rounded by --view-round (floor by
default), through the runtimes' variables and the LD_PRELOAD library. The
trace's spec records it.`,
		Example: `  cfsprobe run --cpus 0.2 periodic --burn 5ms --sleep 100ms --iterations 50
  cfsprobe run --cpus 0.2 bursty --on 50ms --off 50ms --duration 5s
  cfsprobe run --cpus 1 --json parallel --threads 2 --duration 5s > trace.json
  cfsprobe run --quota 20ms --period 100ms --burst 20ms bursty --on-cpu 30ms --off 137ms
  cfsprobe run --cpus 1 -- sysbench --threads=4 --time=5 cpu run
  cfsprobe run --cpus 1.5 --view auto -- python3 -c 'import os; print(os.cpu_count())'`,
		Args: cobra.ArbitraryArgs,
		RunE: func(c *cobra.Command, args []string) error { return runRun(c, f, args) },
	}
	c.Flags().SetInterspersed(false)
	fl := c.Flags()
	f.limitFlags.add(fl)
	f.outputFlags.add(fl, "print the trace as JSON on stdout (workload output goes to stderr)", "run")
	fl.StringVar(&f.parent, "parent", cgroup.DefaultParent, "group under which the run's group is created")
	f.roots.addFlags(fl)
	fl.StringVar(&f.view, "view", "", "give the workload a view of N CPUs, or auto: the run's quota rounded by --view-round (as cfsprobe exec does; see its --help)")
	fl.StringVar(&f.viewRound, "view-round", string(cpuview.Floor), "how --view auto rounds a fractional quota: ceil, floor or nearest")
	fl.DurationVar(&f.sampleInterval, "sample-interval", 0, "how often to read the counters (default period/10, at most 10ms)")
	_ = fl.MarkHidden("sample-interval")
	return c
}

func (f *limitFlags) limits(c *cobra.Command) (cgroup.Limits, error) {
	l := cgroup.Limits{Period: f.period, Burst: f.burst, Cpuset: f.cpuset}
	var err error
	switch cpusSet, quotaSet := c.Flags().Changed("cpus"), c.Flags().Changed("quota"); {
	case cpusSet && quotaSet:
		return l, usageErr("give --cpus or --quota, not both")
	case cpusSet:
		var cl cgroup.Limits
		cl, err = cgroup.CPULimits(f.cpus, f.period)
		l.Quota = cl.Quota
	case quotaSet && f.quota == 0:
		return l, usageErr("--quota 0s is no quota: leave it out for no limit")
	case quotaSet:
		l.Quota = f.quota
	}
	if err == nil {
		err = l.Validate()
	}
	if err != nil {
		return l, limitErr(err, f.given(c))
	}
	return l, nil
}

// given is --cpus when it was given (it made the quota), else nil: for
// limitErr.
func (f *limitFlags) given(c *cobra.Command) *float64 {
	if c.Flags().Changed("cpus") {
		return &f.cpus
	}
	return nil
}

// prepareErr says an error of lab.Prepare in run's words.
func (f *runFlags) prepareErr(c *cobra.Command, err error) error {
	return limitErr(sampleIntervalErr(err), f.given(c))
}

func runRun(c *cobra.Command, f *runFlags, args []string) error {
	lim, err := f.limits(c)
	if err != nil {
		return err
	}
	if err := checkParent(f.parent); err != nil {
		return err
	}
	cfg := lab.Config{
		Limits: lim, Parent: f.parent, FS: f.roots.FS(),
		Stdout: os.Stdout, Stderr: os.Stderr, Stdin: os.Stdin, SampleInterval: f.sampleInterval,
	}
	if f.json {
		cfg.Stdout = os.Stderr // stdout carries the trace
	}
	if c.ArgsLenAtDash() == 0 && len(args) > 0 {
		cfg.Command = args
	} else if len(args) == 0 {
		return usageErr("no workload: name one of %s, or give -- COMMAND ARGS... (see: cfsprobe run --help)", strings.Join(workload.Names(), ", "))
	}
	if err := f.applyView(c, &cfg); err != nil {
		return err
	}
	if cfg.Command == nil {
		if cfg.Workload, cfg.WorkloadArgs, err = workloadArgs(c, args); err != nil {
			return err
		}
	}
	plan, err := lab.Prepare(cfg)
	if err != nil {
		var he *workload.HelpError
		if errors.As(err, &he) {
			fmt.Fprint(c.OutOrStdout(), he.Text)
			return nil
		}
		return f.prepareErr(c, err)
	}
	if err := f.outputFlags.check(); err != nil { // fail before running, not after
		return err
	}
	ctx, sig, stop := signalContext()
	defer stop()
	tr, err := plan.Run(ctx)
	if errors.Is(err, lab.ErrInterrupted) {
		return interrupted(sig(), "the workload was killed and its cgroup removed")
	}
	if err != nil {
		return err
	}
	if err := f.outputFlags.write(c, tr); err != nil {
		return err
	}
	if tr.Spec.Workload == "command" && tr.Process.ExitCode > 0 {
		return &exitError{tr.Process.ExitCode, nil}
	}
	return nil
}

// workloadTable lists workloads for a --help: name and summary.
func workloadTable(names []string, summary func(string) string) string {
	var b strings.Builder
	for _, n := range names {
		fmt.Fprintf(&b, "  %-9s %s\n", n, summary(n))
	}
	return b.String()
}

// workloadArgs reads the arguments of run or simulate that name a
// built-in workload: its name and its flags. A flag of the command after
// the workload's name (which the workload does not have) is an error.
func workloadArgs(c *cobra.Command, args []string) (name string, flags []string, err error) {
	name, flags = args[0], args[1:]
	if dash := c.ArgsLenAtDash(); dash > 0 { // "periodic -- --burn 5ms": the dash is not a command here
		flags = append(args[1:dash:dash], args[dash:]...)
	}
	for _, a := range flags {
		flag, _, _ := strings.Cut(strings.TrimLeft(a, "-"), "=")
		// --help after the workload is the workload's (its usage).
		if strings.HasPrefix(a, "--") && flag != "help" && c.Flags().Lookup(flag) != nil && !workload.HasFlag(name, flag) {
			return "", nil, usageErr("%s is a flag of %s, not of the %s workload: put it before the workload's name", a, c.CommandPath(), name)
		}
	}
	return name, flags, nil
}

// checkWritable tells whether the trace could be written to path, without
// creating the file: a run that fails or is interrupted leaves nothing.
func checkWritable(path string) error {
	if fi, err := os.Stat(path); err == nil {
		if fi.IsDir() {
			return errors.New("it is a directory: give a file name")
		}
		fh, err := os.OpenFile(path, os.O_WRONLY, 0) // neither creates nor truncates
		if err != nil {
			return fmt.Errorf("%w: choose another path", err)
		}
		return fh.Close()
	}
	dir := filepath.Dir(path)
	if err := unix.Access(dir, unix.W_OK|unix.X_OK); err != nil {
		return fmt.Errorf("directory %s is not usable (%v): create it or choose another path", dir, err)
	}
	return nil
}

// applyView gives the workload the CPU view of --view: the environment
// cfsprobe exec would set, recorded in the trace's spec.
func (f *runFlags) applyView(c *cobra.Command, cfg *lab.Config) error {
	if !c.Flags().Changed("view") {
		if c.Flags().Changed("view-round") {
			return usageErr("--view-round rounds --view auto: add --view auto")
		}
		return nil
	}
	opts, err := viewOptions("--view", f.view, "--view-round", f.viewRound, f.roots.FS())
	if err != nil {
		return err
	}
	for _, w := range cfg.SetView(opts) {
		fmt.Fprintln(os.Stderr, "cfsprobe run: warning: --view:", w)
	}
	return nil
}
