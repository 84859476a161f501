// Package lab runs a workload in a fresh cgroup with given limits and
// records a trace: the kernel's counters sampled fast enough to see every
// enforcement period, and the workload's own per-operation timings.
package lab

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cfsprobe/cfsprobe/internal/cgroup"
	"github.com/cfsprobe/cfsprobe/internal/cpuview"
	"github.com/cfsprobe/cfsprobe/internal/hostfs"
	"github.com/cfsprobe/cfsprobe/internal/tied"
	"github.com/cfsprobe/cfsprobe/internal/trace"
	"github.com/cfsprobe/cfsprobe/internal/workload"
)

// Version is written into traces; the build sets it.
var Version = "dev"

// ErrInterrupted is returned when the run was stopped by a signal (the
// context was cancelled); the group has been removed.
var ErrInterrupted = errors.New("interrupted")

// UserError is an input problem: one sentence saying what is wrong and
// how to fix it. Nothing was created.
type UserError struct{ Err error }

func (e *UserError) Error() string { return e.Err.Error() }
func (e *UserError) Unwrap() error { return e.Err }

// MinSampleInterval is the shortest SampleInterval: shorter, reading the
// counters would cost more CPU than the workload's periods show.
const MinSampleInterval = 100 * time.Microsecond

// SampleIntervalError is a SampleInterval outside MinSampleInterval and
// the period (a period needs a reading at least once).
type SampleIntervalError struct{ Interval, Period time.Duration }

func (e *SampleIntervalError) Error() string {
	return fmt.Sprintf("sample interval %v is outside %v to the %v period", e.Interval, MinSampleInterval, e.Period)
}

// Config describes one run.
type Config struct {
	Limits cgroup.Limits
	// Workload and WorkloadArgs name a built-in workload; or Command is
	// any program and its arguments.
	Workload     string
	WorkloadArgs []string
	Command      []string
	// Stdout and Stderr receive the workload's output.
	Stdout, Stderr io.Writer
	Stdin          io.Reader
	// FS is the machine whose /proc, /sys and cgroup mounts are used
	// (the zero FS: this one).
	FS hostfs.FS
	// Parent is the group under which the run's group is made.
	Parent string
	// Self is the cfsprobe executable that runs built-in workloads
	// (default: this executable).
	Self string
	// SampleInterval overrides how often counters are read: from
	// MinSampleInterval to the period (0: period/10, from 1 ms to 10 ms).
	SampleInterval time.Duration
	// Env is extra environment for the workload ("K=V").
	Env []string
	// View, when set, is recorded in the trace's spec: the CPU view that
	// Env gives the workload (see internal/cpuview).
	View *trace.View
}

// SetView gives the workload the CPU view of o, as cfsprobe exec would
// (internal/cpuview), in the run's group: auto (o.CPUs 0) rounds the
// quota of c.Limits, which must be set first; the variables that give
// the view are added to Env, and the view is recorded in the trace's spec
// (View). A command's view is adapted to its program (musl, static:
// cpuview.ExecPlan.ForProgram). It returns what the user should be told:
// what is missing and what was done instead; the run goes ahead
// regardless.
func (c *Config) SetView(o cpuview.ExecOptions) (warnings []string) {
	lim := c.Limits
	o.Limits = &lim
	plan := cpuview.PrepareExec(o)
	warnings = plan.Warnings
	if len(c.Command) > 0 {
		if path, err := exec.LookPath(c.Command[0]); err == nil {
			warnings = append(warnings, plan.ForProgram(path)...)
		}
	}
	c.Env = append(c.Env, cpuview.Assignments(plan.Changes)...)
	c.View = plan.TraceView()
	return warnings
}

// Plan is a validated run: everything was checked, nothing created yet.
type Plan struct {
	cfg Config
	mgr *cgroup.Manager
	wl  workload.Workload
	// pin is where wl keeps its threads (nil: on all the CPUs it may
	// use); see onPinCPUs.
	pin      *unix.CPUSet
	self     string
	host     trace.Host
	spec     trace.Spec
	limits   trace.Limits
	interval time.Duration
}

