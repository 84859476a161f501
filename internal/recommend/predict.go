package recommend

import (
	"fmt"
	"slices"

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

// predictor simulates one group's demand under settings.
type predictor struct {
	tr   *trace.Trace
	era  sim.Era
	cpus int
	seed uint64
	opt  sim.ReplayOptions
	// rec is how the demand was made (without a thread cap).
	rec   *trace.Replay
	cache map[Setting]Prediction
	runs  int
}

// newPredictor checks that the trace can be replayed on the model.
func newPredictor(tr *trace.Trace, era sim.Era, cpus int, seed uint64, opt sim.ReplayOptions) (*predictor, error) {
	_, rec, err := sim.Replay(tr, opt)
	if err != nil {
		return nil, err
	}
	return &predictor{tr: tr, era: era, cpus: cpus, seed: seed, opt: opt, rec: rec, cache: map[Setting]Prediction{}}, nil
}

// predict is the simulator's prediction of the setting.
func (p *predictor) predict(s Setting) (Prediction, error) {
	if pr, ok := p.cache[s]; ok {
		return pr, nil
	}
	tr, err := p.simulate(s)
	if err != nil {
		return Prediction{}, err
	}
	pr := predictionOf(tr)
	p.cache[s] = pr
	return pr, nil
}

// simulate replays the demand under the setting: its limits, and its
// thread cap as the replay's parallelism.
func (p *predictor) simulate(s Setting) (*trace.Trace, error) {
	opt := p.opt
	opt.Parallelism = s.Threads
	threads, rec, err := sim.Replay(p.tr, opt)
	if err != nil {
		return nil, err
	}
	res, err := sim.Run(sim.Config{Era: p.era, CPUs: p.cpus, Limits: s.Limits, Seed: p.seed}, threads)
	if err != nil {
		return nil, fmt.Errorf("simulate %s: %w", s, err)
	}
	p.runs++
	tr := sim.NewTrace(sim.TraceInfo{Spec: trace.Spec{Workload: "replay"}, Limits: s.Limits}, res)
	tr.Spec.Simulated.Replay = rec
	return tr, nil
}
