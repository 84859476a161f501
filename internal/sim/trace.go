package sim

import (
	"time"

	"github.com/cfsprobe/cfsprobe/internal/cgroup"
	"github.com/cfsprobe/cfsprobe/internal/trace"
	"github.com/cfsprobe/cfsprobe/internal/workload"
)

// TraceInfo is what a simulation's trace says beside its Result.
type TraceInfo struct {
	// Spec is what ran; NewTrace adds Simulated (the Result's model).
	Spec   trace.Spec
	Limits cgroup.Limits
	// Workload, when set, is the built-in workload whose operations the
	// Result's Ops are: they become the trace's latency (and throughput),
	// kept as a run of it keeps them (workload.ResultOf).
	Workload workload.Workload
	// Version is cfsprobe's.
	Version string
}

// NewTrace writes a simulation's result as a trace, the way the lab
// writes a run's: the simulated host (its CPUs, the kernel era as its
// kernel, the model's slice), the limits, the periods, summary and checks
// from the Result's counter samples through trace.Finish (the one period
// model), and the operations' latency. spec.simulated holds the model.
func NewTrace(info TraceInfo, res *Result) *trace.Trace {
	model := res.Model
	spec := info.Spec
	spec.Simulated = &model
	era := Era(model.Era)
	tr := &trace.Trace{
		Schema: trace.Schema, Tool: trace.Tool{Name: "cfsprobe", Version: info.Version},
		Spec: spec,
		Host: trace.Host{
			Kernel: string(era), CPUs: model.HostCPUs,
			SliceUs: model.SliceNs / int64(time.Microsecond), BurstSupported: modelOf(era).burst,
		},
		Limits:           trace.LimitsOf(info.Limits),
		Started:          time.Now().UTC(),
		SampleIntervalNs: longestGap(res.Samples),
	}
	if info.Workload != nil {
		r := workload.ResultOf(info.Workload, res.Ops, res.EndNs)
		tr.Latency, tr.Throughput = r.Latency, r.Throughput
	}
	trace.Finish(tr, res.Samples, res.EndNs, true)
	return tr
}

// longestGap is the longest time between two readings of the counters:
// the trace's sample interval (the simulator reads them at every event
// that matters, and around every period boundary).
func longestGap(s []trace.CounterSample) int64 {
	var g int64
	for i := 1; i < len(s); i++ {
		g = max(g, s[i].T-s[i-1].T)
	}
	return g
}
