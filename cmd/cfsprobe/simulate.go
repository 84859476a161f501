package main

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/cfsprobe/cfsprobe/internal/cgroup"
	"github.com/cfsprobe/cfsprobe/internal/hostfs"
	"github.com/cfsprobe/cfsprobe/internal/lab"
	"github.com/cfsprobe/cfsprobe/internal/sim"
	"github.com/cfsprobe/cfsprobe/internal/workload"
)

type simulateFlags struct {
	limitFlags
	outputFlags
	simFlags
	phase   time.Duration
	wakeups time.Duration
}

// simFlags are the model of simulate and suite --simulate.
type simFlags struct {
	kernel   string
	hostCPUs int
	seed     uint64
	costs    sim.Costs // --event-cpu, --start-cpu, --exit-cpu, --thread-cpu, --wake-cpu, --wake-cpu-mid, --wake-cpu-long, --sleep-late
	// eventQuantiles is --event-cpu-quantiles, made costs.EventSpread by model.
	eventQuantiles []time.Duration
}

func (f *simFlags) add(fl *pflag.FlagSet) {
	fl.StringVar(&f.kernel, "kernel", "", "kernel era to model: "+sim.EraNames()+" (default: this host's kernel's)")
	fl.IntVar(&f.hostCPUs, "host-cpus", 0, "CPUs of the simulated host (default: this host's)")
	fl.Uint64Var(&f.seed, "seed", 1, "seed of the model's randomness: the same seed gives the same trace")
	fl.DurationVar(&f.costs.Event, "event-cpu", 0, "parallel: CPU time of every event (default: measured on this host, with how it spreads)")
	fl.DurationSliceVar(&f.eventQuantiles, "event-cpu-quantiles", nil, "parallel: an event's CPU time at quantiles "+eventQuantileNames()+fmt.Sprintf(" (`D1,...,D%d`), increasing,", len(sim.EventQuantiles))+" as spec.simulated.event_cpu_quantiles records it; each event's is drawn between them (default: measured on this host)")
	fl.Lookup("event-cpu-quantiles").DefValue = ""
	fl.DurationVar(&f.costs.Start, "start-cpu", 0, "CPU time of the workload process's start, before its clock starts (default: 1ms; suite --compare: each measured run's)")
	fl.DurationVar(&f.costs.Exit, "exit-cpu", 0, "CPU time of the workload process's exit, after its last operation (default: none; suite --compare: each measured run's)")
	fl.DurationVar(&f.costs.Thread, "thread-cpu", 0, "CPU time each of the workload's threads costs beside its operations and sleeps, its making, end and join, burnt before its first operation (default: none; suite --compare: measured on this host)")
	fl.DurationVar(&f.costs.Wake, "wake-cpu", 0, "CPU time a thread spends around each sleep (default: none; suite --compare: measured on this host)")
	fl.DurationVar(&f.costs.SleepLate, "sleep-late", 0, "how late a sleep ends: the timer's slack and the wake-up (default: "+sim.DefaultSleepLate.String()+"; suite --compare: measured on this host)")
	fl.DurationVar(&f.costs.WakeMid, "wake-cpu-mid", 0, "CPU time a thread spends around a sleep of 50ms, interpolated on a log scale of the sleep from --wake-cpu's at 1ms to it and from it to --wake-cpu-long's (default: interpolated between those two; suite --compare: measured on this host)")
	fl.DurationVar(&f.costs.ResumeLate, "resume-late", 0, "how long after the refill that unthrottles it a throttled thread runs again: its idle CPU's wake-up (default: at once; suite --compare: measured on this host)")
	fl.DurationVar(&f.costs.WakeLong, "wake-cpu-long", 0, "CPU time a thread spends around a sleep of 1s or more, interpolated from --wake-cpu's at 1ms (or --wake-cpu-mid's at 50ms) on a log scale of the sleep (default: --wake-cpu's; suite --compare: measured on this host)")
}

// simFlagNames are simFlags' flags.
var simFlagNames = []string{"kernel", "host-cpus", "seed", "event-cpu", "event-cpu-quantiles", "start-cpu", "exit-cpu", "thread-cpu", "wake-cpu", "wake-cpu-mid", "wake-cpu-long", "sleep-late", "resume-late"}

