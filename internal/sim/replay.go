package sim

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/cfsprobe/cfsprobe/internal/cgroup"
	"github.com/cfsprobe/cfsprobe/internal/trace"
	"github.com/cfsprobe/cfsprobe/internal/workload"
)

// This file is replay: a trace's per-period demand (a lab run, a
// recorded live group, another simulation) turned into simulated threads,
// so that it can be simulated under other limits. docs/simulate.md
// ("Replay") describes the method, its assumptions and its limits.
//
// A throttled period's usage is a lower bound of what the group wanted:
// it stood still for the period's stall. What it would have done then is
// taken to be the work of the time it stood still at the parallelism it
// ran with (running CPUs × stall); whether that is extra demand or the
// same work done later depends on the workload (Demand):
//
//   - closed: a closed loop (fixed work; a client that waits for each
//     answer): the stall only delayed the work. The replay is the run
//     with its stalls cut out: the same work, sooner, and every pause
//     kept as it was.
//   - scheduled: fixed work that comes at its own times (a job every
//     second): as closed, but a burst after an idle pause comes when it
//     came in the trace, not earlier by the stalls before it; under a
//     tighter limit it waits for the one before to finish.
//   - open: work arrives on its own clock and queues while the group
//     stands still. The work missed in a stall is extra demand of that
//     period, and the usage of later periods that served it is not new.
//   - timed: a loop that runs for a time, not for an amount of work
//     (a busy-wait for a wall time, a run for a duration): the work
//     missed in a stall is never done. The replay keeps the group
//     running through the stall.
//
// The work of a period arrives at its start and runs at the group's
// parallelism (where a throttled period shows the group ran from its
// start until the quota ran out); each CPU's share is a lane, one
// simulated thread, that keeps the workload's response to a limit: a
// closed lane's pauses are relative to the end of its work, a scheduled
// lane's too but for a pause before a burst after an idle one, which ends
// at a fixed time, an open lane's work arrives at fixed times and queues,
// a timed lane spins until a fixed time.

// Demand names how a workload answers its group standing still: how the
// work a throttled period could not do is reconstructed.
type Demand string

const (
	// DemandClosed: the work was delayed, not lost or added to.
	DemandClosed Demand = "closed"
	// DemandScheduled: the work was delayed, and the work that came
	// after an idle pause came at its time all the same.
	DemandScheduled Demand = "scheduled"
	// DemandOpen: work kept arriving and queued.
	DemandOpen Demand = "open"
	// DemandTimed: the work of the time the group stood still was lost.
	DemandTimed Demand = "timed"
)

// Demands lists the methods.
func Demands() []Demand { return []Demand{DemandClosed, DemandScheduled, DemandOpen, DemandTimed} }

// ParseDemand reads a method's name.
func ParseDemand(s string) (Demand, error) {
	for _, d := range Demands() {
		if string(d) == s {
			return d, nil
		}
	}
	return "", fmt.Errorf("demand %q is not one of %s", s, DemandNames())
}

// DemandNames lists the methods' names for people: "closed, scheduled,
// open, timed".
func DemandNames() string {
	names := make([]string, len(Demands()))
	for i, d := range Demands() {
		names[i] = string(d)
	}
	return strings.Join(names, ", ")
}

// ReplayOptions say how to replay a trace.
type ReplayOptions struct {
	// Demand is the method ("": the trace's own, TraceDemand).
	Demand Demand
	// Parallelism is the number of CPUs the group's work runs on at once
	// (0: read from the trace, see docs/simulate.md).
	Parallelism int
	// Scale multiplies the demand: each period's work, at Scale times the
	// parallelism, in the same time (0: 1).
	Scale float64
	// Source names the trace in the record (its file).
	Source string
}

// MaxReplayScale bounds ReplayOptions.Scale.
const MaxReplayScale = 100

// MaxReplayLanes bounds the simulated threads of a replay (the
// parallelism times the scale).
const MaxReplayLanes = 4096

