package main

import (
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/cfsprobe/cfsprobe/internal/lab"
)

type recordFlags struct {
	duration time.Duration
	group    liveGroup
	outputFlags
	sampleInterval time.Duration
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
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) > 1 {
				return usageErr("record follows one group, but got %d: %q; record each in a cfsprobe record of its own (see: cfsprobe record --help)", len(args), args)
			}
			return nil
		},
		RunE: func(c *cobra.Command, args []string) error { return runRecord(c, f, args) },
	}
	fl := c.Flags()
	fl.DurationVar(&f.duration, "duration", 0, "how long to record (default: until Ctrl-C or SIGTERM)")
	f.group.addFlags(fl, "record", "record the group of this path (as /proc/PID/cgroup shows it): the same as giving it as the argument")
	f.outputFlags.add(fl, "print the trace as JSON on stdout", "recording")
	fl.DurationVar(&f.sampleInterval, "sample-interval", 0, "how often to read the counters (default period/10, at most 10ms)")
	_ = fl.MarkHidden("sample-interval")
	return c
}

func runRecord(c *cobra.Command, f *recordFlags, args []string) error {
	path := ""
	if len(args) == 1 {
		path = args[0]
	}
	sel, given, err := f.group.selector(c, path, "a cgroup path (or --cgroup), --pid, --container or --pod")
	if err != nil {
		return err
	}
	if c.Flags().Changed("duration") && f.duration <= 0 {
		return usageErr("--duration %v must be positive; leave it out to record until Ctrl-C", f.duration)
	}
	if err := f.outputFlags.check(); err != nil {
		return err
	}
	ctx, _, stop := signalContext()
	defer stop()
	cfg, label, err := f.group.recordConfig(sel, given)
	if err != nil {
		return err
	}
	cfg.Duration, cfg.SampleInterval = f.duration, f.sampleInterval
	rec, err := lab.PrepareRecord(cfg)
	if err != nil {
		return sampleIntervalErr(err)
	}
	if f.duration == 0 {
		fmt.Fprintf(os.Stderr, "cfsprobe: recording %s (%s) until Ctrl-C\n", cfg.Group.Path, label)
	}
	tr, err := rec.Run(ctx)
	if err != nil {
		return err
	}
	return f.outputFlags.write(c, tr)
}
