package recommend

import (
	"errors"
	"fmt"
	"math"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/cfsprobe/cfsprobe/internal/cgroup"
	"github.com/cfsprobe/cfsprobe/internal/report"
	"github.com/cfsprobe/cfsprobe/internal/sim"
	"github.com/cfsprobe/cfsprobe/internal/trace"
)

// Input is one group to advise: its trace (a lab run, a recording of a
// live group, or a synthetic trace built from Prometheus series, which
// Spec.Synthetic names) and, optionally, its usage averaged over
// consecutive one-minute windows for the peers' rules (nil: computed
// from the trace's periods).
type Input struct {
	Name        string
	Trace       *trace.Trace
	MinuteUsage []float64
}

// Options say how to advise. Zero values take the defaults.
type Options struct {
	// Target is what the recommendation must meet (zero: DefaultTarget).
	Target Target
	// MaxCPUs is the most CPUs a limit may reserve before "remove the
	// limit" is advised (0: the CPUs the group can use: its cpuset's, else
	// the host's).
	MaxCPUs float64
	// Era and HostCPUs are the model's (""/0: the trace's host: the era
	// of its kernel release, its CPUs).
	Era      sim.Era
	HostCPUs int
	// StepMillicores is the grain of the quotas tried (0: 10m, one
	// millisecond per 100 ms period, the kernel's smallest quota there).
	StepMillicores int64
	// Demand is the replay's method ("": the trace's, sim.TraceDemand).
	Demand sim.Demand
	// Seed is the model's (0: 1).
	Seed uint64
	// NoPeers leaves the peers' rules out: Group.Peers is empty, nothing
	// of them is simulated, and --verify does not rerun them.
	NoPeers bool
	// Headroom is the share by which the fewest millicores that meet the
	// target in the simulation are raised (0: DefaultHeadroom; NoHeadroom:
	// none; at most MaxHeadroom).
	Headroom float64
}

// DefaultHeadroom is Options.Headroom's default: room for what the model
// does not see. A rerun of the same workload differs from its recording
// by a few percent of CPU time (a process's start, a shared host's
// noise), and the cheapest setting that meets the target in the
// simulation sits at its edge: burst's no-burst scenario (30 ms bursts
// under 20 ms of quota, recorded in the qemu guest) advised 0.17 CPUs +
// 17 ms burst without headroom, and its first burst, with the process's
// start, used 33 to 36 ms of CPU: of the reruns in the guest, 3 of 3 were
// throttled in their first period under 0.17 CPUs + 17 ms, 3 of 11 under
// 0.18 + 18 ms, none of 8 under 0.19 + 19 ms (what 10 % gives).
const DefaultHeadroom = 0.10

// NoHeadroom as Options.Headroom advises the cheapest setting the
// simulation finds.
const NoHeadroom = -1

// MaxHeadroom bounds Options.Headroom: 100 %, twice the setting found.
const MaxHeadroom = 1.0

// DefaultStepMillicores is Options.StepMillicores' default.
const DefaultStepMillicores = 10

// TieMargin is how much more CPU a simpler kind may reserve and still be
// chosen: near-ties go to the simpler setting (quota < burst < thread
// cap).
const TieMargin = 0.05

// Kind is what a candidate changes.
type Kind string

// The kinds, simplest first.
const (
	KindQuota   Kind = "quota"      // a quota (and the period) alone
	KindBurst   Kind = "burst"      // a quota and a burst of the quota
	KindThreads Kind = "thread-cap" // a quota and a thread cap
	KindNoLimit Kind = "no-limit"   // remove the limit
)

// Kinds lists the kinds of limit tried, simplest first.
var Kinds = []Kind{KindQuota, KindBurst, KindThreads}

// Words is the kind for people.
func (k Kind) Words() string {
	switch k {
	case KindBurst:
		return "quota + burst"
	case KindThreads:
		return "thread cap"
	case KindNoLimit:
		return "remove the limit"
	}
	return "quota alone"
}

// Candidate is a setting tried, with its prediction.
type Candidate struct {
	Kind    Kind    `json:"kind"`
	Setting Setting `json:"setting"`
	// FitMillicores is the fewest millicores that met the target in the
	// simulation, before the headroom raised them to the setting's (0:
	// none met it, or the kind was not tried).
	FitMillicores int64 `json:"fit_millicores,omitempty"`
	// Prediction is nil when the kind was not tried.
	Prediction *Prediction `json:"prediction,omitempty"`
	Meets      bool        `json:"meets"`
	// Note says why a kind was not tried, or that none of its settings
	// up to MaxCPUs met the target (the one shown is the largest).
	Note string `json:"note,omitempty"`
}

