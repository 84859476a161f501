package main

import (
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/cfsprobe/cfsprobe/internal/cgroup"
	"github.com/cfsprobe/cfsprobe/internal/check"
	"github.com/cfsprobe/cfsprobe/internal/lab"
	"github.com/cfsprobe/cfsprobe/internal/trace"
)

type checkFlags struct {
	json       bool
	out        string
	report     string
	fromTraces bool
	parent     string
	roots      hostRoots
}

func newCheckCmd() *cobra.Command {
	f := &checkFlags{}
	c := &cobra.Command{
		Use:   "check [--json] [--out DIR] | check --from-traces TRACE|DIR...",
		Short: "does this kernel throttle groups that stay under their CPU quota? (about 20s)",
		Long: `Runs, side by side in transient groups, the "Overly aggressive CFS" program
(5ms burns with long sleeps under a 20ms/100ms quota) and a low-usage pattern
spread over every CPU, then looks for periods the kernel throttled although the
group used less than half its quota, and for burns that took far longer than
their burn time. Kernels 3.16 to 4.17 and 4.18 to 5.3 had such defects
(fixed in 4.18 and 5.4, and in 4.14.154+ and 4.19.84+); distributions backport,
so the test decides, not the version.

--from-traces judges saved traces instead (a check's --out directory, or
traces from cfsprobe run), without running anything: traces gathered on every
node by a DaemonSet can be judged anywhere. Simulated traces (cfsprobe
simulate) are refused: they are evidence about a model, not a kernel.

Exit status: 0 not affected, 1 affected, 3 inconclusive, 2 error.`,
		Example: `  sudo cfsprobe check
  sudo cfsprobe check --json --out /var/tmp/check-$(hostname)
  cfsprobe check --from-traces /var/tmp/check-node1`,
		Args: cobra.ArbitraryArgs,
		RunE: func(c *cobra.Command, args []string) error { return runCheck(c, f, args) },
	}
	fl := c.Flags()
	fl.BoolVar(&f.json, "json", false, "print the result as JSON")
	fl.StringVarP(&f.out, "out", "o", "", "save the traces and the result (check.json) in this directory")
	fl.StringVar(&f.report, "report", "", "write a report of the runs: FILE.html (charts), .md, .json or .txt")
	fl.BoolVar(&f.fromTraces, "from-traces", false, "judge the saved traces (files or directories) given as arguments; run nothing")
	fl.StringVar(&f.parent, "parent", cgroup.DefaultParent, "group under which the runs' groups are created")
	f.roots.addFlags(fl)
	return c
}

func runCheck(c *cobra.Command, f *checkFlags, args []string) error {
	if f.fromTraces {
		if len(args) == 0 {
			return usageErr("--from-traces needs trace files or directories: cfsprobe check --from-traces DIR|TRACE...")
		}
		if f.out != "" {
			return usageErr("--out saves the traces of a live check; with --from-traces they are saved already: drop --out")
		}
		if err := checkReportPath(f.report); err != nil {
			return err
		}
		res, traces, err := check.AnalyzeFiles(args)
		if err != nil {
			return checkErr(err)
		}
		return finishCheck(c, f, &res, traces)
	}
	if len(args) > 0 {
		return usageErr("unexpected argument %q: to judge saved traces use cfsprobe check --from-traces %s", args[0], args[0])
	}
	if err := checkParent(f.parent); err != nil {
		return err
	}
	if f.out != "" {
		if err := check.CheckOutDir(f.out); err != nil {
			return checkErr(err)
		}
	}
	if err := checkReportPath(f.report); err != nil {
		return err
	}
	chk, err := check.Prepare(check.Config{FS: f.roots.FS(), Parent: f.parent, Stderr: os.Stderr})
	if err != nil {
		return checkErr(err)
	}
	ctx, sig, stop := signalContext()
	defer stop()
	fmt.Fprintf(os.Stderr, "cfsprobe check: %d runs side by side, about 20s...\n", len(chk.Scenarios()))
	start := time.Now()
	traces, err := chk.Run(ctx)
	if errors.Is(err, lab.ErrInterrupted) {
		return interrupted(sig(), "the workloads were killed and their cgroups removed")
	}
	if err != nil {
		return checkErr(err)
	}
	res := check.Analyze(traces, traces[0].Host)
	res.WallNs = int64(time.Since(start))
	if f.out != "" {
		if err := check.Save(f.out, &res, traces); err != nil {
			return checkErr(err)
		}
	}
	return finishCheck(c, f, &res, traces)
}

// finishCheck writes the --report of the traces, prints the result and
// exits with the verdict's status.
func finishCheck(c *cobra.Command, f *checkFlags, res *check.Result, traces []*trace.Trace) error {
	if f.report != "" {
		if err := saveReport(f.report, "cfsprobe check: "+res.Headline, traces); err != nil {
			return err
		}
	}
	var err error
	if f.json {
		err = res.Write(c.OutOrStdout())
	} else {
		err = check.WriteText(c.OutOrStdout(), res)
		if err == nil && f.out != "" {
			fmt.Fprintf(c.OutOrStdout(), "traces saved in %s (judge them again: cfsprobe check --from-traces %s)\n", f.out, f.out)
		}
	}
	if err != nil {
		return checkErr(err)
	}
	if code := res.ExitCode(); code != 0 {
		return &exitError{code, nil}
	}
	return nil
}

// checkErr gives every error of check exit status 2: 1 means affected.
func checkErr(err error) error {
	var ee *exitError
	if errors.As(err, &ee) {
		return err
	}
	return &exitError{2, err}
}
