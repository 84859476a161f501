package recommend

import (
	"fmt"
	"slices"
	"time"

	"github.com/cfsprobe/cfsprobe/internal/cgroup"
	"github.com/cfsprobe/cfsprobe/internal/sim"
	"github.com/cfsprobe/cfsprobe/internal/trace"
)

// Prediction is what a setting would do to a group, from the simulator
// (or, for Measured, what the trace shows it did).
type Prediction struct {
	// ThrottledRatio is throttled periods / periods, as the kernel counts
	// them (trace.Summary.ThrottledRatio); 0 without a limit.
	ThrottledRatio float64 `json:"throttled_ratio"`
	Periods        int64   `json:"periods"`
	Throttled      int64   `json:"throttled"`
	// StallP99Ns is the 99th percentile (nearest rank) of the periods'
	// stall (trace.Period.StallNs; 0 for a period not throttled).
	StallP99Ns int64 `json:"stall_p99_ns"`
	// ReservedCPUs is quota / period; nil without a limit.
	ReservedCPUs *float64 `json:"reserved_cpus"`
	// UsedCPUs is the CPU the group used, on average (usage / wall).
	UsedCPUs float64 `json:"used_cpus"`
	// LatencyP99Ns and LatencyP999Ns are the operations' latency, when
	// the trace has operations (a replay has none).
	LatencyP99Ns  *int64 `json:"latency_p99_ns,omitempty"`
	LatencyP999Ns *int64 `json:"latency_p999_ns,omitempty"`
}

// predictionOf reads a prediction from a trace (a simulated one, or the
// measured one).
func predictionOf(tr *trace.Trace) Prediction {
	s := tr.Summary
	p := Prediction{ThrottledRatio: s.ThrottledRatio, Periods: s.NrPeriods, Throttled: s.NrThrottled,
		StallP99Ns: stallP99(tr.Periods), UsedCPUs: s.CPURatio}
	if l := tr.Limits.Cgroup(); !l.Unlimited() {
		c := l.CPUs()
		p.ReservedCPUs = &c
	}
	if lat := s.LatencyNs; lat != nil {
		p99, p999 := lat.P99, lat.P999
		p.LatencyP99Ns, p.LatencyP999Ns = &p99, &p999
	}
	return p
}

// stallP99 is the nearest-rank 99th percentile of the stall of the
// kernel's periods (0 without any: an unlimited trace has windows, not
// periods, and no stall).
func stallP99(ps []trace.Period) int64 {
	stalls := make([]int64, 0, len(ps))
	for _, p := range ps {
		if p.Kernel {
			stalls = append(stalls, p.StallNs)
		}
	}
	slices.Sort(stalls)
	return trace.Quantile(stalls, 0.99)
}

// predictor simulates one group's demand under settings. It is used by
// one goroutine at a time.
type predictor struct {
	era  sim.Era
	cpus int
	seed uint64
	opt  sim.ReplayOptions
	// rec is how the demand was made (without a thread cap); lanes how
	// many CPUs at most its replay runs on at once.
	rec   *trace.Replay
	lanes int
	// replays are the demand reconstructed per thread cap (0: none), once.
	replays map[int]*sim.Replayer
	tr      *trace.Trace
	cache   map[Setting]Prediction
	// ratios are the throttled share of the settings meets ran without
	// a whole prediction.
	ratios map[Setting]float64
	// samples is the last run's readings, for the next to reuse; spare
	// another buffer, for the phases of a run that it does not return.
	samples, spare []trace.CounterSample
	// runs counts simulations (a run of several phases is several).
	runs int
}

// newPredictor checks that the trace can be replayed on the model.
func newPredictor(tr *trace.Trace, era sim.Era, cpus int, seed uint64, opt sim.ReplayOptions) (*predictor, error) {
	r, err := sim.NewReplayer(tr, opt)
	if err != nil {
		return nil, err
	}
	return &predictor{tr: tr, era: era, cpus: cpus, seed: seed, opt: opt, rec: r.Record(), lanes: len(r.Threads()),
		replays: map[int]*sim.Replayer{0: r}, cache: map[Setting]Prediction{}, ratios: map[Setting]float64{}}, nil
}

// predict is the simulator's prediction of the setting.
func (p *predictor) predict(s Setting) (Prediction, error) {
	if pr, ok := p.cache[s]; ok {
		return pr, nil
	}
	res, r, err := p.run(s)
	if err != nil {
		return Prediction{}, err
	}
	tr := sim.NewTrace(sim.TraceInfo{Spec: trace.Spec{Workload: "replay"}, Limits: s.Limits}, res)
	tr.Spec.Simulated.Replay = r.Record()
	pr := predictionOf(tr)
	p.cache[s] = pr
	return pr, nil
}