// Current is the group's setting as the trace found it.
type Current struct {
	Setting    Setting    `json:"setting"`
	Prediction Prediction `json:"prediction"`
	Meets      bool       `json:"meets"`
	// Measured is what the trace itself shows (nil for a synthetic
	// trace, which measured nothing per period).
	Measured *Prediction `json:"measured,omitempty"`
}

// Recommendation is the advice: the chosen candidate and why.
type Recommendation struct {
	Candidate
	Reason string `json:"reason"`
}

// Model is how the group was simulated: the kernel era and host, the
// period, the most CPUs a limit may reserve, and how the demand was
// read from the trace (trace.Replay, docs/simulate.md).
type Model struct {
	Era            sim.Era `json:"era"`
	HostCPUs       int     `json:"host_cpus"`
	PeriodNs       int64   `json:"period_ns"`
	MaxCPUs        float64 `json:"max_cpus"`
	StepMillicores int64   `json:"step_millicores"`
	// Headroom is the share the fewest millicores that met the target
	// were raised by (Options.Headroom).
	Headroom   float64 `json:"headroom"`
	Demand     string  `json:"demand"`
	DemandFrom string  `json:"demand_from"`
	// Stretches are the throttled stretches that ended, and after how
	// many the group caught up, when the method was read from them
	// (demandOf; a synthetic trace's, from the exporter's counters).
	Stretches       *trace.Stretches `json:"stretches,omitempty"`
	Parallelism     int              `json:"parallelism"`
	ParallelismFrom string           `json:"parallelism_from"`
	// DemandCPUs is the replay's demand averaged over its timeline (the
	// trace's, less the stalls the closed method cut out), in CPUs;
	// UsedCPUs what the trace used over the trace.
	DemandCPUs float64 `json:"demand_cpus"`
	UsedCPUs   float64 `json:"used_cpus"`
	// ThrottledPeriods of the trace: its demand there is censored (a
	// lower bound, completed by the replay).
	ThrottledPeriods int `json:"throttled_periods"`
	Periods          int `json:"periods"`
	// Simulations is how many simulated runs the advice took.
	Simulations int `json:"simulations"`
}

// Group is the advice for one group.
type Group struct {
	Name string `json:"name"`
	// Workload is the trace's spec.workload; Synthetic its
	// spec.synthetic (a trace built from Prometheus series).
	Workload  string `json:"workload"`
	Synthetic string `json:"synthetic,omitempty"`
	// Names are the recorded group's container and pod, as the container
	// runtimes named them when it was recorded (trace.Cgroup.Names).
	Names       trace.Names    `json:"names,omitzero"`
	Target      Target         `json:"target"`
	Model       Model          `json:"model"`
	Current     Current        `json:"current"`
	Recommended Recommendation `json:"recommended"`
	// AsClosed is the recommendation were the group's demand read as a
	// closed loop's, for a recording read as a loop that runs for a time
	// though at least half of its throttled stretches caught up (ambiguous: see
	// Group.ambiguousTimed); nil otherwise.
	AsClosed *Recommendation `json:"as_closed,omitempty"`
	// Tried is the best candidate of each kind, simplest first.
	Tried   []Candidate `json:"tried"`
	Windows Windows     `json:"windows"`
	// Peers are the sizing rules in use (empty with Options.NoPeers).
	Peers []Peer `json:"peers"`
	// Verified is what reruns of the workload measured (cfsprobe
	// recommend --verify: PrepareVerify); nil when it was not rerun.
	Verified *Verified `json:"verified,omitempty"`
}

// InputError is an input the recommender cannot advise on: a trace
// without periods, a kernel without a model, a host without CPUs. Its
// message is one sentence saying what to give instead.
type InputError struct{ Err error }

func (e *InputError) Error() string { return e.Err.Error() }
func (e *InputError) Unwrap() error { return e.Err }

func inputErr(format string, a ...any) error { return &InputError{fmt.Errorf(format, a...)} }