// Prepare validates the configuration and the host. Every error it
// returns is a *UserError.
func Prepare(cfg Config) (*Plan, error) {
	if cfg.Stdout == nil {
		cfg.Stdout = os.Stdout
	}
	if cfg.Stderr == nil {
		cfg.Stderr = os.Stderr
	}
	p := &Plan{cfg: cfg}
	ue := func(err error) (*Plan, error) { return nil, &UserError{err} }

	switch {
	case cfg.Workload != "" && len(cfg.Command) > 0:
		return ue(errors.New("give either a built-in workload or -- COMMAND, not both"))
	case cfg.Workload != "":
		wl, err := workload.Parse(cfg.Workload, cfg.WorkloadArgs)
		if err != nil {
			return ue(err)
		}
		p.wl = wl
		params := wl.Params()
		p.spec = trace.Spec{Workload: cfg.Workload, Args: append([]string{}, cfg.WorkloadArgs...), Params: &params}
		if pw, ok := wl.(workload.Pinned); ok && cfg.Limits.Cpuset == "" {
			if set, ok := workload.PinSet(pw.PinCPUs()); ok {
				p.pin = &set
			}
		}
		self := cfg.Self
		if self == "" {
			exe, err := os.Executable()
			if err != nil {
				return nil, fmt.Errorf("find the cfsprobe executable: %w", err)
			}
			self = exe
		}
		p.self = self
	case len(cfg.Command) > 0:
		if _, err := exec.LookPath(cfg.Command[0]); err != nil {
			if strings.Contains(cfg.Command[0], "/") {
				return ue(fmt.Errorf("command %q does not exist or is not executable: check the path", cfg.Command[0]))
			}
			return ue(fmt.Errorf("command %q not found in $PATH: install it or give its full path", cfg.Command[0]))
		}
		p.spec = trace.Spec{Workload: "command", Args: append([]string{}, cfg.Command...)}
	default:
		return ue(fmt.Errorf("no workload: name one of %s, or give -- COMMAND ARGS...", strings.Join(workload.Names(), ", ")))
	}

	if err := cfg.Limits.Validate(); err != nil {
		return ue(err)
	}
	var err error
	if p.interval, err = sampleInterval(cfg.SampleInterval, cfg.Limits.Period); err != nil {
		return ue(err)
	}
	if err := cgroup.CheckParent(cfg.Parent); err != nil {
		return ue(fmt.Errorf("parent group %w", err))
	}
	p.spec.View = cfg.View
	layout, err := cgroup.Detect(cfg.FS)
	if err != nil {
		if errors.Is(err, cgroup.ErrNoCPUController) {
			return ue(fmt.Errorf("%w: cfsprobe needs the cpu controller (mount a v1 cpu hierarchy, or enable +cpu in the v2 root's cgroup.subtree_control)", err))
		}
		return ue(fmt.Errorf("%w: check --proc-root and --fs-root", err))
	}
	p.mgr = cgroup.NewManager(layout, cfg.Parent)
	if err := p.mgr.CheckWritable(); err != nil {
		return ue(err)
	}
	if err := p.mgr.Check(cfg.Limits); err != nil {
		return ue(err)
	}
	p.host = trace.ReadHost(cfg.FS, layout.Mode, layout.CPU)
	p.limits = trace.LimitsOf(cfg.Limits)
	return p, nil
}

// sampleInterval is how often the counters of a group with the given
// period are read: given, when it is from MinSampleInterval to the
// period (a *SampleIntervalError otherwise), or for 0 a tenth of the
// period, from 1 ms to 10 ms.
func sampleInterval(given, period time.Duration) (time.Duration, error) {
	switch {
	case given == 0:
		return max(min(period/10, 10*time.Millisecond), time.Millisecond), nil
	case given < MinSampleInterval || given > period:
		return 0, &SampleIntervalError{Interval: given, Period: period}
	}
	return given, nil
}

