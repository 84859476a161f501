package main

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/cfsprobe/cfsprobe/internal/containers"
	"github.com/cfsprobe/cfsprobe/internal/hostfs"
	"github.com/cfsprobe/cfsprobe/internal/lab"
	"github.com/cfsprobe/cfsprobe/internal/monitor"
)

type recordFlags struct {
	duration       time.Duration
	cgroup         string
	pid            int
	container, pod string
	cgroupRoot     cgroupRoot
	procRoot       string
	outputFlags
	sampleInterval time.Duration
	runtime        runtimeFlags
}

func newRecordCmd() *cobra.Command {
	f := &recordFlags{}
	c := &cobra.Command{
		Use:   "record (CGROUP | --cgroup PATH | --pid PID | --container NAME|ID | --pod NS/NAME|UID) [--duration D] [--out FILE]",
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
                (or --cgroup PATH, as cfsprobe recommend --cgroup names it)
  --pid         a process in it
  --container   a container's name (docker ps's NAMES; a Kubernetes container's
                name when one pod only has it), or its ID or the start of one
  --pod         a Kubernetes pod as NAMESPACE/NAME, or its UID (the pod's group,
                all its containers)

Names are asked of the container runtimes (the Docker Engine API on
--docker-host, the CRI on --cri-endpoint), which also name the recorded
group in the trace (cgroup.container_name, image, pod_namespace, pod_name). An
ID or a UID needs no runtime: without one the group is found by its path.

The group's limits are read when the recording starts; a change during it is
reported as a failed check. Nothing is written to the group.`,
		Example: `  cfsprobe record --pid 4242 --duration 30s --out api.json
  cfsprobe record --container api --duration 1m --report api.html
  cfsprobe record --container 4f5e6a7b8c9d --duration 1m --out api.json
  cfsprobe record /system.slice/nginx.service --json > nginx.json
  cfsprobe record --pod shop/api-7d9f --out pod.json   # until Ctrl-C
  cfsprobe record --pod 1b2c3d4e-5f60-4a7b-8c9d-0e1f2a3b4c5d --out pod.json`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(c *cobra.Command, args []string) error { return runRecord(c, f, args) },
	}
	fl := c.Flags()
	fl.DurationVar(&f.duration, "duration", 0, "how long to record (default: until Ctrl-C or SIGTERM)")
	fl.StringVar(&f.cgroup, "cgroup", "", "record the group of this path (as /proc/PID/cgroup shows it): the same as giving it as the argument")
	fl.IntVar(&f.pid, "pid", 0, "record the group of this process")
	fl.StringVar(&f.container, "container", "", "record the group of the container of this name, or this ID (or a unique prefix of it)")
	fl.StringVar(&f.pod, "pod", "", "record the group of this Kubernetes pod: NAMESPACE/NAME, or its UID")
	f.cgroupRoot.addFlag(fl)
	fl.StringVar(&f.procRoot, "proc-root", hostfs.Default().Proc(), "where proc is mounted (for --pid)")
	f.outputFlags.add(fl, "print the trace as JSON on stdout", "recording")
	fl.DurationVar(&f.sampleInterval, "sample-interval", 0, "how often to read the counters (default period/10, at most 10ms)")
	_ = fl.MarkHidden("sample-interval")
	f.runtime.addFlags(fl)
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
	if c.Flags().Changed("cgroup") {
		sel.Path, given, n = f.cgroup, append(given, "--cgroup", f.cgroup), n+1
	}
	if c.Flags().Changed("pid") {
		if f.pid <= 0 {
			return sel, nil, usageErr("--pid %d is not a process ID: give a positive number", f.pid)
		}
		sel.PID, given, n = f.pid, append(given, "--pid", strconv.Itoa(f.pid)), n+1
	}
	if c.Flags().Changed("container") {
		sel.Container, given, n = f.container, append(given, "--container", f.container), n+1
	}
	if c.Flags().Changed("pod") {
		if ns, name, ok := strings.Cut(f.pod, "/"); ok && (ns == "" || name == "" || strings.Contains(name, "/")) {
			return sel, nil, usageErr("--pod %q: give the pod as NAMESPACE/NAME (shop/api-7d9f), or its UID", f.pod)
		}
		sel.Pod, given, n = f.pod, append(given, "--pod", f.pod), n+1
	}
	switch {
	case n == 0:
		return sel, nil, usageErr("name the group to record: a cgroup path (or --cgroup), --pid, --container or --pod (see: cfsprobe record --help)")
	case n > 1:
		return sel, nil, usageErr("name the group one way only: a cgroup path (or --cgroup), --pid, --container or --pod")
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
	names, err := f.runtime.resolver()
	if err != nil {
		return err
	}
	ctx, _, stop := signalContext()
	defer stop()
	if sel, err = byName(names, sel); err != nil {
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
	n, _ := names.Names(g.ID)
	rec, err := lab.PrepareRecord(lab.RecordConfig{
		Group: g, Duration: f.duration, SampleInterval: f.sampleInterval, Args: given,
		Host: root.HostFacts(host), Names: n,
	})
	if err != nil {
		return sampleIntervalErr(err)
	}
	if f.duration == 0 {
		fmt.Fprintf(os.Stderr, "cfsprobe: recording %s (%s) until Ctrl-C\n", g.Path, n.Label(g.ID.Name))
	}
	tr, err := rec.Run(ctx)
	if err != nil {
		return err
	}
	return f.outputFlags.write(c, tr)
}

// byName turns a selector's container name or pod NAMESPACE/NAME into the
// ID or UID the runtimes listed (Refresh first). A container ID (or the
// start of one, 4 characters or more) that no runtime knows is kept: the
// group's path may still have it.
func byName(names *containers.Resolver, sel monitor.Selector) (monitor.Selector, error) {
	switch {
	case sel.Container != "":
		id, err := names.FindContainer(sel.Container)
		switch {
		case err == nil:
			sel.Container = id
		case errors.Is(err, containers.ErrAmbiguous):
			return sel, usageErr("--container %v: give the container's ID (docker ps, crictl ps), or --pod", err)
		case len(sel.Container) >= 4 && isHex(sel.Container):
			// An ID: found by the groups' paths.
		default:
			return sel, usageErr("--container %s: %v: give a container's name or ID as docker ps or crictl ps shows it (an ID: at least 4 characters)", sel.Container, err)
		}
	case strings.Contains(sel.Pod, "/"):
		ns, name, _ := strings.Cut(sel.Pod, "/")
		uid, err := names.FindPod(ns, name)
		if err != nil {
			return sel, usageErr("--pod %s: %v: give a pod the CRI runtime on --cri-endpoint runs, or its UID (kubectl get pod -n %s %s -o jsonpath='{.metadata.uid}')", sel.Pod, err, ns, name)
		}
		sel.Pod = uid
	}
	return sel, nil
}

func isHex(s string) bool {
	return strings.Trim(s, "0123456789abcdef") == ""
}