// Recommend advises one group: the cheapest setting (least CPU reserved)
// among quota alone, quota + burst and a thread cap that meets the
// target on the simulator's prediction of the group's demand, else
// removing the limit; beside it the current setting and the peers'
// rules, each with its prediction. docs/recommend.md is the method.
func Recommend(in Input, opt Options) (*Group, error) {
	r, err := newRun(in, opt)
	if err != nil {
		return nil, err
	}
	g, err := r.advise()
	if err != nil || !g.ambiguousTimed() {
		return g, err
	}
	// The other reading, to show beside the advice: the demand given as
	// a closed loop's is not read from the stretches, so this does not
	// come back here.
	closed := opt
	closed.Demand, closed.NoPeers = sim.DemandClosed, true
	other, err := Recommend(in, closed)
	if err != nil {
		return nil, err
	}
	g.AsClosed = &other.Recommended
	g.Model.Simulations += other.Model.Simulations
	return g, nil
}

// demandReadFromTrace says that the replay's method was read from the
// trace itself (a command or a recording: demandOf), not from a built-in
// workload's flags, --demand or a synthetic trace's stretches.
func (g *Group) demandReadFromTrace() bool {
	m := g.Model
	return g.Synthetic == "" && m.DemandFrom != trace.FromParams && m.DemandFrom != trace.FromGiven
}

// ambiguousTimed says that the group's demand was read as a loop's that
// runs for a time from its throttled stretches (demandOf), though at
// least half of them caught up: too few for a closed loop, which a closed
// loop whose work ends just past a whole number of quotas shows too (it
// has little left for the period after its stretch), and a loop that runs
// for a time whose deadlines often fall after the refill too. The two
// readings then bound the demand: timed the most, closed the least. A
// group throttled nearly always (trace.Stretches.Unrelieved) is not: its
// stretches' ends are not its work done.
func (g *Group) ambiguousTimed() bool {
	st := g.Model.Stretches
	return g.demandReadFromTrace() && g.Model.Demand == string(sim.DemandTimed) && st != nil && 2*st.CaughtUp >= st.Ended && !st.Unrelieved()
}

// RecommendAll advises every input, concurrently; the groups are in the
// inputs' order. The first error is returned with its input's name.
func RecommendAll(ins []Input, opt Options) ([]*Group, error) {
	out := make([]*Group, len(ins))
	errs := make([]error, len(ins))
	work := make(chan int)
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), len(ins)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				out[i], errs[i] = Recommend(ins[i], opt)
			}
		}()
	}
	for i := range ins {
		work <- i
	}
	close(work)
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			return nil, fmt.Errorf("%s: %w", ins[i].Name, err)
		}
	}
	return out, nil
}

// run is one group being advised.
type run struct {
	in      Input
	target  Target
	p       *predictor
	period  time.Duration
	cpuset  string
	maxCPUs float64
	step    int64
	noPeers bool
	g       *Group
}

