package suite

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/cfsprobe/cfsprobe/internal/cgroup"
	"github.com/cfsprobe/cfsprobe/internal/lab"
	"github.com/cfsprobe/cfsprobe/internal/sim"
	"github.com/cfsprobe/cfsprobe/internal/trace"
	"github.com/cfsprobe/cfsprobe/internal/workload"
)

// Env is what scenario values are scaled with, and how the scenarios run.
type Env struct {
	CPUs  int  // online CPUs of the host (the simulated host's with Sim): {cpus}
	Quick bool // use the vars' quick values
	// Sim, when set, simulates every scenario (internal/sim) instead of
	// measuring it, or beside measuring it (Sim.Measure).
	Sim *SimEnv
}

// SimEnv says how a suite's scenarios are simulated: on a host of
// Env.CPUs CPUs, with the kernel model of Era.
type SimEnv struct {
	Era sim.Era
	// Seed is the model's for a scenario's first repetition; the n-th
	// runs with Seed+n-1.
	Seed uint64
	// Costs are the workload's costs beside its steps (sim.Setup): the
	// parallel workload's event (0: measured on this host), the process's
	// start and a thread's wake-up from a short and from a long sleep (0:
	// with Measure, what the lab's runs cost on this host, MeasureCosts,
	// else the model's defaults).
	Costs sim.Costs
	// Measure runs every scenario on real cgroups too: each step then has
	// a measured and a simulated run, side by side (Result.Simulated).
	Measure bool
}

// measures says whether the scenarios run on real cgroups.
func (e Env) measures() bool { return e.Sim == nil || e.Sim.Measure }

// Step is one run of the matrix, validated and ready: measured (Plan),
// simulated (Sim), or both.
type Step struct {
	Scenario   *Scenario
	Repetition int // from 1
	Plan       *lab.Plan
	Sim        *sim.Plan
	Config     lab.Config
	// Estimate is how long the run should take (for the ETA).
	Estimate time.Duration
}

// Name labels the step: the scenario's name, with #n when repeated.
func (st *Step) Name() string {
	if st.Scenario.Repeat > 1 {
		return fmt.Sprintf("%s#%d", st.Scenario.Name, st.Repetition)
	}
	return st.Scenario.Name
}

var exprRE = regexp.MustCompile(`\{\s*([a-z_][a-z0-9_]*)\s*(?:([*/+-])\s*([0-9]+(?:\.[0-9]+)?)\s*)?\}`)

// expand substitutes {var}, {var*2}, {cpus/2} in s.
func (s *Suite) expand(v string, env Env) (string, error) {
	var err error
	out := exprRE.ReplaceAllStringFunc(v, func(m string) string {
		sm := exprRE.FindStringSubmatch(m)
		var val string
		switch name := sm[1]; {
		case name == "cpus":
			val = strconv.Itoa(env.CPUs)
		default:
			vr, ok := s.Vars[name]
			if !ok {
				err = fmt.Errorf("unknown variable {%s}: define it under vars: (or use {cpus})", name)
				return m
			}
			val = vr.Full
			if env.Quick {
				val = vr.Quick
			}
		}
		if sm[2] == "" {
			return val
		}
		operand, _ := strconv.ParseFloat(sm[3], 64)
		if d, derr := time.ParseDuration(val); derr == nil && val != "0" {
			r, oerr := arith(float64(d), sm[2], operand)
			if oerr != nil {
				err = oerr
				return m
			}
			return time.Duration(r).String()
		}
		x, perr := strconv.ParseFloat(val, 64)
		if perr != nil {
			err = fmt.Errorf("{%s}: %q is not a number", sm[1], val)
			return m
		}
		r, oerr := arith(x, sm[2], operand)
		if oerr != nil {
			err = oerr
			return m
		}
		return strconv.FormatFloat(r, 'f', -1, 64)
	})
	if err == nil && strings.ContainsAny(out, "{}") {
		err = fmt.Errorf("%q: an expression is {name}, {name*2}, {cpus/2}, ...", v)
	}
	return out, err
}

func arith(a float64, op string, b float64) (float64, error) {
	switch op {
	case "*":
		return a * b, nil
	case "/":
		if b == 0 {
			return 0, errors.New("division by zero")
		}
		return a / b, nil
	case "+":
		return a + b, nil
	}
	return a - b, nil
}

