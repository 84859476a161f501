package main

import (
	"bytes"
	"os"

	"github.com/spf13/cobra"

	"github.com/cfsprobe/cfsprobe/internal/report"
)

func newReportCmd() *cobra.Command {
	var format, out, title string
	c := &cobra.Command{
		Use:   "report TRACE...",
		Short: "show saved traces: a summary, a side-by-side table, or an HTML report with charts",
		Long: `Reads traces saved with cfsprobe run --out (or --json) and shows them for people.
A trace is shown under its file name without .json; give NAME=FILE to choose
the label. Markdown and html show runs that are part of a suite under their
scenario names.

Formats (--format; the default is html when --out ends in .html, else text):
  text      the summary of one run, or a table comparing several
  markdown  the comparison table and each run's key numbers, as GitHub markdown
  json      an array of per-run summaries (name, workload, limits, summary, scenario)
  html      one self-contained page (no network needed) with, for each run, its
            key numbers, a per-period timeline of CPU used against the quota with
            throttled periods and stall time, a latency histogram with percentiles
            and the in-period throughput profile; several runs also get a
            comparison table and bars`,
		Example: `  cfsprobe run --out free.json parallel --threads 2 --duration 3s
  cfsprobe run --out limited.json --cpus 1 parallel --threads 2 --duration 3s
  cfsprobe report free.json limited.json
  cfsprobe report -o report.html free.json limited.json`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) == 0 {
				return usageErr("no trace to show: give one or more traces saved by cfsprobe run, record or simulate with --out (see: cfsprobe report --help)")
			}
			return nil
		},
		RunE: func(c *cobra.Command, args []string) error {
			f, err := report.ParseFormat(format, out)
			if err != nil {
				return usageErr("--format: %v", err)
			}
			if out != "-" {
				if err := checkOutFile("--out", out); err != nil {
					return err
				}
			}
			var runs []report.Named
			for _, a := range args {
				name, t, err := namedTrace(a)
				if err != nil {
					return err
				}
				runs = append(runs, report.Named{Name: name, Trace: t})
			}
			// Render before creating the output file: nothing is left
			// behind when rendering fails.
			var b bytes.Buffer
			if err := report.Write(&b, f, title, runs); err != nil {
				return err
			}
			if out == "" || out == "-" {
				_, err := c.OutOrStdout().Write(b.Bytes())
				return err
			}
			return os.WriteFile(out, b.Bytes(), 0o644)
		},
	}
	c.Flags().StringVar(&format, "format", "", "output format: text, markdown, json or html (default html for an --out ending in .html, else text)")
	c.Flags().StringVarP(&out, "out", "o", "", "write the report to this file instead of standard output")
	c.Flags().StringVar(&title, "title", "", "title of a markdown or html report (default: the suite's name or the run's)")
	return c
}