// newRun checks the input and sets up its model.
func newRun(in Input, opt Options) (*run, error) {
	tr := in.Trace
	if tr == nil {
		return nil, inputErr("no trace given")
	}
	if len(tr.Periods) == 0 {
		return nil, &InputError{fmt.Errorf("the trace has no periods, so no demand to advise on: record the group for longer, while it runs: %w", sim.ErrNoPeriods)}
	}
	era := opt.Era
	if era == "" {
		var err error
		if era, err = sim.EraOfRelease(tr.Host.Kernel); err != nil {
			return nil, inputErr("the trace's kernel has no model (%v): give the kernel era to model (%s)", err, sim.EraNames())
		}
	}
	cpus := opt.HostCPUs
	if cpus == 0 {
		cpus = tr.Host.CPUs
	}
	if cpus < 1 || cpus > sim.MaxCPUs {
		return nil, inputErr("the trace does not say its host's CPUs (%d): give the host's CPUs", cpus)
	}
	target := opt.Target
	if target.Kind == "" {
		target = DefaultTarget
	}
	step := opt.StepMillicores
	if step <= 0 {
		step = DefaultStepMillicores
	}
	seed := opt.Seed
	if seed == 0 {
		seed = 1
	}
	headroom := opt.Headroom
	switch {
	case headroom == 0:
		headroom = DefaultHeadroom
	case headroom == NoHeadroom:
		headroom = 0
	case !(headroom > 0 && headroom <= MaxHeadroom):
		return nil, inputErr("headroom %v: give a share from 0 to %v", headroom, MaxHeadroom)
	}
	cur := tr.Limits.Cgroup()
	period := cgroup.DefaultPeriod
	if !cur.Unlimited() && cur.Period > 0 {
		period = cur.Period
	}
	usable := cpus
	if set, err := cgroup.ParseCPUList(cur.Cpuset); err == nil && len(set) > 0 && len(set) < usable {
		usable = len(set)
	}
	maxCPUs := opt.MaxCPUs
	if maxCPUs <= 0 {
		maxCPUs = float64(usable)
	}
	demand, demandFrom := opt.Demand, ""
	var stretches *trace.Stretches
	if demand == "" {
		demand, demandFrom, stretches = demandOf(tr)
	}
	p, err := newPredictor(tr, era, cpus, seed, sim.ReplayOptions{Demand: demand, Source: in.Name})
	if err != nil {
		var fe *sim.FieldError
		if errors.As(err, &fe) {
			return nil, inputErr("the trace cannot be simulated on a %d-CPU host of kernel era %s: %v", cpus, era, err)
		}
		return nil, &InputError{err}
	}
	if cur.Burst > 0 && !p.era.HasBurst() {
		return nil, inputErr("the trace's group has a %v burst, which kernel era %s does not have: give era %s or later", cur.Burst, era, sim.Era5_14)
	}
	rec := p.rec
	if demandFrom != "" {
		rec.DemandFrom = demandFrom
	}
	g := &Group{
		Name: in.Name, Workload: tr.Spec.Workload, Synthetic: tr.Spec.Synthetic, Names: tr.Cgroup.Names, Target: target,
		Model: Model{Era: era, HostCPUs: cpus, PeriodNs: int64(period), MaxCPUs: maxCPUs, StepMillicores: step, Headroom: headroom,
			Demand: rec.Demand, DemandFrom: rec.DemandFrom, Stretches: stretches, Parallelism: rec.Parallelism, ParallelismFrom: rec.ParallelismFrom,
			Periods: len(tr.Periods)},
	}
	if span := tr.Periods[len(tr.Periods)-1].EndNs - tr.Periods[0].StartNs; span > 0 {
		g.Model.UsedCPUs = float64(rec.UsageNs) / float64(span)
	}
	if rec.SpanNs > 0 {
		g.Model.DemandCPUs = float64(rec.DemandNs) / float64(rec.SpanNs)
	}
	for _, pd := range tr.Periods {
		if pd.Throttled {
			g.Model.ThrottledPeriods++
		}
	}
	g.Windows = minuteWindows(tr)
	if in.MinuteUsage != nil {
		g.Windows = Windows{UsageCPUs: in.MinuteUsage, Formed: oneMinuteWindows(len(in.MinuteUsage)) + " given with the input"}
	}
	return &run{in: in, target: target, p: p, period: period, cpuset: cur.Cpuset, maxCPUs: maxCPUs, step: step, noPeers: opt.NoPeers, g: g}, nil
}

// cutApart is how many times as long as every throttled stretch that
// ended the one the trace's end cut must be to tell that the group never
// caught up. Such a stretch shows only that it lasted as long as it was
// seen, and the stretches of a group that catches up vary widely: the
// fleet test's b2short-tight (2 threads of 5 ms every 100 ms under 0.05
// CPU + 5 ms burst) ended 150 stretches of 1 to 26 periods, and the end
// of its recording cut one at 33. Read as never caught up, it was advised
// 0.82 CPUs + burst, against 0.10 from its 150 stretches (and 0.11 from
// Prometheus, whose exporter counts only the stretches that ended); of
// 502 recordings of the fleet test, it was the only one whose cut
// stretch was longer than every one that ended, when some had.
const cutApart = 2