// ErrNoPeriods is a trace without periods: there is no demand to replay.
var ErrNoPeriods = errors.New("the trace has no periods")

// Replay turns a trace's per-period demand into simulated threads, and
// says how in the record the simulated trace keeps (spec.simulated.replay).
// The threads' time 0 is the start of the trace's first period. Errors
// are the trace's (ErrNoPeriods, no period length) or the options'.
func Replay(tr *trace.Trace, opt ReplayOptions) ([]Thread, *trace.Replay, error) {
	r, err := NewReplayer(tr, opt)
	if err != nil {
		return nil, nil, err
	}
	return r.Threads(), r.Record(), nil
}

// Replayer is a trace's demand reconstructed once, as Replay does, that
// gives new simulated threads for every run of it: the recommender
// simulates one group's demand under many settings.
type Replayer struct {
	lanes [][]laneStep // read only: the runs' threads share them
	rec   *trace.Replay
}

// NewReplayer reconstructs a trace's demand (Replay's errors).
func NewReplayer(tr *trace.Trace, opt ReplayOptions) (*Replayer, error) {
	d, rec, err := reconstruct(tr, opt)
	if err != nil {
		return nil, err
	}
	return &Replayer{lanes: d.laneSteps(), rec: rec}, nil
}

// Threads are the replay's simulated threads, new ones for every run (a
// thread keeps its place in its steps as it runs).
func (r *Replayer) Threads() []Thread { return laneThreads(r.lanes) }

// Record says how the demand was made (spec.simulated.replay): a copy.
func (r *Replayer) Record() *trace.Replay {
	c := *r.rec
	return &c
}

// TraceDemand is the method a trace is replayed with by default, and who
// chose it: a built-in workload's flags say whether it burns CPU time
// (closed; scheduled when its bursts come --every) or wall time (timed);
// a synthetic trace (Spec.Synthetic), whose periods stand for a
// distribution of per-period demand in no real order, is replayed period
// by period, each wanting its own demand and none of it carried to
// another (timed), unless the throttled stretches the exporter counted
// show a closed loop (Spec.Stretches, Stretches.Closed): then its usage
// is its work, only delayed (closed); anything else, a command or a
// recorded group, is taken for a service whose requests come on their
// own (open).
func TraceDemand(spec trace.Spec) (Demand, string) {
	if spec.Synthetic != "" {
		if st := spec.Stretches; st != nil && st.Closed() {
			return DemandClosed, trace.FromSynthetic
		}
		return DemandTimed, trace.FromSynthetic
	}
	if p := spec.Params; p != nil {
		// --burn-cpu and --on-cpu, when set, take the place of --burn
		// and --on; parallel runs for --duration unless --events ends it.
		switch {
		case p.Bursty != nil && p.Bursty.OnCPU > 0 && p.Bursty.Every > 0:
			return DemandScheduled, trace.FromParams
		case p.Periodic != nil && p.Periodic.BurnCPU > 0, p.Bursty != nil && p.Bursty.OnCPU > 0,
			p.Parallel != nil && p.Parallel.Events > 0:
			return DemandClosed, trace.FromParams
		case p.Periodic != nil, p.Bursty != nil, p.Parallel != nil:
			return DemandTimed, trace.FromParams
		}
	}
	return DemandOpen, trace.FromDefault
}

// burst is the work that arrives at one period's start.
type burst struct {
	at time.Duration // since the replay's start
	// work is CPU time; par the CPUs it runs on at once; wall how long
	// it takes there (work/par; for timed, how long it spins).
	work time.Duration
	par  float64
	wall time.Duration
	// anchored: a scheduled burst after an idle pause, which comes at
	// anchor (in the trace's time, no stall cut out) or, when the one
	// before is late, as soon as that one is done.
	anchored bool
	anchor   time.Duration
}

// lane is the share of the burst of the lane'th CPU: the time it is busy,
// the whole wall time for every lane but a fractional last one (so a
// closed or open lane burns that much CPU).
func (b burst) lane(l int) time.Duration {
	f := min(1, b.par-float64(l))
	if f <= 0 {
		return 0
	}
	return time.Duration(f * float64(b.wall))
}

