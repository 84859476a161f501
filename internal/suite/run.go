package suite

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/cfsprobe/cfsprobe/internal/cgroup"
	"github.com/cfsprobe/cfsprobe/internal/lab"
	"github.com/cfsprobe/cfsprobe/internal/trace"
	"github.com/cfsprobe/cfsprobe/internal/workload"
)

// Env is what scenario values are scaled with.
type Env struct {
	CPUs  int  // online CPUs of the host: {cpus}
	Quick bool // use the vars' quick values
}

// Step is one run of the matrix, validated and ready.
type Step struct {
	Scenario   *Scenario
	Index      int // position of the scenario in the file
	Repetition int // from 1
	Plan       *lab.Plan
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
		plan, err := lab.Prepare(cfg)
		if err != nil {
			var le *cgroup.LimitError
			var ae *workload.ArgError
			switch {
			case errors.As(err, &le):
				return nil, s.limitErr(at, sc, written, le)
			case errors.As(err, &ae):
				return nil, s.errAt(at+".args", "%v", err)
			}
			return nil, s.errAt(at+".workload", "%v", err)
		}
		rep := max(sc.Repeat, 1)
		for r := 1; r <= rep; r++ {
			steps = append(steps, &Step{Scenario: sc, Index: i, Repetition: r, Plan: plan, Config: cfg, Estimate: estimate(sc.Workload, args)})
		}
	}
	return steps, nil
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
	Suite       *Suite
	Traces      []*trace.Trace
	Interrupted bool // stopped by a signal: Traces holds what finished
}

// Verdict is "pass" when every scenario passed, "fail" when one failed,
// "none" without expectations.
func (r *Result) Verdict() string {
	v := "none"
	for _, t := range r.Traces {
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
		tr, err := st.Plan.Run(ctx)
		if errors.Is(err, lab.ErrInterrupted) {
			res.Interrupted = true
			break
		}
		if err != nil {
			return res, fmt.Errorf("scenario %s: %w", st.Name(), err)
		}
		spent += time.Since(t0)
		estimated += st.Estimate
		tr.Scenario = &trace.Scenario{Suite: s.Suite, Name: st.Name(), Description: st.Scenario.Description, Repetition: st.Repetition}
		s.judge(st.Scenario, tr)
		res.Traces = append(res.Traces, tr)
		if opt.Progress != nil {
			opt.Progress.Done(i, len(steps), st, tr)
		}
	}
	s.judgeRelative(res.Traces)
	if opt.OutDir != "" {
		for _, tr := range res.Traces {
			if err := tr.WriteFile(filepath.Join(opt.OutDir, tr.Scenario.Name+".json")); err != nil {
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