// demandOf is the replay's method for a trace: its workload's, when its
// flags say, or a synthetic trace's (sim.TraceDemand); else, for a
// command or a recorded group, which replay takes for a service (open),
// what its throttled stretches (runs of throttled periods) show:
//
//   - A stretch caught up when the group, let go at the refill after it,
//     ran on in an unthrottled period (caughtUp): it did then the work
//     the stalls had delayed. When most of the stretches that ended did,
//     what it used is its work, only delayed (closed; open would count
//     the work it caught up with twice).
//   - A stretch after which the group hardly ran did not catch up: the
//     work of its stalls was not done later, it was lost (a loop that
//     runs for a time, a deadline that passed while it stood still).
//     And a stretch that lasted to the end of the trace, more than
//     cutApart times as long as every one that ended (or none ended),
//     never caught up: the group would have run all along. Either is
//     timed: each period wanted its usage and the work it missed
//     (trace.Period.Demand), as the exporter counts it.
//   - A stretch still going at the end (its last or last but one period
//     throttled: the end cuts the last one short) but not that long is
//     the end's doing (a burst under a tight limit, recorded in the
//     middle of one): the stretches that ended decide.
//   - A group throttled in nearly all its periods, the cut stretch's
//     included, is timed however its stretches ended
//     (trace.Stretches.Unrelieved): its few unthrottled periods are ones
//     other work kept it from its quota.
//
// Without throttling every method replays the usage as it was (open).
func demandOf(tr *trace.Trace) (sim.Demand, string, *trace.Stretches) {
	if d, from := sim.TraceDemand(tr.Spec); from != trace.FromDefault {
		st := tr.Spec.Stretches
		if tr.Spec.Synthetic != "" && st != nil {
			from = fmt.Sprintf("%s: %d of %d throttled stretches caught up after", from, st.CaughtUp, st.Ended)
		}
		return d, from, st
	}
	ps := tr.Periods
	// The throttled stretches, as [first, end) indices of periods; the
	// last one may be cut by the trace's end.
	var runs [][2]int
	for i, p := range ps {
		switch {
		case !p.Throttled:
		case len(runs) > 0 && runs[len(runs)-1][1] == i:
			runs[len(runs)-1][1]++
		default:
			runs = append(runs, [2]int{i, i + 1})
		}
	}
	var cut, longestEnded int // in periods
	for i, r := range runs {
		if i == len(runs)-1 && r[1] >= len(ps)-1 {
			cut = r[1] - r[0]
		} else {
			longestEnded = max(longestEnded, r[1]-r[0])
		}
	}
	if cut > cutApart*longestEnded {
		if longestEnded == 0 {
			return sim.DemandTimed, "a throttled stretch lasted to the trace's end, and none ended", nil
		}
		return sim.DemandTimed, fmt.Sprintf("a throttled stretch lasted to the trace's end, more than %d times as long as any that ended (%d periods, against %d)", cutApart, cut, longestEnded), nil
	}
	n := len(ps)
	if cut > 0 {
		n = runs[len(runs)-1][0] // the stretch the end cut did not end
	}
	var st trace.Stretches
	quota := tr.Limits.Cgroup().Quota
	for _, p := range ps[:n] {
		st.Add(p, quota)
	}
	st.Periods, st.Throttled = int64(len(ps)), trace.CountThrottled(ps)
	switch {
	case st.Ended == 0:
		return sim.DemandOpen, "no throttled period", nil
	case st.Unrelieved():
		return sim.DemandTimed, fmt.Sprintf("%d of %d throttled stretches caught up after, but it was throttled in %d of %d periods, never relieved for long", st.CaughtUp, st.Ended, st.Throttled, st.Periods), &st
	case st.Closed():
		return sim.DemandClosed, fmt.Sprintf("%d of %d throttled stretches caught up after", st.CaughtUp, st.Ended), &st
	}
	return sim.DemandTimed, fmt.Sprintf("%d of %d throttled stretches caught up after: the work of the others' stalls was lost", st.CaughtUp, st.Ended), &st
}

// advise runs the method.
func (r *run) advise() (*Group, error) {
	g := r.g
	tr := r.in.Trace
	cur := Setting{Limits: tr.Limits.Cgroup()}
	if cur.Limits.Period == 0 {
		cur.Limits.Period = r.period
	}
	pred, err := r.p.predict(cur)
	if err != nil {
		return nil, err
	}
	g.Current = Current{Setting: cur, Prediction: pred, Meets: r.target.Met(pred)}
	if tr.Spec.Synthetic == "" {
		m := predictionOf(tr)
		g.Current.Measured = &m
	}

	quota, err := r.cheapest(KindQuota, 0, r.guess())
	if err != nil {
		return nil, err
	}
	burst := Candidate{Kind: KindBurst, Note: fmt.Sprintf("not tried: kernel era %s has no CPU burst (%s and later have it)", g.Model.Era, sim.Era5_14)}
	if r.p.era.HasBurst() {
		if burst, err = r.cheapest(KindBurst, 0, 0); err != nil {
			return nil, err
		}
	}
	threads, err := r.threadCap(cur, quota)
	if err != nil {
		return nil, err
	}
	g.Tried = []Candidate{quota, burst, threads}
	if err := r.choose(); err != nil {
		return nil, err
	}
	g.Peers = []Peer{}
	for _, pr := range r.peerRules() {
		peer, err := r.peer(pr)
		if err != nil {
			return nil, err
		}
		g.Peers = append(g.Peers, peer)
	}
	g.Model.Simulations = r.p.runs
	return g, nil
}

