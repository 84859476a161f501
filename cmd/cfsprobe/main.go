// Command cfsprobe makes CPU-quota throttling of Linux containers visible,
// reproducible and fixable. This file only wires flags to packages.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/cfsprobe/cfsprobe/internal/lab"
	"github.com/cfsprobe/cfsprobe/internal/workload"
)

// exitError carries an exit status through cobra.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }

// usageErr marks an input error: exit status 2.
func usageErr(format string, a ...any) error {
	return &exitError{2, fmt.Errorf(format, a...)}
}

// noArgs is the Args of a command that takes none: a stray argument is
// an input error that names it, and says what to do instead (hint) and
// where help is.
func noArgs(hint string) cobra.PositionalArgs {
	if hint != "" {
		hint = ": " + hint
	}
	return func(c *cobra.Command, args []string) error {
		if len(args) == 0 {
			return nil
		}
		return usageErr("%s takes no arguments, but got %q%s (see: %s --help)", c.Name(), args[0], hint, c.CommandPath())
	}
}

func main() {
	// Hidden entry point: a built-in workload running inside its group.
	if len(os.Args) >= 3 && os.Args[1] == "__workload" {
		if err := workload.Main(os.Args[2], os.Args[3:], os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, "cfsprobe workload:", err)
			os.Exit(2)
		}
		return
	}
	root := newRoot()
	err := root.Execute()
	if err == nil {
		return
	}
	code := 1
	var ee *exitError
	var ue *lab.UserError
	switch {
	case errors.As(err, &ee):
		code = ee.code
		if ee.err == nil {
			os.Exit(code)
		}
	case errors.As(err, &ue):
		code = 2
	}
	fmt.Fprintln(os.Stderr, "cfsprobe:", err)
	os.Exit(code)
}

func newRoot() *cobra.Command {
	root := &cobra.Command{
		Use:   "cfsprobe",
		Short: "make CPU-quota throttling of Linux containers visible, reproducible and fixable",
		Long: `cfsprobe makes CPU-quota throttling visible, reproducible, predictable and
fixable. A CPU limit (Kubernetes limits.cpu, docker --cpus, systemd CPUQuota=)
is enforced by CFS bandwidth control: a quota of CPU time per period, after
which every thread of the group stops until the next period. cfsprobe records
what the kernel did in every period (CPU used, throttled or not, for how long,
and for its own workloads the latency of every operation) as a trace, which
every command below writes or reads.

See it, in a fresh cgroup or on a live one:
  cfsprobe run --cpus 0.2 bursty --on 50ms --off 50ms --duration 5s
  cfsprobe run --cpus 1 --out limited.json -- sysbench --threads=4 --time=5 cpu run
  cfsprobe record --pid 4242 --duration 5m --out api.json
  cfsprobe top
  cfsprobe report -o report.html limited.json api.json
  cfsprobe check
Predict it, on a model of the kernel's bandwidth controller (no root needed):
  cfsprobe simulate --kernel 4.18 --host-cpus 64 --quota 10ms parallel --threads 64 --duration 5s
  cfsprobe simulate --cpus 0.5 replay api.json
Fix it: the limit, burst or thread cap to set, and its proof by a rerun:
  cfsprobe recommend api.json
  cfsprobe recommend --verify limited.json
  cfsprobe cpus
  cfsprobe exec -- nproc
And:
  cfsprobe cleanup   # the groups a killed run left behind
  cfsprobe version`,
		SilenceUsage:  true,
		SilenceErrors: true,
		// Without these cobra reports an unknown command with exit 1 and a
		// multi-line suggestion; it is a usage error like any other.
		Args: func(c *cobra.Command, args []string) error {
			if len(args) > 0 {
				return usageErr("unknown command %q: use one of run, simulate, suite, check, top, record, recommend, exporter, report, cpus, exec, cleanup, version (see: cfsprobe --help)", args[0])
			}
			return nil
		},
		RunE:              func(c *cobra.Command, _ []string) error { return c.Help() },
		PersistentPreRunE: noEmptyFlags,
	}
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return usageErr("%v (see: %s --help)", err, c.CommandPath())
	})
	root.AddCommand(newRunCmd(), newSimulateCmd(), newSuiteCmd(), newReportCmd(), newCleanupCmd(), newVersionCmd(), newCheckCmd(), newTopCmd(), newRecordCmd(), newExporterCmd(), newCpusCmd(), newExecCmd(), newRecommendCmd())
	return root
}

func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "print cfsprobe's version",
		Args:  noArgs(""),
		Run: func(c *cobra.Command, _ []string) {
			fmt.Fprintln(c.OutOrStdout(), "cfsprobe", lab.Version)
		},
	}
}

// signalContext is cancelled by SIGINT or SIGTERM and remembers which.
func signalContext() (context.Context, func() os.Signal, func()) {
	ctx, cancel := context.WithCancel(context.Background())
	ch := make(chan os.Signal, 2)
	signal.Notify(ch, syscall.SIGINT, syscall.SIGTERM)
	var got os.Signal
	done := make(chan struct{})
	go func() {
		select {
		case got = <-ch:
			cancel()
		case <-done:
		}
	}()
	return ctx, func() os.Signal { return got }, func() {
		signal.Stop(ch)
		close(done)
		cancel()
	}
}