// lanes is how many simulated threads the burst needs.
func (b burst) lanes() int { return int(math.Ceil(b.par - 1e-9)) }

// demand is a reconstructed trace.
type demand struct {
	method Demand
	bursts []burst
}

// reconstruct works out the demand of every period of a trace.
func reconstruct(tr *trace.Trace, opt ReplayOptions) (demand, *trace.Replay, error) {
	if len(tr.Periods) == 0 {
		return demand{}, nil, ErrNoPeriods
	}
	scale := opt.Scale
	if scale == 0 {
		scale = 1
	}
	if math.IsNaN(scale) || scale <= 0 || scale > MaxReplayScale {
		return demand{}, nil, fmt.Errorf("scale %v is outside (0, %d]", scale, MaxReplayScale)
	}
	method, from := opt.Demand, trace.FromGiven
	if method == "" {
		method, from = TraceDemand(tr.Spec)
	} else if _, err := ParseDemand(string(method)); err != nil {
		return demand{}, nil, err
	}
	if opt.Parallelism < 0 {
		return demand{}, nil, fmt.Errorf("parallelism %d is negative", opt.Parallelism)
	}
	ps, err := readPeriods(tr)
	if err != nil {
		return demand{}, nil, err
	}
	par, parFrom := opt.Parallelism, trace.FromGiven
	if par == 0 {
		par, parFrom = parallelism(tr, ps)
	}
	// No period runs on more CPUs than the group could use, nor, when
	// the parallelism is its threads' (or given), on more than that: a
	// reading a little off is not another CPU.
	most := float64(traceCPUs(tr))
	if parFrom != trace.FromStoppedCPUs && parFrom != trace.FromRunningCPUs || most == 0 {
		most = float64(par)
	}
	cpus := func(c float64) float64 { return min(trace.WholeCPUs(c), most) }
	if lanes := math.Ceil(float64(par) * scale); lanes > MaxReplayLanes {
		return demand{}, nil, fmt.Errorf("parallelism %d × scale %v needs %v simulated threads, more than %d", par, scale, lanes, MaxReplayLanes)
	}

	d := demand{method: method, bursts: make([]burst, 0, len(ps))}
	var backlog, cut, demanded, used time.Duration
	for i, p := range ps {
		used += p.usage
		b := burst{at: p.start, work: p.usage, par: cpus(max(float64(par), p.running))}
		// What it missed while it was not running (trace.Period.Missed:
		// the CPUs the kernel stopped, or ran on when more, for its stall,
		// or, busy all along, for all the time it did not run).
		missedCPUs, notRun := tr.Periods[i].Missed(most)
		if p.stall > 0 {
			// It ran from the period's start until it was stopped, on
			// the CPUs the kernel stopped.
			b.par = missedCPUs
		}
		missed := time.Duration(missedCPUs * float64(notRun))
		switch method {
		case DemandClosed, DemandScheduled:
			off := closedOffset(ps, i, b.work, b.par, notRun)
			if method == DemandScheduled && !carriedOver(ps, i) {
				b.anchored, b.anchor = true, b.at+off
			}
			b.at += off - cut
			cut += notRun
		case DemandOpen:
			served := min(backlog, b.work)
			backlog -= served
			backlog += missed
			b.work += missed - served
			if p.stall == 0 && p.running < float64(par) {
				// It was idle at some point: it had caught up.
				backlog = 0
			}
		case DemandTimed:
			if p.stall > 0 {
				// It would have run what it ran and what it missed,
				// spread over the period.
				b.work += missed
				b.par, b.wall = min(float64(b.work)/float64(p.length), most), p.length
				b.work = time.Duration(b.par * float64(p.length))
			}
		}
		if b.work <= 0 || b.par <= 0 {
			continue
		}
		b.work = time.Duration(float64(b.work) * scale)
		b.par *= scale
		if b.wall == 0 {
			b.wall = time.Duration(float64(b.work) / b.par)
		}
		demanded += b.work
		d.bursts = append(d.bursts, b)
	}
	span := ps[len(ps)-1].start + ps[len(ps)-1].length
	if method == DemandClosed {
		span -= cut // a scheduled replay's bursts keep their times
	}
	rec := &trace.Replay{
		Source: opt.Source, Workload: tr.Spec.Workload, Limits: tr.Limits, Periods: len(tr.Periods), UsageNs: int64(used),
		Demand: string(method), DemandFrom: from, Parallelism: par, ParallelismFrom: parFrom,
		Scale: scale, DemandNs: int64(demanded),
		SpanNs: int64(span),
	}
	return d, rec, nil
}

