package suite

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"text/tabwriter"

	"github.com/cfsprobe/cfsprobe/internal/lab"
	"github.com/cfsprobe/cfsprobe/internal/sim"
	"github.com/cfsprobe/cfsprobe/internal/trace"
)

// WriteList lists the built-in suites: name, number of scenarios and the
// write-up each reproduces.
func WriteList(w io.Writer) error {
	all, err := Builtin()
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, s := range all {
		fmt.Fprintf(tw, "%s\t%d scenarios\t%s\n", s.Suite, len(s.Scenarios), s.Source)
	}
	return tw.Flush()
}

// Batch is the suites of one cfsprobe suite command, every scenario of
// every suite resolved for the host and validated with the lab before any
// of them runs.
type Batch struct {
	Suites []*Suite
	env    Env
	base   lab.Config
	steps  [][]*Step // steps[i] are Suites[i]'s
}

// NewBatch resolves and validates the suites' runs (Steps). An error is
// the first suite's that has one; nothing has been created.
func NewBatch(suites []*Suite, env Env, base lab.Config) (*Batch, error) {
	b := &Batch{Suites: suites, env: env, base: base}
	for _, s := range suites {
		steps, err := s.Steps(env, base)
		if err != nil {
			return nil, err
		}
		b.steps = append(b.steps, steps)
	}
	return b, nil
}

// Title is the title of a report of the batch: the command of its one
// suite, or none for several.
func (b *Batch) Title() string {
	if len(b.Suites) == 1 {
		return "cfsprobe suite " + b.Suites[0].Suite
	}
	return ""
}

// BatchOptions say where a batch's output goes.
type BatchOptions struct {
	Out      io.Writer // each suite's heading, then its table (or JSON) and where its traces are
	Progress io.Writer // progress of the runs (TermProgress); nil: none
	Terminal bool      // Progress is a terminal: a bar redrawn in place
	// OutDir is where the traces are saved (none when empty): OutDir
	// itself for one suite, OutDir/<suite> for each of several.
	OutDir string
	JSON   bool // print each suite's traces as a JSON array instead of its table (the measured, then the simulated)
}

// BatchResult is what a batch ran.
type BatchResult struct {
	Traces      []*trace.Trace // the runs that finished, in order (a simulated one after its measured one)
	Interrupted bool           // stopped by ctx in a suite; the suites after it did not run
	Failed      bool           // a suite that ran to its end has an expectation not met
}

// Run runs the suites in order: for each, a heading, the runs with their
// progress, then the table (or the traces as JSON), and the traces saved
// under opt.OutDir. It stops at the first suite interrupted (cancelling
// ctx stops the run in progress and removes its group) or failing to
// run; the result holds what finished until then.
func (b *Batch) Run(ctx context.Context, opt BatchOptions) (*BatchResult, error) {
	out := &BatchResult{}
	if err := b.measureCosts(ctx); err != nil {
		if ctx.Err() != nil {
			out.Interrupted = true
			return out, nil
		}
		return out, err
	}
	how := ""
	if b.env.Quick {
		how = ", quick"
	}
	if e := b.env.Sim; e != nil {
		what := "simulated"
		if e.Measure {
			what = "measured and simulated"
		}
		how += fmt.Sprintf(", %s on kernel era %s with %d CPUs", what, e.Era, b.env.CPUs)
	}
	for i, s := range b.Suites {
		// With JSON, Out holds the traces alone: the heading goes with
		// the progress, if any.
		head := opt.Out
		if opt.JSON {
			head = cmp.Or[io.Writer](opt.Progress, io.Discard)
		}
		fmt.Fprintf(head, "suite %s (%d runs%s): %s\n", s.Suite, len(b.steps[i]), how, s.Source)
		dir := opt.OutDir
		if dir != "" && len(b.Suites) > 1 {
			dir = opt.OutDir + "/" + s.Suite
		}
		var prog Progress
		if opt.Progress != nil {
			prog = &TermProgress{W: opt.Progress, Terminal: opt.Terminal}
		}
		res, err := s.Run(ctx, b.steps[i], Options{OutDir: dir, Progress: prog})
		if res != nil && (len(res.Traces) > 0 || res.Interrupted) {
			if werr := res.write(opt.Out, opt.JSON, dir); werr != nil {
				return out, werr
			}
		}
		if res != nil {
			for j, t := range res.Traces { // a simulated run beside its measured one
				out.Traces = append(out.Traces, t)
				if j < len(res.Simulated) {
					out.Traces = append(out.Traces, res.Simulated[j])
				}
			}
		}
		if err != nil {
			return out, err
		}
		if res.Interrupted {
			out.Interrupted = true
			return out, nil
		}
		out.Failed = out.Failed || res.Verdict() == "fail"
		fmt.Fprintln(opt.Out)
	}
	return out, nil
}

// write prints a suite's result: its table, or its traces as a JSON
// array, and the directory they were saved in (none when empty).
func (r *Result) write(w io.Writer, asJSON bool, dir string) error {
	if asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		if err := enc.Encode(slices.Concat(r.Traces, r.Simulated)); err != nil {
			return err
		}
	} else {
		fmt.Fprintln(w)
		if err := r.WriteTable(w); err != nil {
			return err
		}
	}
	if dir != "" {
		fmt.Fprintf(w, "traces in %s/\n", dir)
	}
	return nil
}

// measureCosts gives the simulated runs of a batch that also measures
// (--compare) what a thread of the workload costs on this host beside
// its operations, and how late its sleeps end, as the lab's runs are charged them (MeasureCosts),
// unless the environment gives them; each simulation takes its measured
// run's start and exit (Step.run).
func (b *Batch) measureCosts(ctx context.Context) error {
	e := b.env.Sim
	if e == nil || !e.Measure || e.Costs.Thread > 0 && e.Costs.Wake > 0 && e.Costs.WakeMid > 0 && e.Costs.WakeLong > 0 && e.Costs.SleepLate > 0 && e.Costs.ResumeLate > 0 {
		return nil
	}
	c, err := MeasureCosts(ctx, b.base)
	if err != nil {
		return err
	}
	c = sim.Costs{Start: e.Costs.Start, Exit: e.Costs.Exit, Thread: cmp.Or(e.Costs.Thread, c.Thread), Wake: cmp.Or(e.Costs.Wake, c.Wake), WakeMid: cmp.Or(e.Costs.WakeMid, c.WakeMid), WakeLong: cmp.Or(e.Costs.WakeLong, c.WakeLong), SleepLate: cmp.Or(e.Costs.SleepLate, c.SleepLate), ResumeLate: cmp.Or(e.Costs.ResumeLate, c.ResumeLate)}
	for _, steps := range b.steps {
		for _, st := range steps {
			if st.Sim != nil {
				st.Sim = st.Sim.WithCosts(c)
			}
		}
	}
	return nil
}