// peerRules are the peers' rules read from the group's minute windows,
// none with Options.NoPeers.
func (r *run) peerRules() []peerRule {
	if r.noPeers {
		return nil
	}
	return peerRules(r.g.Windows.UsageCPUs)
}

// setting is the kind's setting of m millicores.
func (r *run) setting(k Kind, m int64, threads int) Setting {
	return milliSetting(m, r.period, r.cpuset, k == KindBurst, threads)
}

// minMillicores is the smallest quota tried: the kernel's minimum quota
// in this period, rounded up to the step.
func (r *run) minMillicores() int64 {
	m := (int64(cgroup.MinQuota)*1000 + int64(r.period) - 1) / int64(r.period)
	return r.roundUp(max(m, 1))
}

func (r *run) roundUp(m int64) int64 { return (m + r.step - 1) / r.step * r.step }

// guess is where the search for a quota alone starts: the per-period
// demand (trace.Period.DemandCPUs, of the periods read closely) that as
// many periods exceed as the target lets be throttled (1 % for a stall
// target), in millicores. It only guides the search, which the
// simulator's predictions decide.
func (r *run) guess() int64 {
	allowed := r.target.MaxThrottledRatio
	if r.target.Kind == TargetStall {
		allowed = 0.01
	}
	var d []float64
	for _, p := range r.in.Trace.Periods {
		if !p.Blurred {
			d = append(d, p.DemandCPUs(float64(r.g.Model.HostCPUs)))
		}
	}
	if len(d) == 0 {
		return 0
	}
	slices.Sort(d)
	return int64(math.Ceil(1000 * d[min(int(float64(len(d))*(1-allowed)), len(d)-1)]))
}

// cheapest finds the fewest millicores of a kind (with a thread cap of
// threads, 0: none) that meet the target, from the kernel's smallest
// quota to MaxCPUs (or the cap's CPUs), searching from guess (0: the
// whole range), raised by the headroom (FitMillicores keeps what was
// found). When none does, the candidate is the largest, with a note.
func (r *run) cheapest(k Kind, threads int, guess int64) (Candidate, error) {
	lo, top := r.minMillicores(), r.maxCPUs
	switch {
	case k == KindBurst:
		// Burst lends, it does not give: a quota below the group's
		// average demand drains any allowance, however large, so a
		// recording shorter than the time it takes to drain it would
		// take a deficit in every period for meeting the target. The
		// quota is at least the average (and the headroom puts it
		// above: at exactly the average, any work the model does not
		// see drains the allowance too).
		lo = max(lo, r.atLeast(r.g.Model.DemandCPUs))
	case threads > 0:
		// A capped group uses at most its cap's CPUs: its quota is the
		// cap's, and the headroom above it (a thread that keeps its CPU
		// busy is throttled now and then at exactly its CPU's quota,
		// which the model does not show: threads-vs-quota 2x capped at
		// 1 thread under 1 CPU, 1 of 41 periods).
		lo = max(lo, r.atLeast(float64(threads)))
		top = min(top, float64(threads)*(1+r.g.Model.Headroom))
	}
	hi := int64(math.Floor(top*1000/float64(r.step)+1e-9)) * r.step
	if hi < lo {
		return Candidate{Kind: k, Note: fmt.Sprintf("not tried: its quota would be above %s", report.CPUs(r.maxCPUs))}, nil
	}
	meets := func(m int64) (bool, error) { return r.p.meets(r.setting(k, m, threads), r.target) }
	m, ok, err := search(lo, hi, r.step, guess, meets)
	if err != nil {
		return Candidate{}, err
	}
	c := Candidate{Kind: k, Setting: r.setting(k, m, threads), Meets: ok}
	if !ok {
		c.Note = fmt.Sprintf("none up to %s meets the target", report.CPUs(float64(m)/1000))
	} else {
		c.FitMillicores = m
		// Throttling is not quite monotone in the quota: the setting
		// with headroom is kept only if it meets the target too.
		if up := min(r.atLeast(float64(m)/1000*(1+r.g.Model.Headroom)), hi); up > m {
			s := r.setting(k, up, threads)
			p, err := r.p.predict(s)
			if err != nil {
				return Candidate{}, err
			}
			if r.target.Met(p) {
				c.Setting, c.Prediction = s, &p
				return c, nil
			}
		}
	}
	p, err := r.p.predict(c.Setting)
	if err != nil {
		return Candidate{}, err
	}
	c.Prediction = &p
	return c, nil
}