// Steps resolves every scenario for this host and validates each run
// (limits, workload, cgroups) with the lab, before anything runs. base
// carries the settings common to all runs (parent group, output streams).
func (s *Suite) Steps(env Env, base lab.Config) ([]*Step, error) {
	var steps []*Step
	for i := range s.Scenarios {
		sc := &s.Scenarios[i]
		at := fmt.Sprintf("scenarios.%d", i)
		cfg := base
		lim, written, err := s.limits(sc, env)
		if err != nil {
			return nil, s.limitErr(at, sc, written, err)
		}
		cfg.Limits = lim
		args := make([]string, len(sc.Args))
		for j, a := range sc.Args {
			if args[j], err = s.expand(a, env); err != nil {
				return nil, s.errAt(fmt.Sprintf("%s.args.%d", at, j), "%v", err)
			}
		}
		if sc.Workload == "command" {
			cfg.Command = make([]string, len(sc.Command))
			for j, a := range sc.Command {
				if cfg.Command[j], err = s.expand(a, env); err != nil {
					return nil, s.errAt(fmt.Sprintf("%s.command.%d", at, j), "%v", err)
				}
			}
		} else {
			cfg.Workload, cfg.WorkloadArgs = sc.Workload, args
		}
		// prepareErr places an error of the lab or the simulator.
		prepareErr := func(err error) error {
			var le *cgroup.LimitError
			var ae *workload.ArgError
			switch {
			case errors.As(err, &le):
				return s.limitErr(at, sc, written, le)
			case errors.As(err, &ae):
				return s.errAt(at+".args", "%v", err)
			}
			return s.errAt(at+".workload", "%v", err)
		}
		var plan *lab.Plan
		var est time.Duration // a simulation's time is not estimated
		if env.measures() {
			if plan, err = lab.Prepare(cfg); err != nil {
				return nil, prepareErr(err)
			}
			est = estimate(sc.Workload, args)
		}
		if env.Sim != nil && sc.Workload == "command" {
			return nil, s.errAt(at+".workload", "a command cannot be simulated: simulate a built-in workload (%s), or leave --simulate out", strings.Join(sim.Workloads(), ", "))
		}
		rep := max(sc.Repeat, 1)
		for r := 1; r <= rep; r++ {
			st := &Step{Scenario: sc, Repetition: r, Plan: plan, Config: cfg, Estimate: est}
			if env.Sim != nil {
				st.Sim, err = sim.Prepare(sim.Setup{
					Workload: sc.Workload, Args: args, Limits: lim, Era: env.Sim.Era, CPUs: env.CPUs,
					Seed: env.Sim.Seed + uint64(r-1), Costs: env.Sim.Costs, Version: lab.Version,
				})
				if err != nil {
					return nil, prepareErr(err)
				}
			}
			steps = append(steps, st)
		}
	}
	return steps, nil
}

// run runs the step: on real cgroups, on the simulator, or both. The
// first trace is the measured one (nil when not measured), the second
// the simulated one (nil when not simulated). A simulation beside a
// measured run has its period boundaries and its ticks where the run had
// them (sim.Plan.WithRunOf): where they fall against the workload is
// the kernel clock's chance, not the model's, and a burst that a
// boundary cuts is throttled differently from one inside a period, and
// a thread stopped at a tick overruns its runtime by where the tick is.
func (st *Step) run(ctx context.Context) (measured, simulated *trace.Trace, err error) {
	if st.Plan != nil {
		if measured, err = st.Plan.Run(ctx); err != nil {
			return nil, nil, err
		}
	}
	if st.Sim != nil {
		if ctx.Err() != nil {
			return nil, nil, lab.ErrInterrupted
		}
		if simulated, err = st.Sim.WithRunOf(measured).Run(); err != nil {
			return nil, nil, err
		}
	}
	return measured, simulated, nil
}

