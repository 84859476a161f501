package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/cfsprobe/cfsprobe/internal/cgroup"
	"github.com/cfsprobe/cfsprobe/internal/check"
	"github.com/cfsprobe/cfsprobe/internal/lab"
	"github.com/cfsprobe/cfsprobe/internal/suite"
	"github.com/cfsprobe/cfsprobe/internal/trace"
)

func newSuiteCmd() *cobra.Command {
	var list, quick, asJSON bool
	var show, file, outDir, parent, reportPath string
	c := &cobra.Command{
		Use:   "suite NAME... | suite -f FILE | suite --list | suite --show NAME",
		Short: "reproduce the published experiments: run a matrix of scenarios and give verdicts",
		Long: `A suite is a matrix of cfsprobe runs (limits x workload) with expectations that
turn the numbers into verdicts. The built-in suites reproduce the write-ups
cfsprobe was created from; --show prints one as YAML that you can copy, edit
and run with -f (the format is in docs/suites.md). Values scale with the host:
{cpus} is its number of CPUs, so a suite means the same on 2 CPUs as on 64.

--quick runs the short form (about a minute per suite); without it, the
durations of the write-ups. On a terminal a progress bar shows the ETA. Ctrl-C
stops the run in progress (its cgroup is removed) and keeps what finished.

Exit status: 0 when every expectation was met, 1 when one was not, 2 for an
error in the input (nothing runs), 130/143 when interrupted.`,
		Example: `  cfsprobe suite --list
  sudo cfsprobe suite bursty-limits --quick
  sudo cfsprobe suite threads-vs-quota --out results/
  cfsprobe suite --show burst > my-burst.yaml && sudo cfsprobe suite -f my-burst.yaml`,
		Args: cobra.ArbitraryArgs,
		RunE: func(c *cobra.Command, args []string) error {
			out := c.OutOrStdout()
			switch {
			case list:
				all, err := suite.Builtin()
				if err != nil {
					return err
				}
				tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
				for _, s := range all {
					fmt.Fprintf(tw, "%s\t%d scenarios\t%s\n", s.Suite, len(s.Scenarios), s.Source)
				}
				return tw.Flush()
			case show != "":
				b, ok := suite.BuiltinSource(show)
				if !ok {
					_, err := suite.Load(show)
					return &exitError{2, err}
				}
				_, err := out.Write(b)
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
			if err := checkParent(parent); err != nil {
				return err
			}
			if outDir != "" {
				if err := check.CheckOutDir(outDir); err != nil {
					return &exitError{2, err}
				}
			}
			env := suite.Env{CPUs: cgroup.OnlineCPUs("/sys"), Quick: quick}
			base := lab.Config{Parent: parent, Stdout: os.Stderr, Stderr: os.Stderr}
			// Validate every scenario of every suite before anything runs.
			var plans [][]*suite.Step
			for _, s := range suites {
				steps, err := s.Steps(env, base)
				if err != nil {
					return &exitError{2, err}
				}
				plans = append(plans, steps)
			}
			if err := checkReportPath(reportPath); err != nil {
				return err
			}
			ctx, sig, stop := signalContext()
			defer stop()
			failed := false
			var all []*trace.Trace
			title := ""
			if len(suites) == 1 {
				title = "cfsprobe suite " + suites[0].Suite
			}
			defer func() {
				if reportPath != "" && len(all) > 0 {
					_ = saveReport(reportPath, title, all)
				}
			}()
			for i, s := range suites {
				fmt.Fprintf(out, "suite %s (%d runs%s): %s\n", s.Suite, len(plans[i]), map[bool]string{true: ", quick", false: ""}[quick], s.Source)
				dir := ""
				if outDir != "" {
					dir = outDir
					if len(suites) > 1 {
						dir = outDir + "/" + s.Suite
					}
				}
				prog := &suite.TermProgress{W: os.Stderr, Terminal: isTerminal(os.Stderr)}
				res, err := s.Run(ctx, plans[i], suite.Options{OutDir: dir, Progress: prog})
				if res != nil && len(res.Traces) > 0 || res != nil && res.Interrupted {
					if asJSON {
						if err := writeJSON(out, res.Traces); err != nil {
							return err
						}
					} else {
						fmt.Fprintln(out)
						if err := res.WriteTable(out); err != nil {
							return err
						}
					}
					if dir != "" {
						fmt.Fprintf(out, "traces in %s/\n", dir)
					}
				}
				if res != nil {
					all = append(all, res.Traces...)
				}
				if err != nil {
					return err
				}
				if res.Interrupted {
					return interrupted(sig(), "the run in progress was stopped and its cgroup removed")
				}
				failed = failed || res.Verdict() == "fail"
				fmt.Fprintln(out)
			}
			if failed {
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
	f.StringVarP(&outDir, "out", "o", "", "save every trace in this directory")
	f.BoolVar(&asJSON, "json", false, "print the traces (with verdicts) as a JSON array instead of the table")
	f.StringVar(&parent, "parent", cgroup.DefaultParent, "group under which the runs' groups are created")
	f.StringVar(&reportPath, "report", "", "write a report of every run: FILE.html (charts and the comparison), .md, .json or .txt")
	return c
}

func isTerminal(f *os.File) bool {
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