func newSimulateCmd() *cobra.Command {
	f := &simulateFlags{}
	c := &cobra.Command{
		Use:   "simulate [LIMITS] [--kernel ERA] [--host-cpus N] WORKLOAD [WORKLOAD FLAGS]",
		Short: "predict what CPU limits do to a workload: simulate the kernel's bandwidth control and write a trace",
		Long: `Runs a built-in workload on a model of the kernel's CPU bandwidth controller
instead of a real cgroup: the group's pool refilled every period, the per-CPU
slices of it, throttling and unthrottling, as a kernel of the chosen era does
it, on a host of --host-cpus CPUs. Nothing is created and nothing needs root:
it answers "what will this limit do?" for a machine you do not have, or a
kernel you do not run, in a fraction of the time.

The flags are cfsprobe run's (the limits before the workload's name, the
workload's own after it), and the output is the same trace, marked simulated
(spec.simulated holds the model's parameters): print it with --json, save it
with --out, render it with --report or cfsprobe report.

--kernel ERA picks the model (default: the era of this host's kernel):
  3.16  local slices effectively never expire
  4.18  per-period expiry: runtime left on a CPU that went idle is lost
  5.4   expiry removed
  5.14  CPU burst (--burst)
  6.18  task-based throttling: a throttled task stops at its next return to user space

Workloads (cfsprobe simulate WORKLOAD --help for their flags):
` + workloadTable(sim.Workloads(), sim.Summary) + `
The parallel workload's events cost what they take on this host: 2000 of them
are timed before the simulation (for 3 s at most), and each simulated event's
time is drawn from how theirs spread (under emulation one in a hundred takes
half as long again as the median), unless --event-cpu gives every event's or
--event-cpu-quantiles their spread.
What the workload's process costs beside its operations is 1 ms for its
start (--start-cpu), nothing for its exit (--exit-cpu), for each thread's
making and end (--thread-cpu) or around its sleeps (--wake-cpu) unless given: a
virtual machine's wake-up costs about 25us, and under emulation a start costs
5 to 6 ms and a wake-up 70 to 90us. cfsprobe suite --compare gives each
simulation the start and exit its measured run's workload reported, and a
thread's making and wake-ups as measured on this host, as its runs are
charged them.

A throttled thread runs again at the refill unless --resume-late says how
long after it: its CPU sat idle while throttled, and the refill's unthrottle
wakes it (about 50us on this kind of virtual machine, a few tenths of a
millisecond under emulation). cfsprobe suite --compare measures it on this
host.

Where the period boundaries fall against the workload is chance on a real
kernel: a new group's periods end at multiples of the period on the kernel's
clock before Linux 6.4, and from 6.4 at a random offset from them, drawn when
the group is made. The simulation draws it from --seed; --phase gives it (when the first
period ends after the start), as spec.simulated.phase_ns records it. A burst
that a boundary cuts in two is throttled less than one inside a period:
bursty's first 50ms burst under --cpus 0.5 is throttled up to 50ms or not at
all, by the phase alone. cfsprobe suite --compare gives each simulation the
phase its measured run had.

The simulated host is otherwise idle unless --wakeups D says that another task
wakes on one of the group's CPUs every D on average (spread over half to one
and a half of it) and holds it for 12us: a thread of the group running there is
charged and, once it has had its timeslice, gives way to another waiting on
that CPU, between two ticks. cfsprobe run's own reader of the counters does
that every sample interval (10ms at the default period), and cfsprobe suite
--compare simulates it.

spec.simulated records what was used. The same --seed gives the same trace.`,
		Example: `  cfsprobe simulate --cpus 0.2 bursty --on 50ms --off 50ms --duration 5s
  cfsprobe simulate --kernel 4.18 --host-cpus 64 --quota 10ms parallel --threads 64 --duration 5s
  # 64 threads that wake, work 200us and sleep, on a 64-CPU host: compare the
  # eras (4.18 loses the runtime left on CPUs that went idle: 85% of the quota
  # used, p99 94ms; 5.4: 100%, p99 75ms)
  cfsprobe simulate --kernel 4.18 --host-cpus 64 --quota 50ms bursty --threads 64 --on-cpu 200us --off 20ms --duration 5s
  cfsprobe simulate --kernel 5.4 --host-cpus 64 --quota 50ms bursty --threads 64 --on-cpu 200us --off 20ms --duration 5s
  cfsprobe simulate --kernel 5.14 --quota 20ms --burst 20ms --report burst.html bursty --on-cpu 30ms --off 177ms --duration 30s
  cfsprobe simulate --cpus 1 --json parallel --threads 4 --duration 5s > predicted.json
  # the first burst throttled for 44ms, and not at all
  cfsprobe simulate --cpus 0.5 --phase 96ms bursty --on 50ms --off 50ms --duration 1s
  cfsprobe simulate --cpus 0.5 --phase 30ms bursty --on 50ms --off 50ms --duration 1s`,
		Args: cobra.ArbitraryArgs,
		RunE: func(c *cobra.Command, args []string) error { return runSimulate(c, f, args) },
	}
	c.Flags().SetInterspersed(false)
	fl := c.Flags()
	f.limitFlags.add(fl)
	f.outputFlags.add(fl, "print the trace as JSON on stdout", "run")
	f.simFlags.add(fl)
	fl.DurationVar(&f.phase, "phase", 0, "when the first period ends after the start, up to the period (default: drawn from --seed)")
	fl.DurationVar(&f.wakeups, "wakeups", 0, "another task wakes on the group's CPUs this often on average, as cfsprobe run's reader does (default: never)")
	return c
}

