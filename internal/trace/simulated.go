package trace

// Simulated marks a trace that internal/sim wrote from its model of CFS
// bandwidth control instead of a measurement: the kernel era it modelled
// and every parameter of the model, so that the run can be repeated
// exactly (same parameters, same seed, same trace). docs/trace.md
// describes the fields.
type Simulated struct {
	// Era is the kernel model ("3.16", "4.18", "5.4", "5.14", "6.18").
	Era string `json:"era"`
	// HostCPUs is the number of CPUs of the simulated host.
	HostCPUs int `json:"host_cpus"`
	// SliceNs is sched_cfs_bandwidth_slice_us: what a CPU takes from the
	// group's pool at a time.
	SliceNs int64 `json:"slice_ns"`
	// TickNs is the scheduler tick, at which a running thread is charged.
	TickNs int64 `json:"tick_ns"`
	// TickOffsetNs is where the ticks fall: at tick_offset_ns + k ×
	// tick_ns.
	TickOffsetNs int64 `json:"tick_offset_ns,omitempty"`
	// WakeupsNs is how often, on average, another task woke on one of
	// the group's CPUs and held it for wakeup_run_ns (absent: never).
	WakeupsNs   int64 `json:"wakeups_ns,omitempty"`
	WakeupRunNs int64 `json:"wakeup_run_ns,omitempty"`
	// MinRuntimeNs is min_cfs_rq_runtime: what a CPU keeps when its last
	// thread leaves it; the rest goes back to the pool.
	MinRuntimeNs int64 `json:"min_runtime_ns"`
	// SlackNs is the slack timer's delay (cfs_bandwidth_slack_period):
	// returned runtime is handed to throttled CPUs that long after it came
	// back.
	SlackNs int64 `json:"slack_ns"`
	// MinExpirationNs is min_bandwidth_expiration: the slack timer does
	// nothing that close to the period's end, and is not started within
	// SlackNs + MinExpirationNs of it.
	MinExpirationNs int64 `json:"min_expiration_ns"`
	// Seed seeds every random choice of the model (the period timer's
	// phase, where woken threads land, the workload's own draws).
	Seed uint64 `json:"seed"`
	// PhaseNs is when the group's period timer first fires, after the
	// start (the grid of period boundaries is PhaseNs + k × period).
	PhaseNs int64 `json:"phase_ns"`
	// Threads is the number of simulated threads.
	Threads int `json:"threads"`
	// Parent is the parent group's limits when it had a quota of its own.
	Parent *Limits `json:"parent,omitempty"`
	// Replay, for the replay workload, says which trace's demand was
	// simulated and how it was reconstructed.
	Replay *Replay `json:"replay,omitempty"`
	// EventCPUNs is the CPU time of one event of the parallel workload
	// the simulation used: given (cfsprobe simulate --event-cpu) or
	// measured on the host that simulated (absent for other workloads).
	EventCPUNs int64 `json:"event_cpu_ns,omitempty"`
	// EventCPUQuantiles is how the events' CPU time spread around
	// EventCPUNs, their mean: an event's time is drawn between these
	// quantiles, linear between two (cfsprobe simulate
	// --event-cpu-quantiles, or measured on the host that simulated;
	// absent: every event took EventCPUNs).
	EventCPUQuantiles []QuantileNs `json:"event_cpu_quantiles,omitempty"`
	// StartCPUNs, ExitCPUNs, ThreadCPUNs and WakeCPUNs are the CPU time
	// of the built-in workload's process's start (before its clock), of
	// its exit (after its last operation), of each of its threads beside
	// its operations (its making and end, charged before its first) and of
	// a thread's wake-up from a sleep that the simulation charged,
	// WakeMidCPUNs that of a wake-up from a sleep of 50 ms and
	// WakeLongCPUNs from one of a second or more (absent: interpolated,
	// or as WakeCPUNs; between, interpolated on a log scale of the sleep:
	// sim.Costs.WakeAfter): given (cfsprobe simulate --start-cpu,
	// --exit-cpu, --thread-cpu, --wake-cpu, --wake-cpu-mid,
	// --wake-cpu-long), measured on
	// the host that simulated, or, beside a measured run (suite
	// --compare), that run's start and exit (absent for replay).
	StartCPUNs  int64 `json:"start_cpu_ns,omitempty"`
	ExitCPUNs   int64 `json:"exit_cpu_ns,omitempty"`
	ThreadCPUNs int64 `json:"thread_cpu_ns,omitempty"`
	// SleepLateNs is how late each sleep of a built-in workload ended
	// (cfsprobe simulate --sleep-late, its default, or as measured on
	// this host by suite --compare).
	SleepLateNs   int64 `json:"sleep_late_ns,omitempty"`
	WakeCPUNs     int64 `json:"wake_cpu_ns,omitempty"`
	WakeMidCPUNs  int64 `json:"wake_mid_cpu_ns,omitempty"`
	WakeLongCPUNs int64 `json:"wake_long_cpu_ns,omitempty"`
	// ResumeLateNs is how long after the refill that unthrottled its CPU
	// a stopped thread ran again (absent: at once; cfsprobe simulate
	// --resume-late, or as measured on this host by suite --compare).
	ResumeLateNs int64 `json:"resume_late_ns,omitempty"`
}

// QuantileNs is a duration at a quantile of its distribution: a fraction
// P (0 to 1) of the values are at most Ns.
type QuantileNs struct {
	P  float64 `json:"p"`
	Ns int64   `json:"ns"`
}
