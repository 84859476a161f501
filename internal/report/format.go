package report

import (
	"fmt"
	"io"
	"path/filepath"
	"strings"
)

// Format is an output format of the report command.
type Format string

const (
	FormatText     Format = "text"
	FormatMarkdown Format = "markdown"
	FormatJSON     Format = "json"
	FormatHTML     Format = "html"
)

// Formats lists the formats, for help texts.
var Formats = []Format{FormatText, FormatMarkdown, FormatJSON, FormatHTML}

// ParseFormat checks a format's name; an empty name picks html when the
// output file's name ends in .html (or .htm), else text.
func ParseFormat(name, out string) (Format, error) {
	if name == "" {
		switch strings.ToLower(filepath.Ext(out)) {
		case ".html", ".htm":
			return FormatHTML, nil
		}
		return FormatText, nil
	}
	for _, f := range Formats {
		if Format(name) == f {
			return f, nil
		}
	}
	return "", fmt.Errorf("unknown format %q: use text, markdown, json or html", name)
}

// Write renders the runs in the format.
func Write(w io.Writer, f Format, title string, runs []Named) error {
	switch f {
	case FormatText:
		return Text(w, runs)
	case FormatMarkdown:
		return Markdown(w, title, runs)
	case FormatJSON:
		return JSON(w, runs)
	case FormatHTML:
		return HTML(w, title, runs)
	}
	return fmt.Errorf("unknown format %q", f)
}

// Text writes the terminal report: the summary of one run, or a table of
// several side by side.
func Text(w io.Writer, runs []Named) error {
	switch len(runs) {
	case 0:
		return fmt.Errorf("report: no runs")
	case 1:
		Summary(w, runs[0].Trace)
		return nil
	}
	return Table(w, runs)
}