func runSimulate(c *cobra.Command, f *simulateFlags, args []string) error {
	lim, err := f.limits(c)
	if err != nil {
		return err
	}
	if c.ArgsLenAtDash() == 0 && len(args) > 0 {
		return usageErr("a program (-- COMMAND) cannot be simulated: name a built-in workload, one of %s", strings.Join(sim.Workloads(), ", "))
	}
	if len(args) == 0 {
		return usageErr("no workload: name one of %s (see: cfsprobe simulate --help)", strings.Join(sim.Workloads(), ", "))
	}
	name, wargs, err := workloadArgs(c, args)
	if err != nil {
		return err
	}
	era, cpus, err := f.model(c)
	if err != nil {
		return err
	}
	if c.Flags().Changed("phase") {
		switch {
		case lim.Unlimited():
			return usageErr("--phase %v: without a limit there are no periods to place; give a limit (--cpus or --quota) or leave --phase out", f.phase)
		case f.phase <= 0 || f.phase > lim.PeriodOrDefault():
			return usageErr("--phase %v: give when the first period ends after the start, above 0 and up to the period (%v)", f.phase, lim.PeriodOrDefault())
		}
	}
	if f.wakeups != 0 && f.wakeups < sim.MinWakeups {
		return usageErr("--wakeups %v: give how often another task wakes, %v or more (or leave --wakeups out: never)", f.wakeups, sim.MinWakeups)
	}
	plan, err := sim.Prepare(sim.Setup{
		Workload: name, Args: wargs, Limits: lim, Era: era, CPUs: cpus,
		Seed: f.seed, Costs: f.costs, Phase: f.phase, Wakeups: f.wakeups, Version: lab.Version,
	})
	if err != nil {
		var he *workload.HelpError
		if errors.As(err, &he) {
			fmt.Fprint(c.OutOrStdout(), he.Text)
			return nil
		}
		return f.prepareErr(c, err)
	}
	if err := f.outputFlags.check(); err != nil {
		return err
	}
	tr, err := plan.Run()
	if err != nil {
		return err
	}
	return f.outputFlags.write(c, tr)
}

