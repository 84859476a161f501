package report

import (
	"encoding/json"
	"io"

	"github.com/cfsprobe/cfsprobe/internal/trace"
)

// RunSummary is one run in the JSON output: what scripts need without the
// timeline and the latencies.
type RunSummary struct {
	Name     string          `json:"name"`
	Workload string          `json:"workload"`
	Args     []string        `json:"args"`
	Limits   trace.Limits    `json:"limits"`
	Summary  trace.Summary   `json:"summary"`
	Scenario *trace.Scenario `json:"scenario,omitempty"`
}

// Summaries extracts the per-run summaries.
func Summaries(runs []Named) []RunSummary {
	out := make([]RunSummary, 0, len(runs))
	for _, r := range runs {
		t := r.Trace
		args := t.Spec.Args
		if args == nil {
			args = []string{}
		}
		out = append(out, RunSummary{Name: r.Name, Workload: t.Spec.Workload, Args: args, Limits: t.Limits, Summary: t.Summary, Scenario: t.Scenario})
	}
	return out
}

// JSON writes an array of per-run summaries (name, workload, limits,
// summary, scenario), indented, for scripts.
func JSON(w io.Writer, runs []Named) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(Summaries(runs))
}