// closedOffset is where in period i a closed group's work (work on par
// CPUs) ran, as far as the trace tells; the run with the stalls cut out
// keeps that place, so work that ran on across a period's end stays one
// piece, which a simulated period, wherever its start falls, can see
// whole (a 30 ms burst that a period's end cut into 12 and 18 ms, or a
// 20 ms quota into 20 and 10, is a 30 ms burst):
//
//   - A period after a throttled one, or after one busy at its end
//     (trace.Period.EndBusy), ran from its start: the refill let it go,
//     or its work ran on into it.
//   - Else a throttled period ran until it was stopped: its work ends
//     where the time it did not run begins (notRun).
//   - Else a period busy at its end ran until its end.
//   - Else it ran from its start.
func closedOffset(ps []period, i int, work time.Duration, par float64, notRun time.Duration) time.Duration {
	p := ps[i]
	if par <= 0 || carriedOver(ps, i) {
		return 0
	}
	wall := time.Duration(float64(work) / par)
	switch {
	case p.stall > 0:
		return max(p.length-notRun-wall, 0)
	case p.endBusy:
		return max(p.length-wall, 0)
	}
	return 0
}

// carriedOver says that work ran on into period i from the one before:
// that one was throttled (the refill let the group go) or busy at its
// end. Else the group was idle at the boundary, and period i's work came
// after a pause.
func carriedOver(ps []period, i int) bool {
	return i > 0 && (ps[i-1].stall > 0 || ps[i-1].endBusy)
}

// period is what replay reads of a trace's period.
type period struct {
	start, length, usage, stall time.Duration
	// running: CPUs busy while not stopped; stopped: CPUs the kernel
	// stopped (0 when not throttled).
	running float64
	stopped int
	blurred bool
	endBusy bool
}

// readPeriods reads the periods, times from the first one's start, with
// the stall, stopped and running CPUs as trace.Period works them out
// (also for traces written before a field existed).
func readPeriods(tr *trace.Trace) ([]period, error) {
	t0 := tr.Periods[0].StartNs
	out := make([]period, len(tr.Periods))
	for i, tp := range tr.Periods {
		p := period{start: time.Duration(tp.StartNs - t0), length: tp.Length(),
			usage: time.Duration(max(tp.UsageNs, 0)), stall: tp.Stall(), stopped: tp.Stopped(),
			running: tp.Running(), blurred: tp.Blurred, endBusy: tp.EndBusy}
		if p.length <= 0 {
			return nil, fmt.Errorf("period %d (start_ns %d) ends at %d, not after its start", i, tp.StartNs, tp.EndNs)
		}
		out[i] = p
	}
	return out, nil
}

// Parallelism is the number of CPUs a trace's group kept busy when it
// had work, as a replay reads it, and what it was read from
// (trace.FromParams, trace.FromStoppedCPUs, trace.FromRunningCPUs).
func Parallelism(tr *trace.Trace) (int, string, error) {
	if len(tr.Periods) == 0 {
		return 0, "", ErrNoPeriods
	}
	ps, err := readPeriods(tr)
	if err != nil {
		return 0, "", err
	}
	n, from := parallelism(tr, ps)
	return n, from, nil
}