// atLeast is the fewest millicores on the step's grid that hold cpus.
func (r *run) atLeast(cpus float64) int64 {
	return r.roundUp(int64(math.Ceil(cpus*1000 - 1e-9)))
}

// maxRetries bounds how often search looks above a point whose
// neighbour failed.
const maxRetries = 8

// search finds the fewest millicores m in [lo, hi], in steps of step
// from lo, for which meets(m) holds, by bisection: from the whole range,
// or, given a guess inside it (0: none), from a bracket of it found by
// steps away from it that double. Throttling is close to monotone in the
// quota, but not exactly (where bursts fall in the period shifts with
// it), so the point found is confirmed with the step above it, and when
// that one fails the search goes on above it. ok is false, with m = hi,
// when hi itself does not meet it.
func search(lo, hi, step, guess int64, meets func(m int64) (bool, error)) (m int64, ok bool, err error) {
	grid := func(m int64) int64 { return lo + min(max(m-lo, 0), hi-lo)/step*step }
	fail, pass := lo-step, int64(-1) // fail: the most known (or, below lo, taken) to fail
	g := grid(guess)
	w := max(grid(lo+(g-lo)/8)-lo, step) // the first step away from the guess
	if guess <= lo || guess >= hi {
		g = hi // the whole range
	}
	if ok, err := meets(g); err != nil || !ok && g == hi {
		return hi, false, err
	} else if ok && g == hi {
		pass = hi
	} else if ok {
		pass = g
		for d := g - w; d > fail; d = pass - w {
			if ok, err := meets(d); err != nil {
				return 0, false, err
			} else if !ok {
				fail = d
				break
			}
			pass, w = d, 2*w
		}
	} else {
		fail = g
		for pass < 0 {
			u := min(fail+w, hi)
			ok, err := meets(u)
			switch {
			case err != nil:
				return 0, false, err
			case ok:
				pass = u
			case u >= hi:
				return hi, false, nil
			default:
				fail, w = u, 2*w
			}
		}
	}
	if pass == lo {
		return lo, true, nil
	}
	for range maxRetries {
		for pass-fail > step {
			mid := fail + (pass-fail)/2/step*step
			ok, err := meets(mid)
			if err != nil {
				return 0, false, err
			}
			if ok {
				pass = mid
			} else {
				fail = mid
			}
		}
		if pass+step > hi {
			break
		}
		ok, err := meets(pass + step)
		if err != nil {
			return 0, false, err
		}
		if ok {
			break
		}
		// Not monotone here: look above the neighbour that failed.
		fail, pass = pass+step, hi
		if ok, err := meets(hi); err != nil || !ok {
			return hi, false, err
		}
	}
	return pass, true, nil
}

// threadCap tries a thread cap where the group ran on more CPUs at once
// than its limit has (the current limit, or, without one, the cheapest
// quota): caps of the limit's CPUs rounded up and down, each with the
// cheapest quota for it.
func (r *run) threadCap(cur Setting, quota Candidate) (Candidate, error) {
	par := r.g.Model.Parallelism
	limit, of := cur.Limits.CPUs(), "its limit"
	if cur.Limits.Unlimited() {
		limit, of = quota.Setting.Limits.CPUs(), "the cheapest quota alone"
		if !quota.Meets {
			limit, of = r.maxCPUs, "--max-cpus"
		}
	}
	var caps []int
	for _, c := range []int{int(math.Ceil(limit - 1e-9)), int(math.Floor(limit + 1e-9))} {
		if c >= 1 && c < par && (len(caps) == 0 || caps[0] != c) {
			caps = append(caps, c)
		}
	}
	if len(caps) == 0 {
		return Candidate{Kind: KindThreads, Note: fmt.Sprintf("not tried: the group ran on at most %s at once, not more than %s has (%s)",
			report.CPUs(float64(par)), of, report.CPUs(limit))}, nil
	}
	var best Candidate
	for _, c := range caps {
		cand, err := r.cheapest(KindThreads, c, 0)
		if err != nil {
			return Candidate{}, err
		}
		if best.Prediction == nil || cand.Meets && (!best.Meets || reserved(cand) < reserved(best)) {
			best = cand
		}
	}
	return best, nil
}