// model reads the flags: the era (--kernel, or this host kernel's) and
// the simulated host's CPUs (--host-cpus, or this host's).
func (f *simFlags) model(c *cobra.Command) (sim.Era, int, error) {
	cpus := f.hostCPUs
	switch {
	case !c.Flags().Changed("host-cpus"):
		cpus = cgroup.OnlineCPUs(hostfs.Default())
	case cpus < 1 || cpus > sim.MaxCPUs:
		return "", 0, usageErr("--host-cpus %d: give the simulated host's CPUs, 1 to %d", cpus, sim.MaxCPUs)
	}
	if c.Flags().Changed("event-cpu") && f.costs.Event <= 0 {
		return "", 0, usageErr("--event-cpu %v: give the CPU time of one event, such as 250us, or leave it out to measure it", f.costs.Event)
	}
	if c.Flags().Changed("event-cpu-quantiles") {
		if err := f.eventSpread(c); err != nil {
			return "", 0, err
		}
	}
	if c.Flags().Changed("start-cpu") && f.costs.Start <= 0 {
		return "", 0, usageErr("--start-cpu %v: give the CPU time of the workload process's start, such as 1ms, or leave it out to measure it", f.costs.Start)
	}
	if f.costs.Exit < 0 {
		return "", 0, usageErr("--exit-cpu %v: give the CPU time of the workload process's exit, such as 300us, or leave it out for none", f.costs.Exit)
	}
	if c.Flags().Changed("sleep-late") && f.costs.SleepLate <= 0 {
		return "", 0, usageErr("--sleep-late %v: give how late a sleep ends, such as 130us, or leave it out for the default", f.costs.SleepLate)
	}
	if f.costs.ResumeLate < 0 {
		return "", 0, usageErr("--resume-late %v: give how late a throttled thread runs again after the refill, such as 50us, or leave it out for at once", f.costs.ResumeLate)
	}
	if f.costs.Thread < 0 {
		return "", 0, usageErr("--thread-cpu %v: give the CPU time one of the workload's threads costs beside its operations, such as 100us, or leave it out for none", f.costs.Thread)
	}
	if c.Flags().Changed("wake-cpu") && f.costs.Wake <= 0 {
		return "", 0, usageErr("--wake-cpu %v: give the CPU time of a thread's wake-up, such as 25us, or leave it out to measure it", f.costs.Wake)
	}
	if c.Flags().Changed("wake-cpu-mid") && f.costs.WakeMid <= 0 {
		return "", 0, usageErr("--wake-cpu-mid %v: give the CPU time of a thread's wake-up from a sleep of 50ms, such as 40us, or leave it out to measure it", f.costs.WakeMid)
	}
	if c.Flags().Changed("wake-cpu-long") && f.costs.WakeLong <= 0 {
		return "", 0, usageErr("--wake-cpu-long %v: give the CPU time of a thread's wake-up from a sleep of 1s or more, such as 70us, or leave it out to measure it", f.costs.WakeLong)
	}
	if c.Flags().Changed("kernel") {
		era, err := sim.ParseEra(f.kernel)
		if err != nil {
			return "", 0, usageErr("--kernel %s: %v", f.kernel, err)
		}
		return era, cpus, nil
	}
	release := cgroup.KernelRelease(hostfs.Default())
	era, err := sim.EraOfRelease(release)
	if err != nil {
		return "", 0, usageErr("this host's kernel (%q) has no era to model (%v): give --kernel ERA", release, err)
	}
	return era, cpus, nil
}

// eventSpread reads --event-cpu-quantiles into costs.EventSpread.
func (f *simFlags) eventSpread(c *cobra.Command) error {
	q := f.eventQuantiles
	if c.Flags().Changed("event-cpu") {
		return usageErr("--event-cpu and --event-cpu-quantiles: give one, every event's CPU time or how it spreads")
	}
	if len(q) != len(sim.EventQuantiles) {
		return usageErr("--event-cpu-quantiles: give %d times, an event's CPU time at quantiles %s, not %d", len(sim.EventQuantiles), eventQuantileNames(), len(q))
	}
	var s sim.EventSpread
	copy(s[:], q)
	if err := s.Check(); err != nil {
		return usageErr("--event-cpu-quantiles %v: %v", q, err)
	}
	f.costs.EventSpread = s
	return nil
}

// eventQuantileNames are sim.EventQuantiles in per cent: "0,10,...,100%".
func eventQuantileNames() string {
	n := make([]string, len(sim.EventQuantiles))
	for i, p := range sim.EventQuantiles {
		n[i] = strconv.FormatFloat(100*p, 'g', -1, 64)
	}
	return strings.Join(n, ",") + "%"
}

// changed is the first of the flags given, or "".
func (f *simFlags) changed(c *cobra.Command) string {
	for _, n := range simFlagNames {
		if c.Flags().Changed(n) {
			return n
		}
	}
	return ""
}

// prepareErr says an error of sim.Prepare in simulate's words.
func (f *simulateFlags) prepareErr(c *cobra.Command, err error) error {
	var le *cgroup.LimitError
	switch {
	case errors.As(err, &le) && errors.Is(le, cgroup.ErrNoBurst):
		return usageErr("--burst %s %s: drop --burst or give --kernel %s or later", le.Value, le.Reason, sim.Era5_14)
	case errors.As(err, &le):
		return limitErr(le, f.given(c))
	}
	return &exitError{2, err}
}
