package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/cfsprobe/cfsprobe/internal/cpuview"
)

type cpusFlags struct {
	pid   string
	group string
	json  bool
	roots hostRoots
}

func newCpusCmd() *cobra.Command {
	f := &cpusFlags{}
	c := &cobra.Command{
		Use:   "cpus [--pid PID | --cgroup PATH] [--json]",
		Short: "how many CPUs a process can really use, and how many threads each runtime would start",
		Long: `Joins what the kernel spreads over several places into one answer: the online
CPUs, the process's affinity, its cpuset, and the CPU quota (quota/period) of
its group and of every ancestor up to the root of the mounted hierarchy: the
tightest wins, on cgroup v1 and v2. Burst and shares (v1) or weight (v2) are
shown too; they do not limit the count.

  effective  min(online, affinity and cpuset together; tightest quota) in CPUs
  threads    what each rounding rule makes of it, with the runtimes that use it:
             ceil     JVM, .NET, Go 1.25+ (at least 2, and only its own group)
             floor    automaxprocs, Rust, libuv (at least 1)
             nearest  coreutils nproc (versions that read the quota)
             none     glibc, nginx, C++, Python: they count the online CPUs
  recommend  floor, at least 1: with no more busy threads than the quota has
             whole CPUs, the group never runs out of quota within a period, so
             no thread waits for the next one

Without --pid or --cgroup: this process (so: what a program started from this
shell would see). --cgroup takes a path as in /proc/PID/cgroup
("/kubepods/...") or a directory under the cgroup mount. In a container the
walk stops at the container's own group: what is above it cannot be seen.

What is missing (no quota, a file that cannot be read) is a warning on stderr,
never an error. cfsprobe exec gives a program this view (cfsprobe exec --help).`,
		Example: `  cfsprobe cpus
  cfsprobe cpus --pid $(pidof nginx | cut -d' ' -f1)
  cfsprobe cpus --cgroup /kubepods/burstable/pod1234/abcd --json
  sudo cfsprobe run --cpus 1.5 -- cfsprobe cpus`,
		Args: noArgs("name a process with --pid or a group with --cgroup"),
		RunE: func(c *cobra.Command, _ []string) error { return runCpus(c, f) },
	}
	fl := c.Flags()
	fl.StringVar(&f.pid, "pid", "", "the process to look at (default: this one)")
	fl.StringVar(&f.group, "cgroup", "", "a group instead of a process: its path as in /proc/PID/cgroup, or its directory")
	fl.BoolVar(&f.json, "json", false, "print the view as JSON (docs/cpuview.md)")
	f.roots.addFlags(fl)
	return c
}

func runCpus(c *cobra.Command, f *cpusFlags) error {
	if f.pid != "" && f.group != "" {
		return usageErr("give --pid or --cgroup, not both")
	}
	var v *cpuview.View
	var err error
	if f.group != "" {
		v, err = cpuview.ResolveCgroup(f.roots.FS(), f.group)
	} else {
		pid := f.pid
		if pid == "" {
			pid = "self"
		}
		v, err = cpuview.Resolve(f.roots.FS(), pid)
	}
	var ie *cpuview.InputError
	if errors.As(err, &ie) {
		return &exitError{2, err}
	}
	if err != nil {
		return err
	}
	for _, w := range v.Warnings {
		fmt.Fprintln(os.Stderr, "cfsprobe: warning:", w)
	}
	if f.json {
		return v.Write(c.OutOrStdout())
	}
	return v.WriteText(c.OutOrStdout())
}