// meets says whether the setting meets the target on the simulator's
// prediction. A target on the share of periods throttled is read off the
// kernel's counts at the end of the run (trace.CounterSummary, which a
// prediction's throttled ratio is too), without the periods a prediction
// builds from the readings: the searches ask it of many settings and
// keep few.
func (p *predictor) meets(s Setting, t Target) (bool, error) {
	if pr, ok := p.cache[s]; ok || t.Kind == TargetStall {
		if !ok {
			var err error
			if pr, err = p.predict(s); err != nil {
				return false, err
			}
		}
		return t.Met(pr), nil
	}
	ratio, ok := p.ratios[s]
	if !ok {
		res, _, err := p.run(s)
		if err != nil {
			return false, err
		}
		ratio = trace.CounterSummary(res.Samples, res.EndNs).ThrottledRatio
		p.ratios[s] = ratio
	}
	return t.Met(Prediction{ThrottledRatio: ratio}), nil
}

// phaseCount is how many grids of periods a setting is simulated on when
// the trace does not say where its periods will fall: one every eighth of
// a period, so that a burst that is whole in a fifth of all grids (80 ms
// in 100 ms periods) is whole in at least one of them.
const phaseCount = 8

// phases are the phases of the simulated periods' grid (sim.Config.Phase)
// a setting is judged on: where a period's boundaries fall against the
// group's work decides whether a burst lands in one period or in two (a
// closed loop's 160 ms of CPU in 80 ms on 2 CPUs needs 0.8 CPUs + 80 ms
// burst in one, about 0.6 in two).
//
// A recording does not say where the periods of the setting will fall
// against the work. Without a limit it has no kernel periods, and the
// limit set on the group starts its period timer at that moment; under a
// limit, the kernel keeps its grid when the quota changes, but the work
// moves against it: a loop that sleeps after its work starts the next
// burst when the last one ended, which the limit decided (one thread's
// 120 ms bursts, each stretched to 520 ms under 0.2 CPU, come every 1.4
// s there and every 1 s under a limit they fit in). So the setting is
// simulated on phaseCount grids, evenly spread, and judged on the worst.
// Under the limits it was recorded under, the work is where it was: a
// recording is simulated on its own periods then, its first timer expiry
// a whole period after the start. So is a synthetic trace
// (fleet.Synthesize), made of the kernel's periods, each period's demand
// in its period and their order made up, unless the setting has another
// period.
//
// Phases drawn at random would make the advice depend on the seed; one
// grid, the recording's own, made it depend on where the work fell in it
// (the one thread's bursts: 0.40 and 0.49 CPUs + burst from two runs
// without a limit, 0.44 and 0.50 from two under 0.2 CPU, where a grid
// that puts 100 ms of a burst in one period needs 0.50).
func (p *predictor) phases(l cgroup.Limits) []time.Duration {
	if l.Unlimited() {
		return []time.Duration{0}
	}
	period := l.PeriodOrDefault()
	// Half a tick early: a period timer is not on the tick's grid, and
	// the simulator's ticks are at whole ticks from the start.
	first := period - sim.DefaultTick/2
	tl := p.tr.Limits.Cgroup()
	own := !tl.Unlimited() && tl.PeriodOrDefault() == period
	if own && (p.tr.Spec.Synthetic != "" || tl.Quota == l.Quota && tl.Burst == l.Burst) {
		return []time.Duration{first}
	}
	out := make([]time.Duration, phaseCount)
	for i := range out {
		out[i] = first - time.Duration(i)*period/phaseCount
	}
	return out
}

// run replays the demand under the setting: its limits, and its thread
// cap as the replay's parallelism, on each of its phases; the result is
// the phase that throttled the most periods (the first of those that
// throttled as many). The result's readings are reused by the next run:
// it is good until then.
func (p *predictor) run(s Setting) (*sim.Result, *sim.Replayer, error) {
	r, ok := p.replays[s.Threads]
	if !ok {
		opt := p.opt
		opt.Parallelism = s.Threads
		var err error
		if r, err = sim.NewReplayer(p.tr, opt); err != nil {
			return nil, nil, err
		}
		p.replays[s.Threads] = r
	}
	var res *sim.Result
	worst := -1.0
	for _, phase := range p.phases(s.Limits) {
		// The first phase writes its readings where the last result's
		// were; the others where the phases that were not the worst
		// so far left theirs.
		buf := p.spare
		if res == nil {
			buf = p.samples
		}
		got, err := sim.Run(sim.Config{Era: p.era, CPUs: p.cpus, Limits: s.Limits, Seed: p.seed, Phase: phase, Samples: buf, QuietIdle: true}, r.Threads())
		if err != nil {
			return nil, nil, fmt.Errorf("simulate %s: %w", s, err)
		}
		p.runs++
		if ratio := trace.CounterSummary(got.Samples, got.EndNs).ThrottledRatio; ratio > worst {
			if res != nil {
				p.spare = res.Samples
			}
			res, worst = got, ratio
		} else {
			p.spare = got.Samples
		}
	}
	p.samples = res.Samples
	return res, r, nil
}
