package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/cfsprobe/cfsprobe/internal/report"
	"github.com/cfsprobe/cfsprobe/internal/trace"
)

// The --report FILE flag of run, suite and check: the format follows the
// file's extension (.html, .md, .json, .txt; HTML otherwise).
func reportFormat(path string) report.Format {
	switch strings.ToLower(filepath.Ext(path)) {
	case ".md", ".markdown":
		return report.FormatMarkdown
	case ".json":
		return report.FormatJSON
	case ".txt":
		return report.FormatText
	}
	return report.FormatHTML
}

// checkReportPath fails early (before anything runs) when the report
// cannot be written there.
func checkReportPath(path string) error { return checkOutFile("--report", path) }

// checkOutFile fails early (before anything runs or is read) when the
// file that flag names cannot be written: its directory is missing, or it
// is a directory. "" is no file.
func checkOutFile(flag, path string) error {
	if path == "" {
		return nil
	}
	dir := filepath.Dir(path)
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		return usageErr("%s %s: directory %s does not exist: create it or choose another path", flag, path, dir)
	}
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		return usageErr("%s %s is a directory: give a file name such as report.html", flag, path)
	}
	return nil
}

// saveReport renders the traces and writes the report.
func saveReport(path, title string, traces []*trace.Trace) error {
	runs := make([]report.Named, 0, len(traces))
	for _, t := range traces {
		name := report.Label(t)
		if t.Scenario != nil {
			name = t.Scenario.Name
		}
		runs = append(runs, report.Named{Name: name, Trace: t})
	}
	var buf bytes.Buffer
	if err := report.Write(&buf, reportFormat(path), title, runs); err != nil {
		return fmt.Errorf("render the report: %w", err)
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		return fmt.Errorf("write the report: %w", err)
	}
	fmt.Fprintf(os.Stderr, "cfsprobe: report written to %s\n", path)
	return nil
}