// limits turns the scenario's limits into cgroup limits, with the values
// as written after {var} expansion (for messages). The period is the
// kernel's default when the file gives none.
func (s *Suite) limits(sc *Scenario, env Env) (cgroup.Limits, map[cgroup.Field]string, error) {
	l := cgroup.Limits{Period: cgroup.DefaultPeriod}
	written := map[cgroup.Field]string{}
	// field reads one field's text; an error is the field's too.
	field := func(f cgroup.Field, v string) (string, error) {
		if v == "" {
			return "", nil
		}
		x, err := s.expand(v, env)
		written[f] = x
		if err != nil {
			return "", &fieldError{f, err}
		}
		return x, nil
	}
	dur := func(f cgroup.Field, v string, dst *time.Duration) error {
		x, err := field(f, v)
		if err != nil || x == "" {
			return err
		}
		d, err := time.ParseDuration(x)
		if err != nil {
			return &fieldError{f, fmt.Errorf("%q is not a duration like 100ms", x)}
		}
		*dst = d
		return nil
	}
	if err := dur(cgroup.FieldPeriod, sc.Limits.Period, &l.Period); err != nil {
		return l, written, err
	}
	if err := dur(cgroup.FieldQuota, sc.Limits.Quota, &l.Quota); err != nil {
		return l, written, err
	}
	if err := dur(cgroup.FieldBurst, sc.Limits.Burst, &l.Burst); err != nil {
		return l, written, err
	}
	if sc.Limits.Quota != "" && l.Quota == 0 {
		return l, written, &fieldError{cgroup.FieldQuota, errors.New("0 is no quota: leave quota: out for no limit")}
	}
	x, err := field(cgroup.FieldCPUs, sc.Limits.CPUs)
	if err != nil {
		return l, written, err
	}
	if x != "" {
		if sc.Limits.Quota != "" {
			return l, written, &fieldError{cgroup.FieldCPUs, errors.New("give cpus or quota, not both")}
		}
		c, err := strconv.ParseFloat(x, 64)
		if err != nil {
			return l, written, &fieldError{cgroup.FieldCPUs, fmt.Errorf("%q is not a number of CPUs like 0.5", x)}
		}
		cl, err := cgroup.CPULimits(c, l.Period)
		if err != nil {
			return l, written, err
		}
		l.Quota = cl.Quota
	}
	if l.Cpuset, err = field(cgroup.FieldCpuset, sc.Limits.Cpuset); err != nil {
		return l, written, err
	}
	return l, written, l.Validate()
}

// fieldError is a limits field that cannot be read.
type fieldError struct {
	field cgroup.Field
	err   error
}

func (e *fieldError) Error() string { return e.err.Error() }

// limitErr places an error of the scenario's limits at its field, in the
// file's words: the value as written, what is wrong, and what would do.
func (s *Suite) limitErr(at string, sc *Scenario, written map[cgroup.Field]string, err error) error {
	var fe *fieldError
	if errors.As(err, &fe) {
		return s.errAt(at+".limits."+string(fe.field), "%v", fe.err)
	}
	var le *cgroup.LimitError
	if !errors.As(err, &le) {
		return s.errAt(at+".limits", "%v", err)
	}
	if sc.Limits.CPUs != "" {
		le = le.OfCPUs(written[cgroup.FieldCPUs])
	}
	f, value := le.Field, written[le.Field]
	if value == "" { // a default, not in the file
		value = le.Value
	}
	msg := value + " " + le.Reason
	switch want := le.Want(); {
	case want != "":
		msg += ": use " + want
	case errors.Is(le, cgroup.ErrNoBurst):
		msg += ": remove burst: or use Linux 5.14 or newer"
	case f == cgroup.FieldBurst:
		msg += ": add quota: or cpus:, or remove burst:"
	case f == cgroup.FieldCPUs:
		msg += ": give a positive number such as 0.5"
	}
	return s.errAt(at+".limits."+string(f), "%s", msg)
}

// estimate guesses a run's length: a built-in workload's own, and a little
// to start and stop; a command's cannot be known.
func estimate(name string, args []string) time.Duration {
	w, err := workload.Parse(name, args)
	if err != nil {
		return 5 * time.Second
	}
	return w.Length() + 200*time.Millisecond
}

// Progress receives the runner's progress.
type Progress interface {
	Start(i, n int, st *Step, eta time.Duration)
	Done(i, n int, st *Step, tr *trace.Trace)
	Finish()
}

// Options control a suite run.
type Options struct {
	OutDir   string // save each trace as OutDir/<scenario>.json
	Progress Progress
}

// Result is a suite run: the traces in matrix order, each with its
// scenario and verdict.
type Result struct {
	Suite *Suite
	// Traces are the runs: measured, or simulated when the suite was only
	// simulated.
	Traces []*trace.Trace
	// Simulated, when the suite was measured and simulated, holds the
	// simulated run of each of Traces, in the same order.
	Simulated   []*trace.Trace
	Interrupted bool // stopped by a signal: Traces holds what finished
}

// Verdict is "pass" when every scenario passed (measured and simulated),
// "fail" when one failed, "none" without expectations.
func (r *Result) Verdict() string {
	v := "none"
	for _, t := range slices.Concat(r.Traces, r.Simulated) {
		switch t.Scenario.Verdict {
		case "fail":
			return "fail"
		case "pass":
			v = "pass"
		}
	}
	return v
}