// parallelism is the number of CPUs a trace's group kept busy when it had
// work, and where that was read: a built-in workload's threads (on at
// most the CPUs it could use); else the most CPUs the kernel stopped in
// a throttled period (the CPUs with runnable threads when the quota ran
// out); else the running CPUs of its busiest period, rounded up, read as
// the fewest it can have run on (trace.Period.RunningAtLeast: a boundary
// placed a millisecond off is not another CPU). Blurred periods, whose
// usage is an interpolation, are not read, nor the running CPUs of a
// period shorter than half the enforcement period when a longer one was
// read: the usage counter lags a running thread by up to a tick, and a
// run's last period, cut short at its final reading, catches up the lag
// over a few milliseconds (one loop spinning alone read 1.15 CPUs in a
// 22 ms last period, 1.09 in a 36 ms one, 0.98 in the whole ones).
func parallelism(tr *trace.Trace, ps []period) (int, string) {
	cpus := traceCPUs(tr)
	bound := func(n int) int {
		if cpus > 0 {
			n = min(n, cpus)
		}
		return max(n, 1)
	}
	if p := tr.Spec.Params; p != nil && p.Threads() > 0 {
		return bound(p.Threads()), trace.FromParams
	}
	half := tr.Limits.Cgroup().PeriodOrDefault() / 2
	stopped, running, short := 0, -1.0, 0.0
	for i, p := range ps {
		if p.blurred {
			continue
		}
		stopped = max(stopped, p.stopped)
		if p.stall > 0 {
			continue
		}
		if r := tr.Periods[i].RunningAtLeast(); p.length >= half {
			running = max(running, r)
		} else {
			short = max(short, r)
		}
	}
	if stopped > 0 {
		return bound(stopped), trace.FromStoppedCPUs
	}
	if running < 0 {
		running = short
	}
	return bound(int(math.Ceil(trace.WholeCPUs(running)))), trace.FromRunningCPUs
}

// traceCPUs is the number of CPUs a trace's group could use: its
// cpuset's, else its host's (0 when the trace does not say).
func traceCPUs(tr *trace.Trace) int {
	cpus := tr.Host.CPUs
	if set, err := cgroup.ParseCPUList(tr.Limits.Cpuset); err == nil && len(set) > 0 && (cpus == 0 || len(set) < cpus) {
		cpus = len(set)
	}
	return cpus
}

// threads are the lanes that replay the bursts.
func (d demand) threads() []Thread { return laneThreads(d.laneSteps()) }

// laneThreads makes a simulated thread of each lane's steps.
func laneThreads(lanes [][]laneStep) []Thread {
	out := make([]Thread, len(lanes))
	for l, steps := range lanes {
		out[l] = Thread{Pin: -1, Behavior: &lane{steps: steps}}
	}
	return out
}

// laneSteps are the steps of the lanes that replay the bursts.
func (d demand) laneSteps() [][]laneStep {
	n := 1 // a group that used no CPU is replayed as one idle lane
	for _, b := range d.bursts {
		n = max(n, b.lanes())
	}
	out := make([][]laneStep, n)
	for l := range out {
		var steps []laneStep
		var end time.Duration // of the lane's previous burst, in the reconstructed time
		for _, b := range d.bursts {
			share := b.lane(l)
			if share <= 0 {
				continue
			}
			switch d.method {
			case DemandClosed, DemandScheduled:
				// The pause before is kept, from the end of the lane's
				// previous work; a scheduled burst after an idle pause
				// comes at its time, or at once when the lane is late.
				pause := laneStep{kind: Sleep, d: max(b.at-end, 0), relative: true}
				if b.anchored {
					pause = laneStep{kind: Sleep, d: b.anchor}
				}
				steps = append(steps, pause, laneStep{kind: Burn, d: share})
			case DemandOpen:
				steps = append(steps, laneStep{kind: Sleep, d: b.at},
					laneStep{kind: Burn, d: share})
			case DemandTimed:
				steps = append(steps, laneStep{kind: Sleep, d: b.at}, laneStep{kind: Spin, d: b.at + share})
			}
			end = b.at + share
		}
		out[l] = steps
	}
	return out
}

