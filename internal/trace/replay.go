package trace

// Where a replay's method (Replay.DemandFrom) and parallelism
// (Replay.ParallelismFrom) came from.
const (
	FromParams      = "params"       // the built-in workload's flags (its threads)
	FromSynthetic   = "synthetic"    // a synthetic trace (fleet.Synthesize)
	FromDefault     = "default"      // a trace that says neither
	FromGiven       = "given"        // the caller's option (a flag)
	FromStoppedCPUs = "stopped_cpus" // the CPUs stopped in its throttled periods
	FromRunningCPUs = "running_cpus" // its busiest period
)

// Replay says how a simulated run's demand was taken from another trace
// (cfsprobe simulate replay): which trace, and how its per-period usage
// was turned back into demand (docs/simulate.md, "Replay").
type Replay struct {
	// Source names the trace replayed (the file, as given).
	Source string `json:"source"`
	// Workload is the source's spec.workload; Limits the limits it ran
	// under; Periods the number of its periods; UsageNs the CPU time
	// they hold.
	Workload string `json:"workload"`
	Limits   Limits `json:"limits"`
	Periods  int    `json:"periods"`
	UsageNs  int64  `json:"usage_ns"`
	// Demand is how the work the group could not do while it stood
	// still was reconstructed: "closed", "scheduled", "open" or "timed";
	// DemandFrom says who chose it: FromParams, FromSynthetic,
	// FromDefault or FromGiven (or, from the recommender, what the
	// trace's throttled stretches showed).
	Demand     string `json:"demand"`
	DemandFrom string `json:"demand_from"`
	// Parallelism is the number of CPUs the group's work ran on at once
	// when it had work, before Scale; ParallelismFrom says where it was
	// read: FromParams, FromStoppedCPUs, FromRunningCPUs or FromGiven.
	Parallelism     int    `json:"parallelism"`
	ParallelismFrom string `json:"parallelism_from"`
	// Scale multiplies the demand (and the parallelism it runs at).
	Scale float64 `json:"scale"`
	// DemandNs is the CPU time the replay asks for, scaled: at least
	// UsageNs × Scale, more where throttling hid demand.
	DemandNs int64 `json:"demand_ns"`
	// SpanNs is the length of the replayed timeline: the source's
	// periods from the first one's start to the last one's end, less the
	// time the closed method cut out (the group stood still and, unlimited,
	// would have run on instead; the scheduled method keeps it: the
	// schedule did not move). DemandNs / SpanNs is the demand's average
	// in CPUs.
	SpanNs int64 `json:"span_ns"`
}
