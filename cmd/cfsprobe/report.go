package main

import (
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/cfsprobe/cfsprobe/internal/report"
	"github.com/cfsprobe/cfsprobe/internal/trace"
)

func newReportCmd() *cobra.Command {
	var format string
	c := &cobra.Command{
		Use:   "report TRACE...",
		Short: "show saved traces: one run's summary, or several side by side",
		Long: `Reads traces saved with cfsprobe run --out (or --json) and prints them for people:
the summary of one run, or a table comparing several. A trace is shown under
its file name without .json; give NAME=FILE to choose the label.`,
		Example: `  cfsprobe run --out free.json parallel --threads 2 --duration 3s
  cfsprobe run --out limited.json --cpus 1 parallel --threads 2 --duration 3s
  cfsprobe report free.json limited.json`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			if format != "text" {
				return usageErr("--format %q is not supported yet: use text", format)
			}
			var runs []report.Named
			for _, a := range args {
				name, path, ok := strings.Cut(a, "=")
				if !ok {
					path = a
					name = strings.TrimSuffix(filepath.Base(a), ".json")
				}
				t, err := trace.ReadFile(path)
				if err != nil {
					return usageErr("%v", err)
				}
				runs = append(runs, report.Named{Name: name, Trace: t})
			}
			if len(runs) == 1 {
				report.Summary(c.OutOrStdout(), runs[0].Trace)
				return nil
			}
			return report.Table(c.OutOrStdout(), runs)
		},
	}
	c.Flags().StringVar(&format, "format", "text", "output format: text")
	return c
}