// laneStep is one step of a lane: d is the CPU time of a Burn, the time
// a Spin or a Sleep lasts until, or with relative the length of a Sleep.
type laneStep struct {
	kind     StepKind
	d        time.Duration
	relative bool
}

// lane is one replayed thread: its steps, in turn; a Sleep or Spin whose
// time has passed is skipped (open work queues, a timed spin is lost).
type lane struct {
	steps []laneStep
	next  int
}

func (l *lane) Next(now time.Duration, _ *rand.Rand) Step {
	for l.next < len(l.steps) {
		s := l.steps[l.next]
		l.next++
		switch {
		case s.kind == Burn && s.d > 0:
			return Step{Kind: Burn, CPU: s.d}
		case s.kind == Sleep && s.relative && s.d > 0:
			return Step{Kind: Sleep, Until: now + s.d}
		case (s.kind == Sleep || s.kind == Spin) && !s.relative && s.d > now:
			return Step{Kind: s.kind, Until: s.d}
		}
	}
	return Step{Kind: Exit}
}

// The replay workload of cfsprobe simulate: its flags read into the plan.
func init() {
	ownWorkloads["replay"] = ownWorkload{summary: replaySummary, prepare: prepareReplay}
}

const replaySummary = "a trace's per-period demand (a lab run, a recorded group) under other limits"

const replayUsage = `Reads a trace (saved with --out by cfsprobe run, cfsprobe record or cfsprobe
simulate), turns every period's usage back into the group's demand, and
simulates that demand under the limits given to cfsprobe simulate: what would
this group have done with 1 CPU instead of 0.5, with a burst, with half again
the load?

A throttled period's usage is only a lower bound of the demand: the group
stood still for the period's stall. The work it would have done then is the
stall times the CPUs it ran on, and --demand says what became of it:
  closed     delayed: a fixed amount of work, or clients that wait for
             each answer; the replay is the run with its stalls cut out
  scheduled  delayed, and the work came at its own times (a job every
             second): as closed, but a burst after an idle pause comes at
             its time in the trace
  open       it kept coming and queued: a service; it is demand of the
             period, and the periods that served it first did no more
  timed      lost: a loop that runs for a time (a busy-wait, a run for a
             duration); the group runs on through the stall
The default comes from the trace: a built-in workload's flags (--on-cpu,
--burn-cpu, --events: closed, and --on-cpu with --every: scheduled; --on,
--burn, --duration: timed); a command or a recorded group is taken for a
service (open).

Each period's work arrives at its start (closed: a burst cut by a period's
end stays whole) and runs on as many CPUs as the group used when it had
work: the workload's threads, else the most CPUs the kernel stopped in a
throttled period, else its busiest period's CPUs (--parallelism sets it).
--scale F multiplies the work and those CPUs: F times the load in the same
time. The simulated trace records how its demand was made
(spec.simulated.replay); docs/simulate.md explains the method and its
limits.

As for every simulation, --host-cpus and --kernel are this host's unless
given: give the trace's own (cfsprobe report shows its host) to replay it
where it ran.

Examples:
  cfsprobe run --cpus 0.3 -o tight.json bursty --on-cpu 450ms --off 50ms --duration 10s
  cfsprobe simulate --json replay --trace tight.json     # no limit: what it wanted
  cfsprobe simulate --cpus 0.5 replay tight.json          # how often 0.5 CPU throttles it
  cfsprobe record --pid 4242 --duration 60s --out api.json
  cfsprobe simulate --host-cpus 16 --cpus 2 replay --trace api.json --scale 1.5
  cfsprobe simulate --kernel 5.14 --quota 50ms --burst 50ms replay --trace api.json --demand open
`