// Run creates the group, runs the workload in it, samples its counters,
// removes the group and returns the trace. Cancelling ctx (SIGINT,
// SIGTERM) kills the workload, removes the group and returns
// ErrInterrupted.
func (p *Plan) Run(ctx context.Context) (tr *trace.Trace, err error) {
	var g cgroup.Group
	err = onPinCPUs(p.pin, func() (err error) {
		g, err = p.mgr.Create(cgroup.GroupName("run"), p.cfg.Limits)
		return err
	})
	if err != nil {
		var le *cgroup.LimitError
		if errors.As(err, &le) {
			return nil, &UserError{err}
		}
		return nil, fmt.Errorf("create the cgroup: %w", err)
	}
	defer func() {
		if derr := g.Destroy(); derr != nil && err == nil {
			err = fmt.Errorf("remove the cgroup: %w", derr)
		}
	}()

	cmd, resultR, err := p.command()
	if err != nil {
		return nil, err
	}
	var result bytes.Buffer
	var readDone sync.WaitGroup
	if resultR != nil {
		readDone.Add(1)
		go func() {
			defer readDone.Done()
			_, _ = io.Copy(&result, resultR)
			resultR.Close()
		}()
	}

	s0, err := g.Stat()
	if err != nil {
		return nil, err
	}
	// The first reading is before the process starts, the run's clock at
	// its release: stamped when it was taken, so that a period the kernel
	// counts in between (the start takes milliseconds) falls where it ends.
	s0At := workload.ClockMono()
	cpus := p.cpus()
	busy0, busyErr := cgroup.ReadCPUTimes(p.cfg.FS, cpus)
	busy0At := workload.ClockMono()
	self0 := workload.ProcessCPU() // cfsprobe's own (trace.Summary.SelfBusyCPUs)
	started := time.Now()
	// If cfsprobe dies (even by SIGKILL), the workload dies with it;
	// `cfsprobe cleanup` removes the group directory that is left.
	var outside time.Duration // the process's CPU time before it entered the group
	if err := tied.StartWith(cmd, func() error {
		return onPinCPUs(p.pin, func() (err error) { outside, err = cgroup.Start(cmd, g); return err })
	}); err != nil {
		closeExtra(cmd)
		return nil, fmt.Errorf("start %s: %w", p.spec.Workload, err)
	}
	t0 := workload.ClockMono()
	closeExtra(cmd)

	smp := newSampler(g, t0, p.interval, p.cfg.Limits)
	smp.avoid = p.pin
	smp.add(s0, s0At-t0)
	go smp.loop()

	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	var waitErr error
	select {
	case waitErr = <-exited:
	case <-ctx.Done():
		smp.stop()
		_ = g.Destroy() // kills the workload
		<-exited
		readDone.Wait()
		return nil, ErrInterrupted
	}
	wallNs := workload.ClockMono() - t0
	self1 := workload.ProcessCPU()
	busy1, err := cgroup.ReadCPUTimes(p.cfg.FS, cpus)
	busySpan := workload.ClockMono() - busy0At
	busyErr = errors.Join(busyErr, err)
	smp.sampleNow()
	if !p.cfg.Limits.Unlimited() {
		// The kernel accounts a period when it ends: wait for the boundary
		// that closes the period in which the workload exited.
		smp.waitPeriodChange(p.cfg.Limits.Period + 3*p.interval)
	}
	smp.stop()
	readDone.Wait()
	if smp.err != nil {
		return nil, fmt.Errorf("read the group's counters: %w", smp.err)
	}

	tr = &trace.Trace{
		Schema: trace.Schema, Tool: trace.Tool{Name: "cfsprobe", Version: Version},
		Spec: p.spec, Host: p.host, Limits: p.limits,
		Cgroup:           trace.Cgroup{Path: g.Path(), Version: g.Version()},
		Started:          started.UTC(),
		StartedMonoNs:    t0,
		SampleIntervalNs: int64(p.interval),
		ReaderClass:      smp.class,
	}
	tr.Process = processFacts(cmd, waitErr)
	if p.wl != nil {
		if err := attachResult(tr, result.Bytes(), t0, outside, p.wl); err != nil {
			if tr.Process.ExitCode != 0 || tr.Process.Signal != "" {
				return nil, fmt.Errorf("workload %s failed (exit %d %s)", p.wl.Name(), tr.Process.ExitCode, tr.Process.Signal)
			}
			return nil, err
		}
	}
	trace.Finish(tr, smp.samples, wallNs, true)
	if pr := &tr.Process; pr.StartCPUNs > 0 {
		// What the group was charged past the workload's end: the group's
		// usage less the process's own up to then.
		pr.ExitCPUNs = max(tr.Summary.UsageNs-(pr.SelfCPUNs-int64(outside)), 0)
	}
	if busyErr == nil && wallNs > 0 {
		self := self1 - self0
		selfBusy := float64(self) / float64(wallNs)
		tr.Summary.SelfBusyCPUs = &selfBusy
		if cpus != nil {
			self = 0 // not all of it on the CPUs measured
		}
		others := max(float64(cgroup.BusyBetween(busy0, busy1, time.Duration(busySpan))-time.Duration(tr.Summary.UsageNs)-self)/float64(wallNs), 0)
		tr.Summary.OthersBusyCPUs = &others
		if steal := busy1.Steal - busy0.Steal; steal > 0 {
			stolen := min(float64(steal)/float64(wallNs), others)
			tr.Summary.StolenCPUs = &stolen
		}
	}
	return tr, nil
}

// cpus are the CPUs the workload may run on, for the time other work
// keeps them busy (trace.Summary.OthersBusyCPUs): the group's cpuset, or
// those a pinned workload keeps to, or nil for all.
func (p *Plan) cpus() []int {
	if p.cfg.Limits.Cpuset != "" {
		cpus, _ := cgroup.ParseCPUList(p.cfg.Limits.Cpuset) // validated by Prepare
		return cpus
	}
	if p.pin == nil {
		return nil
	}
	return workload.CPUsOf(*p.pin)
}

