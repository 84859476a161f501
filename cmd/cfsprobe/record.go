package main

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/cfsprobe/cfsprobe/internal/hostfs"
	"github.com/cfsprobe/cfsprobe/internal/lab"
	"github.com/cfsprobe/cfsprobe/internal/monitor"
)

type recordFlags struct {
	duration       time.Duration
	pid            int
	container, pod string
	cgroupRoot     cgroupRoot
	procRoot       string
	outputFlags
	sampleInterval time.Duration
}

func newRecordCmd() *cobra.Command {
	f := &recordFlags{}
	c := &cobra.Command{
		Use:   "record (CGROUP | --pid PID | --container ID | --pod UID) [--duration D] [--out FILE]",
		Short: "follow a live cgroup and record a trace of it",
		Long: `Follows a cgroup that something else runs in (a container, a service, a pod)
for --duration, or until Ctrl-C, reading its counters ten times per period as
cfsprobe run does, and writes the same trace: a per-period timeline (CPU used,
throttled or not, stall), the kernel's counters over the recording and the
consistency checks, with spec.workload "recorded" and no per-operation latency
(the program is not cfsprobe's). cfsprobe report and cfsprobe check
--from-traces read it; it is how production behaviour reaches the simulator
and the recommender.

Name the group one way:
  CGROUP        its path as /proc/PID/cgroup shows it, e.g. /docker/4f5e6a...
  --pid         a process in it
  --container   a container ID, or the start of one (as docker ps shows it)
  --pod         a Kubernetes pod UID (the pod's group, all its containers)

The group's limits are read when the recording starts; a change during it is
reported as a failed check. Nothing is written to the group.`,
		Example: `  cfsprobe record --pid 4242 --duration 30s --out api.json
  cfsprobe record --container 4f5e6a7b8c9d --duration 1m --report api.html
  cfsprobe record /system.slice/nginx.service --json > nginx.json
  cfsprobe record --pod 1b2c3d4e-5f60-4a7b-8c9d-0e1f2a3b4c5d --out pod.json   # until Ctrl-C`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(c *cobra.Command, args []string) error { return runRecord(c, f, args) },
	}
	fl := c.Flags()
	fl.DurationVar(&f.duration, "duration", 0, "how long to record (default: until Ctrl-C or SIGTERM)")
	fl.IntVar(&f.pid, "pid", 0, "record the group of this process")
	fl.StringVar(&f.container, "container", "", "record the group of this container ID (or a unique prefix of it)")
	fl.StringVar(&f.pod, "pod", "", "record the group of this Kubernetes pod UID")
	f.cgroupRoot.addFlag(fl)
	fl.StringVar(&f.procRoot, "proc-root", hostfs.Default().Proc(), "where proc is mounted (for --pid)")
	f.outputFlags.add(fl, "print the trace as JSON on stdout", "recording")
	fl.DurationVar(&f.sampleInterval, "sample-interval", 0, "how often to read the counters (default period/10, at most 10ms)")
	_ = fl.MarkHidden("sample-interval")
	return c
}

// selector is the group the flags and arguments name, and the words
// that named it (for the trace's spec).
func (f *recordFlags) selector(c *cobra.Command, args []string) (monitor.Selector, []string, error) {
	var sel monitor.Selector
	var given []string
	n := 0
	if len(args) == 1 {
		sel.Path, given, n = args[0], append(given, args[0]), n+1
	}
	if c.Flags().Changed("pid") {
		if f.pid <= 0 {
			return sel, nil, usageErr("--pid %d is not a process ID: give a positive number", f.pid)
		}
		sel.PID, given, n = f.pid, append(given, "--pid", strconv.Itoa(f.pid)), n+1
	}
	if c.Flags().Changed("container") {
		if len(f.container) < 4 {
			return sel, nil, usageErr("--container %q: give at least 4 characters of the container ID", f.container)
		}
		sel.Container, given, n = f.container, append(given, "--container", f.container), n+1
	}
	if c.Flags().Changed("pod") {
		if f.pod == "" {
			return sel, nil, usageErr("--pod needs a pod UID (kubectl get pod NAME -o jsonpath='{.metadata.uid}')")
		}
		sel.Pod, given, n = f.pod, append(given, "--pod", f.pod), n+1
	}
	switch {
	case n == 0:
		return sel, nil, usageErr("name the group to record: a cgroup path, --pid, --container or --pod (see: cfsprobe record --help)")
	case n > 1:
		return sel, nil, usageErr("name the group one way only: a cgroup path, --pid, --container or --pod")
	}
	return sel, given, nil
}

func runRecord(c *cobra.Command, f *recordFlags, args []string) error {
	sel, given, err := f.selector(c, args)
	if err != nil {
		return err
	}
	if c.Flags().Changed("duration") && f.duration <= 0 {
		return usageErr("--duration %v must be positive; leave it out to record until Ctrl-C", f.duration)
	}
	if err := f.outputFlags.check(); err != nil {
		return err
	}
	root, err := f.cgroupRoot.open()
	if err != nil {
		return err
	}
	host := hostfs.Default().WithProc(f.procRoot) // --pid's proc, and the host's facts
	g, err := root.Find(sel, host)
	if err != nil {
		if errors.Is(err, monitor.ErrNoGroup) {
			return &exitError{2, err}
		}
		return err
	}
	rec, err := lab.PrepareRecord(lab.RecordConfig{
		Group: g, Duration: f.duration, SampleInterval: f.sampleInterval, Args: given,
		Host: root.HostFacts(host),
	})
	if err != nil {
		return sampleIntervalErr(err)
	}
	ctx, _, stop := signalContext()
	defer stop()
	if f.duration == 0 {
		fmt.Fprintf(os.Stderr, "cfsprobe: recording %s (%s) until Ctrl-C\n", g.Path, g.ID.Name)
	}
	tr, err := rec.Run(ctx)
	if err != nil {
		return err
	}
	return f.outputFlags.write(c, tr)
}