// replayFlags are the replay workload's flags.
func replayFlags(fs *pflag.FlagSet, file *string, opt *ReplayOptions) *string {
	fs.StringVar(file, "trace", "", "the trace to replay (saved by cfsprobe run, record or simulate with --out); or give it as the argument")
	demand := fs.String("demand", "", DemandNames()+": what became of the work the group could not do while it stood still (default: from the trace)")
	fs.IntVar(&opt.Parallelism, "parallelism", 0, "CPUs the group's work runs on at once (default: from the trace)")
	fs.Float64Var(&opt.Scale, "scale", 1, "multiply the demand: F times the work on F times the CPUs, in the same time")
	return demand
}

// prepareReplay reads the replay workload's flags and its trace into the
// plan. Its errors are the user's: one sentence each.
func prepareReplay(p *Plan, args []string) error {
	var file string
	var opt ReplayOptions
	flags := pflag.NewFlagSet("replay", pflag.ContinueOnError)
	flags.SetOutput(io.Discard)
	demand := replayFlags(flags, &file, &opt)
	hint := "(see: cfsprobe simulate replay --help)"
	if err := flags.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return &workload.HelpError{Text: fmt.Sprintf("replay: %s\n\n%s\nFlags:\n%s", replaySummary, replayUsage, flags.FlagUsages())}
		}
		return fmt.Errorf("workload replay: %w %s", err, hint)
	}
	named := "--trace " + file // the trace, as the user gave it
	if flags.NArg() == 1 && file == "" {
		file, named = flags.Arg(0), flags.Arg(0) // replay FILE, as replay --trace FILE
	} else if flags.NArg() == 1 {
		return fmt.Errorf("workload replay: the trace is given twice (%s and --trace %s): give it once", flags.Arg(0), file)
	}
	switch {
	case flags.NArg() > 1:
		return fmt.Errorf("workload replay: unexpected argument %q: replay reads one trace %s", flags.Arg(1), hint)
	case file == "":
		return fmt.Errorf("workload replay needs a trace: give FILE (or --trace FILE), saved by cfsprobe run, record or simulate with --out")
	case math.IsNaN(opt.Scale) || opt.Scale <= 0 || opt.Scale > MaxReplayScale:
		return fmt.Errorf("workload replay: --scale %v is not a factor above 0 and at most %d", opt.Scale, MaxReplayScale)
	case opt.Parallelism < 0 || opt.Parallelism > MaxReplayLanes:
		return fmt.Errorf("workload replay: --parallelism %d is not a number of CPUs from 1 to %d (or 0: from the trace)", opt.Parallelism, MaxReplayLanes)
	}
	if *demand != "" {
		d, err := ParseDemand(*demand)
		if err != nil {
			return fmt.Errorf("workload replay: --demand %s: use one of %s %s", *demand, DemandNames(), hint)
		}
		opt.Demand = d
	}
	tr, err := trace.ReadFile(file)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("workload replay: %s does not exist: give the path of a trace saved with --out", named)
	case errors.Is(err, io.EOF):
		return fmt.Errorf("workload replay: %s is empty: give a trace saved by cfsprobe run, record or simulate with --out", named)
	case err != nil:
		if inner := errors.Unwrap(err); inner != nil {
			err = inner // the path is said once
		}
		return fmt.Errorf("workload replay: %s is not a cfsprobe trace (%v): give a file saved by cfsprobe run, record or simulate with --out", named, err)
	}
	opt.Source = file
	d, rec, err := reconstruct(tr, opt)
	if err != nil {
		if errors.Is(err, ErrNoPeriods) {
			return fmt.Errorf("workload replay: %s has no periods, so no demand to replay: record the group for longer, while it runs", named)
		}
		return fmt.Errorf("workload replay: %s: %w", named, err)
	}
	p.spec = trace.Spec{Workload: "replay", Args: append([]string{}, args...)}
	r := &Replayer{lanes: d.laneSteps(), rec: rec}
	p.threads = r.Threads
	p.finish = func(out *trace.Trace) { out.Spec.Simulated.Replay = r.Record() }
	return nil
}