// onPinCPUs runs fn on a thread whose CPU affinity is set, the CPUs a
// pinned workload keeps to (workload.PinSet); with no set, it just runs
// fn. Run creates the group and starts the workload through it, so that
// the group's period timer and the workload share their CPUs.
//
// Why: the kernel arms a group's period timer on the CPU that writes the
// group's quota (and, when the timer has stopped, on the CPU where the
// group next asks for runtime), and keeps it there while the group stays
// busy. A timer on another CPU than the worker's makes the refill at each
// period's end race with the tick that charges the worker on its own CPU.
// With demand exactly at the quota (one thread under one CPU) a refill
// that comes late throttles the worker: under emulation (the qemu guest),
// where timer interrupts can come milliseconds late, 13-20 of 51 periods
// were throttled in the runs that lost the race. A child inherits the
// affinity of the thread that forks it, so the workload also runs on its
// CPUs from its first instruction.
//
// With --cpuset the group's cpuset decides where the workload may run:
// the lab does not pin ahead then, and the workload pins itself.
func onPinCPUs(set *unix.CPUSet, fn func() error) error {
	if set == nil {
		return fn()
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var saved unix.CPUSet
	if unix.SchedGetaffinity(0, &saved) != nil || unix.SchedSetaffinity(0, set) != nil {
		return fn()
	}
	defer func() { _ = unix.SchedSetaffinity(0, &saved) }()
	return fn()
}

func (p *Plan) command() (*exec.Cmd, *os.File, error) {
	var cmd *exec.Cmd
	var resultR *os.File
	if p.wl != nil {
		var err error
		if cmd, resultR, err = workload.Command(p.wl, p.self); err != nil {
			return nil, nil, err
		}
	} else {
		cmd = exec.Command(p.cfg.Command[0], p.cfg.Command[1:]...)
		cmd.Env = os.Environ()
	}
	cmd.Env = append(cmd.Env, p.cfg.Env...)
	cmd.Stdin = p.cfg.Stdin
	cmd.Stdout = p.cfg.Stdout
	cmd.Stderr = p.cfg.Stderr
	return cmd, resultR, nil
}

func closeExtra(cmd *exec.Cmd) {
	for _, f := range cmd.ExtraFiles {
		f.Close()
	}
	cmd.ExtraFiles = nil
}

func processFacts(cmd *exec.Cmd, waitErr error) trace.Process {
	pr := trace.Process{}
	if cmd.Process != nil {
		pr.PID = cmd.Process.Pid
	}
	ps := cmd.ProcessState
	if ps == nil {
		return pr
	}
	pr.ExitCode = ps.ExitCode()
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		pr.Signal = ws.Signal().String()
	}
	if ru, ok := ps.SysUsage().(*syscall.Rusage); ok && ru != nil {
		pr.RusageNs = ru.Utime.Nano() + ru.Stime.Nano()
	}
	return pr
}

// attachResult adds what the built-in workload reported to the trace of
// its run, which started at t0 (CLOCK_MONOTONIC), its process having used
// outside of CPU time before it entered the group.
func attachResult(tr *trace.Trace, b []byte, t0 int64, outside time.Duration, wl workload.Workload) error {
	if len(bytes.TrimSpace(b)) == 0 {
		return errors.New("the workload process ended without reporting its result")
	}
	res, err := workload.DecodeResult(b, wl)
	if err != nil {
		return fmt.Errorf("decode the workload's result: %w", err)
	}
	tr.Process.SelfCPUNs = res.SelfCPUNs
	if res.StartCPUNs > 0 {
		tr.Process.ReleasedNs = res.StartMono - t0
		tr.Process.StartCPUNs = max(res.StartCPUNs-int64(outside), 0)
	}
	if res.Latency != nil {
		for i := range res.Latency.Samples {
			res.Latency.Samples[i].StartNs -= t0
		}
		tr.Latency = res.Latency
	}
	if res.Throughput != nil {
		// Rebase the buckets on the run's start: drop or pad whole buckets.
		shift := (res.ThroughputStartMono - t0) / res.Throughput.BucketNs
		c := res.Throughput.Counts
		if shift > 0 {
			c = append(make([]int64, shift), c...)
		} else if shift < 0 && int(-shift) < len(c) {
			c[-shift] += sum(c[:-shift])
			c = c[-shift:]
		}
		tr.Throughput = &trace.Throughput{BucketNs: res.Throughput.BucketNs, Counts: c}
	}
	return nil
}

func sum(v []int64) int64 {
	var s int64
	for _, x := range v {
		s += x
	}
	return s
}