// reserved is a candidate's CPU reserved (quota / period).
func reserved(c Candidate) float64 { return c.Setting.Limits.CPUs() }

// choose picks the recommendation among the candidates that meet the
// target: the least CPU reserved, near-ties (TieMargin) going to the
// simpler kind; none: remove the limit.
func (r *run) choose() error {
	g := r.g
	var best *Candidate
	for i := range g.Tried {
		c := &g.Tried[i]
		if c.Meets && (best == nil || reserved(*c) < reserved(*best)) {
			best = c
		}
	}
	if best == nil {
		s := Setting{Limits: cgroup.Limits{Period: r.period, Cpuset: r.cpuset}}
		p, err := r.p.predict(s)
		if err != nil {
			return err
		}
		g.Recommended = Recommendation{Candidate: Candidate{Kind: KindNoLimit, Setting: s, Prediction: &p, Meets: r.target.Met(p)}}
		g.Recommended.Reason = r.reason()
		return nil
	}
	for _, c := range g.Tried {
		if c.Meets && reserved(c) <= reserved(*best)*(1+TieMargin) {
			best = &c
			break
		}
	}
	g.Recommended = Recommendation{Candidate: *best}
	g.Recommended.Reason = r.reason()
	return nil
}

// peer predicts one peer rule.
func (r *run) peer(pr peerRule) (Peer, error) {
	m := max(int64(math.Ceil(pr.limit*1000-1e-9)), r.minMillicores())
	s := milliSetting(m, r.period, r.cpuset, false, 0)
	p, err := r.p.predict(s)
	if err != nil {
		return Peer{}, err
	}
	return Peer{Name: pr.name, Rule: pr.rule, Source: pr.source, RequestCPUs: pr.request, LimitCPUs: pr.limit, Why: pr.why,
		Setting: s, Prediction: p, Meets: r.target.Met(p)}, nil
}

// reason says in words why the recommendation was chosen, against the
// best of each other kind.
func (r *run) reason() string {
	g := r.g
	rec := g.Recommended
	var head string
	switch rec.Kind {
	case KindQuota:
		head = fmt.Sprintf("a quota alone is enough: %s meets %s at the least CPU reserved", rec.Setting, g.Target)
	case KindBurst:
		head = fmt.Sprintf("the demand comes in bursts that idle periods can bank for: %s meets %s with %s reserved", rec.Setting, g.Target, report.CPUs(reserved(rec.Candidate)))
	case KindThreads:
		head = fmt.Sprintf("the group ran on %d CPUs at once, more than the limit has: capped at %s it meets %s with %s reserved",
			g.Model.Parallelism, threads(rec.Setting.Threads), g.Target, report.CPUs(reserved(rec.Candidate)))
	case KindNoLimit:
		head = fmt.Sprintf("no limit up to %s (the most CPUs allowed) meets %s: remove the limit", report.CPUs(r.maxCPUs), g.Target)
	}
	if h := headroomText(rec.Candidate, g.Model.Headroom); h != "" {
		head += " (" + h + ")"
	}
	parts := []string{head}
	for _, c := range g.Tried {
		if c.Kind == rec.Kind {
			continue
		}
		switch {
		case c.Prediction == nil:
			parts = append(parts, fmt.Sprintf("%s %s", c.Kind.Words(), c.Note))
		case !c.Meets:
			parts = append(parts, fmt.Sprintf("%s: none up to %s meets it (%s throttled there)", c.Kind.Words(), report.CPUs(reserved(c)), pct(c.Prediction.ThrottledRatio)))
		case rec.Kind != KindNoLimit && reserved(c) < reserved(rec.Candidate):
			parts = append(parts, fmt.Sprintf("%s needs %s, within %s: the simpler setting is kept", c.Kind.Words(), report.CPUs(reserved(c)), pct(TieMargin)))
		default:
			parts = append(parts, fmt.Sprintf("%s needs %s", c.Kind.Words(), report.CPUs(reserved(c))))
		}
	}
	return strings.Join(parts, "; ")
}

// headroomText says how the headroom raised a candidate's setting ("" when
// it did not).
func headroomText(c Candidate, headroom float64) string {
	if c.FitMillicores == 0 || c.Setting.Millicores() <= c.FitMillicores {
		return ""
	}
	return fmt.Sprintf("%s met it in the simulation, raised by %s", report.CPUs(float64(c.FitMillicores)/1000), headroomWords(headroom))
}
