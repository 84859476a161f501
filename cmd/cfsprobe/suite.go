package main

import (
	"os"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/cfsprobe/cfsprobe/internal/cgroup"
	"github.com/cfsprobe/cfsprobe/internal/check"
	"github.com/cfsprobe/cfsprobe/internal/hostfs"
	"github.com/cfsprobe/cfsprobe/internal/lab"
	"github.com/cfsprobe/cfsprobe/internal/suite"
)

func newSuiteCmd() *cobra.Command {
	var list, quick, asJSON, simulate, compare bool
	var show, file, outDir, parent, reportPath string
	var scenarios []string
	var sf simFlags
	c := &cobra.Command{
		Use:   "suite NAME... | suite -f FILE | suite --list | suite --show NAME",
		Short: "reproduce the published experiments: run a matrix of scenarios and give verdicts",
		Long: `A suite is a matrix of cfsprobe runs (limits x workload) with expectations that
turn the numbers into verdicts. The built-in suites reproduce the write-ups
cfsprobe was created from; --show prints one as YAML that you can copy, edit
and run with -f (the format is in docs/suites.md). Values scale with the host:
{cpus} is its number of CPUs, so a suite means the same on 2 CPUs as on 64.

--quick runs the short form (about a minute per suite); without it, the
durations of the write-ups. --scenario runs only the scenarios named (and
those their comparisons are relative to), to measure a part of a suite
again. On a terminal a progress bar shows the ETA. Ctrl-C stops the run in
progress (its cgroup is removed) and keeps what finished.

--simulate runs every scenario on cfsprobe simulate's model instead of a real
cgroup (no root needed; --kernel, --host-cpus, --seed as for simulate; {cpus}
is then the simulated host's), judged by the same expectations. --compare
measures every scenario and simulates it on this host's model (with what the
workload's process cost beside its operations: its start and exit as the
measured run's workload reported them, and a thread's wake-up and how late a
throttled thread runs again after the refill as measured on this host first,
--start-cpu, --exit-cpu, --wake-cpu and --resume-late of cfsprobe simulate
--help; and on the measured run's clock: its period boundaries, --phase of
simulate --help, and its scheduler ticks), and prints the two
side by side: throttled ratio, CPU used, p99 and p99.9, and whether they
agree (within 5 points, 5 %, and 20 % or 2ms, a percentile at its rank or at
the operation below or above it in both runs).

Exit status: 0 when every expectation was met, 1 when one was not, 2 for an
error in the input (nothing runs), 130/143 when interrupted.`,
		Example: `  cfsprobe suite --list
  sudo cfsprobe suite bursty-limits --quick
  sudo cfsprobe suite threads-vs-quota --out results/
  cfsprobe suite --show burst > my-burst.yaml && sudo cfsprobe suite -f my-burst.yaml
  cfsprobe suite threads-vs-quota --simulate --kernel 4.18 --host-cpus 64
  sudo cfsprobe suite bursty-limits --quick --compare
  sudo cfsprobe suite bursty-limits --quick --scenario B-moderate,C-aggressive`,
		Args: cobra.ArbitraryArgs,
		RunE: func(c *cobra.Command, args []string) error {
			out := c.OutOrStdout()
			if (list || show != "") && len(args) > 0 {
				return usageErr("--list and --show take no suite names, but got %q (see: cfsprobe suite --help)", args[0])
			}
			if (list || show != "") && len(scenarios) > 0 {
				return usageErr("--scenario picks the scenarios to run, and --list and --show run none: drop one")
			}
			switch {
			case list:
				return suite.WriteList(out)
			case show != "":
				b, err := suite.BuiltinSource(show)
				if err != nil {
					return &exitError{2, err}
				}
				_, err = out.Write(b)
				return err
			}
			var suites []*suite.Suite
			if file != "" {
				if len(args) > 0 {
					return usageErr("give suite names or -f FILE, not both")
				}
				s, err := suite.LoadFile(file)
				if err != nil {
					return &exitError{2, err}
				}
				suites = append(suites, s)
			}
			for _, name := range args {
				s, err := suite.Load(name)
				if err != nil {
					return &exitError{2, err}
				}
				suites = append(suites, s)
			}
			if len(suites) == 0 {
				return usageErr("name a suite (cfsprobe suite --list) or give -f FILE")
			}
			if len(scenarios) > 0 {
				var err error
				if suites, err = suite.Select(suites, scenarios); err != nil {
					return &exitError{2, err}
				}
			}
			if err := checkParent(parent); err != nil {
				return err
			}
			if outDir != "" {
				if err := check.CheckOutDir(outDir); err != nil {
					return &exitError{2, err}
				}
			}
			env := suite.Env{CPUs: cgroup.OnlineCPUs(hostfs.Default()), Quick: quick}
			if flag := sf.changed(c); flag != "" && !simulate && !compare {
				return usageErr("--%s sets the model of --simulate: add --simulate", flag)
			}
			if simulate || compare {
				if compare && (c.Flags().Changed("kernel") || c.Flags().Changed("host-cpus")) {
					return usageErr("--compare simulates this host to compare with it: drop --kernel and --host-cpus")
				}
				era, cpus, err := sf.model(c)
				if err != nil {
					return err
				}
				env.CPUs = cpus
				env.Sim = &suite.SimEnv{Era: era, Seed: sf.seed, Costs: sf.costs, Measure: compare}
			}
			batch, err := suite.NewBatch(suites, env, lab.Config{Parent: parent, Stdout: os.Stderr, Stderr: os.Stderr})
			if err != nil {
				return &exitError{2, err}
			}
			if err := checkReportPath(reportPath); err != nil {
				return err
			}
			ctx, sig, stop := signalContext()
			defer stop()
			res, err := batch.Run(ctx, suite.BatchOptions{
				Out: out, Progress: os.Stderr, Terminal: isTerminal(os.Stderr), OutDir: outDir, JSON: asJSON,
			})
			defer func() { // after the messages below
				if reportPath != "" && len(res.Traces) > 0 {
					_ = saveReport(reportPath, batch.Title(), res.Traces)
				}
			}()
			switch {
			case err != nil:
				return err
			case res.Interrupted:
				return interrupted(sig(), "the run in progress was stopped and its cgroup removed")
			case res.Failed:
				return &exitError{1, nil}
			}
			return nil
		},
	}
	f := c.Flags()
	f.BoolVar(&list, "list", false, "list the built-in suites")
	f.StringVar(&show, "show", "", "print a built-in suite's YAML")
	f.StringVarP(&file, "file", "f", "", "run the suite in this scenario file")
	f.BoolVar(&quick, "quick", false, "short form: about a minute per suite")
	f.StringSliceVar(&scenarios, "scenario", nil, "run only these scenarios (NAME,NAME or repeated), and those they compare to")
	f.StringVarP(&outDir, "out", "o", "", "save every trace in this directory")
	f.BoolVar(&asJSON, "json", false, "print the traces (with verdicts) as a JSON array instead of the table")
	f.StringVar(&parent, "parent", cgroup.DefaultParent, "group under which the runs' groups are created")
	f.StringVar(&reportPath, "report", "", "write a report of every run: FILE.html (charts and the comparison), .md, .json or .txt")
	f.BoolVar(&simulate, "simulate", false, "simulate every scenario (cfsprobe simulate) instead of measuring it")
	f.BoolVar(&compare, "compare", false, "measure and simulate every scenario, and print them side by side")
	sf.add(f)
	return c
}

func isTerminal(f *os.File) bool {
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}