// Run runs the steps in order. Cancelling ctx stops the run in progress
// (its group is removed) and returns what finished, with Interrupted set.
func (s *Suite) Run(ctx context.Context, steps []*Step, opt Options) (*Result, error) {
	res := &Result{Suite: s}
	if opt.OutDir != "" {
		if err := os.MkdirAll(opt.OutDir, 0o755); err != nil {
			return nil, err
		}
	}
	var spent, estimated time.Duration
	for i, st := range steps {
		var rest time.Duration
		for _, o := range steps[i:] {
			rest += o.Estimate
		}
		if estimated > 0 {
			rest = time.Duration(float64(rest) * float64(spent) / float64(estimated))
		}
		if opt.Progress != nil {
			opt.Progress.Start(i, len(steps), st, rest)
		}
		t0 := time.Now()
		measured, simulated, err := st.run(ctx)
		if errors.Is(err, lab.ErrInterrupted) {
			res.Interrupted = true
			break
		}
		if err != nil {
			return res, fmt.Errorf("scenario %s: %w", st.Name(), err)
		}
		spent += time.Since(t0)
		estimated += st.Estimate
		for _, tr := range []*trace.Trace{measured, simulated} {
			if tr != nil {
				tr.Scenario = &trace.Scenario{Suite: s.Suite, Name: st.Name(), Description: st.Scenario.Description, Repetition: st.Repetition}
				s.judge(st.Scenario, tr)
			}
		}
		tr := measured
		switch {
		case measured == nil:
			tr = simulated
		case simulated != nil:
			res.Simulated = append(res.Simulated, simulated)
		}
		res.Traces = append(res.Traces, tr)
		if opt.Progress != nil {
			opt.Progress.Done(i, len(steps), st, tr)
		}
	}
	s.judgeRelative(res.Traces)
	s.judgeRelative(res.Simulated)
	if opt.OutDir != "" {
		for _, tr := range res.Traces {
			if err := tr.WriteFile(filepath.Join(opt.OutDir, tr.Scenario.Name+".json")); err != nil {
				return res, err
			}
		}
		for _, tr := range res.Simulated {
			if err := tr.WriteFile(filepath.Join(opt.OutDir, tr.Scenario.Name+".simulated.json")); err != nil {
				return res, err
			}
		}
	}
	if opt.Progress != nil {
		opt.Progress.Finish()
	}
	return res, nil
}

// judge evaluates the scenario's absolute expectations.
func (s *Suite) judge(sc *Scenario, tr *trace.Trace) {
	for _, name := range sortedKeys(sc.Expect) {
		v, ok := Metrics[name].Get(tr)
		tr.Scenario.Expectations = append(tr.Scenario.Expectations, evaluate(name, sc.Expect[name], v, ok, ""))
	}
	setVerdict(tr)
}

// judgeRelative evaluates comparisons between scenarios, once all ran.
// With repetitions, the first repetition of the other scenario is used.
func (s *Suite) judgeRelative(traces []*trace.Trace) {
	first := map[string]*trace.Trace{}
	bySc := map[*trace.Trace]*Scenario{}
	for _, tr := range traces {
		for i := range s.Scenarios {
			sc := &s.Scenarios[i]
			if tr.Scenario.Name == sc.Name || strings.HasPrefix(tr.Scenario.Name, sc.Name+"#") {
				bySc[tr] = sc
				if _, ok := first[sc.Name]; !ok {
					first[sc.Name] = tr
				}
			}
		}
	}
	for _, tr := range traces {
		sc := bySc[tr]
		if sc == nil || len(sc.Compare) == 0 {
			continue
		}
		for _, c := range sc.Compare {
			other, ok := first[c.To]
			v1, ok1 := Metrics[c.Metric].Get(tr)
			var v2 float64
			ok2 := false
			if ok {
				v2, ok2 = Metrics[c.Metric].Get(other)
			}
			ratio, okr := 0.0, ok1 && ok2
			if okr {
				switch {
				case v2 != 0:
					ratio = v1 / v2
				case v1 == 0:
					ratio = 1 // 0 against 0: no change
				default:
					ratio = math.Inf(1)
				}
			}
			tr.Scenario.Expectations = append(tr.Scenario.Expectations, evaluate(c.Metric, Bound{Min: c.MinRatio, Max: c.MaxRatio}, ratio, okr, c.To))
		}
		setVerdict(tr)
	}
}

func setVerdict(tr *trace.Trace) {
	v := "none"
	for _, e := range tr.Scenario.Expectations {
		if !e.OK {
			v = "fail"
			break
		}
		v = "pass"
	}
	tr.Scenario.Verdict = v
}

func sortedKeys(m map[string]Bound) []string {
	var k []string
	for x := range m {
		k = append(k, x)
	}
	sort.Strings(k)
	return k
}
