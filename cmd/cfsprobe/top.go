package main

import (
	"errors"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/cfsprobe/cfsprobe/internal/hostfs"
	"github.com/cfsprobe/cfsprobe/internal/top"
)

type topFlags struct {
	interval   time.Duration
	sort       string
	all        bool
	cgroupRoot cgroupRoot
	once       bool
	json       bool
	runtime    runtimeFlags
}

// minTopInterval: below a default enforcement period the throttled share
// of periods has too few periods to mean anything.
const minTopInterval = 100 * time.Millisecond

func newTopCmd() *cobra.Command {
	f := &topFlags{}
	c := &cobra.Command{
		Use:   "top [--once [--json]]",
		Short: "live view of every group with a CPU limit: usage, throttling, stalls",
		Long: `One row per cgroup with a CPU limit (--all: every cgroup), refreshed every
--interval, sorted by how throttled the groups are. Figures are over the last
interval; a group that just appeared shows "-" until it has been read twice.

  LIMIT        quota / period, in CPUs ("none": no quota)
  USAGE        CPU time used / wall time, in CPUs; "n/a" for a group made in a
               cgroup v1 cpu hierarchy alone while cpuacct, which keeps usage on
               v1, is mounted apart (its throttling is shown; --json says why)
  THROTTLED    share of the interval's enforcement periods in which the group
               was throttled (nr_throttled / nr_periods)
  THR s/s      throttled time per second; the kernel's throttled time is summed
               over the CPUs the group was stopped on, so it can exceed 1
  WORST STALL  the longest stall of one period since top started: the wall time
               the group stood still in a throttled period, measured period by
               period as the exporter does (docs/trace.md); "-" until top has
               learnt the group's period boundaries (a second or two)
  BURSTS       periods in which the group used CPU burst, and the CPU time taken
  BURST TIME   beyond the quota from the burst allowance, over the interval

Rows throttled in the last interval are bold. Keys: t u s n l sort by
throttled, usage, stall, name, limit (the same key again reverses the order);
up/down, PgUp/PgDn, Home/End (or k j b space g G) scroll; q quits.

--once prints the table once, after two readings --interval apart; with --json
it prints the rows as a JSON array (limits, the interval's counter increases,
the figures above, and what the path says the group is) for scripts; a group
whose usage cannot be read has usage_cpus and usage_ns null and usage_unknown
(reason and detail).

Containers are named as their runtimes name them: a Docker container by its
name and image ("web (nginx:1.25)", from the Docker Engine API on
--docker-host), a Kubernetes container as namespace/pod/container (from the
CRI's labels on --cri-endpoint); --json adds container_name, image,
pod_namespace and pod_name. A group no runtime names (none answers, or it is
no container) is named by what its path says ("docker 4f5e6a7b8c9d").`,
		Example: `  cfsprobe top
  cfsprobe top --sort usage --all
  cfsprobe top --cgroup-root /host/sys/fs/cgroup
  cfsprobe top --once --json --interval 5s | jq '.[] | select(.throttled_ratio > 0.2) | .name'`,
		Args: noArgs(""),
		RunE: func(c *cobra.Command, _ []string) error { return runTop(c, f) },
	}
	fl := c.Flags()
	fl.DurationVar(&f.interval, "interval", time.Second, "time between readings (the figures are over this interval)")
	fl.StringVar(&f.sort, "sort", string(top.SortThrottled), "order of the rows: "+sortKeyNames())
	fl.BoolVar(&f.all, "all", false, "show every cgroup, not only those with a CPU limit")
	f.cgroupRoot.addFlag(fl)
	fl.BoolVar(&f.once, "once", false, "read twice, --interval apart, print the table and exit")
	fl.BoolVar(&f.json, "json", false, "with --once: print the rows as JSON")
	f.runtime.addFlags(fl)
	return c
}

func runTop(c *cobra.Command, f *topFlags) error {
	key, ok := top.ParseSortKey(f.sort)
	if !ok {
		return usageErr("--sort %q: use one of %s", f.sort, sortKeyNames())
	}
	if f.interval < minTopInterval {
		return usageErr("--interval %v is too short: the throttled share needs whole enforcement periods; use %v or more", f.interval, minTopInterval)
	}
	if f.json && !f.once {
		return usageErr("--json prints one reading for scripts: add --once (cfsprobe top --once --json)")
	}
	if !f.once {
		if !top.IsTerminal(os.Stdin) || !top.IsTerminal(os.Stdout) {
			return usageErr("the live view needs a terminal (standard input and output): for scripts use cfsprobe top --once --json")
		}
		if os.Getenv("TERM") == "dumb" {
			return usageErr("the live view needs a terminal that understands escape sequences, not TERM=dumb: use cfsprobe top --once")
		}
	}
	root, err := f.cgroupRoot.open()
	if err != nil {
		return err
	}
	names, err := f.runtime.resolver()
	if err != nil {
		return err
	}
	host := root.HostFacts(hostfs.Default())
	src := top.NewTreeSource(root, f.all, host.CPUs, names)
	opts := top.Options{Interval: f.interval, Sort: key, All: f.all, Host: host, Highlight: true}

	ctx, sig, stop := signalContext()
	defer stop()

	if f.once {
		m, err := top.Once(ctx, src, f.interval)
		if ctx.Err() != nil {
			return interrupted(sig(), "")
		}
		if err != nil {
			return err
		}
		rows := m.Rows(key, false)
		out := c.OutOrStdout()
		if f.json {
			return top.WriteJSON(out, rows)
		}
		return top.WriteTable(out, top.HeaderOf(m, opts), rows, stdoutWidth(), key, false)
	}

	term, err := top.OpenTerminal(os.Stdin, os.Stdout)
	if errors.Is(err, top.ErrNotTerminal) {
		return usageErr("the live view needs a terminal (%v): for scripts use cfsprobe top --once --json", err)
	}
	if err != nil {
		return err
	}
	defer term.Restore()
	err = top.Live(ctx, src, term, opts)
	term.Restore()
	if ctx.Err() != nil {
		return interrupted(sig(), "")
	}
	return err
}

// stdoutWidth is the terminal's width when stdout is one, else 0 (no
// limit: names in full when piped).
func stdoutWidth() int {
	ws, err := unix.IoctlGetWinsize(int(os.Stdout.Fd()), unix.TIOCGWINSZ)
	if err != nil || ws.Col == 0 {
		return 0
	}
	return int(ws.Col)
}

func sortKeyNames() string {
	keys := make([]string, len(top.SortKeys))
	for i, k := range top.SortKeys {
		keys[i] = string(k)
	}
	return strings.Join(keys, ", ")
}
