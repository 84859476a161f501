// Package trace defines cfsprobe's trace: what ran, where, under which
// limits, a per-period timeline, per-operation latencies and a summary.
// The lab, the monitor and the simulator write traces; reports and the
// recommender read them. The format is versioned JSON documented in
// docs/trace.md.
package trace

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"time"
)

// Schema is the value of the schema field of this version of the format.
const Schema = "cfsprobe.trace/v1"

// Trace is one run.
type Trace struct {
	Schema  string    `json:"schema"`
	Tool    Tool      `json:"tool"`
	Spec    Spec      `json:"spec"`
	Host    Host      `json:"host"`
	Limits  Limits    `json:"limits"`
	Cgroup  Cgroup    `json:"cgroup"`
	Started time.Time `json:"started"`
	// SampleIntervalNs is how often the counters were read.
	SampleIntervalNs int64 `json:"sample_interval_ns"`
	// Periods is the per-period timeline.
	Periods []Period `json:"periods"`
	// Latency holds per-operation latencies (nil for external commands).
	Latency *Latency `json:"latency,omitempty"`
	// Throughput counts operations completed per fixed time bucket, for
	// in-period profiles (workloads with many short operations).
	Throughput *Throughput `json:"throughput,omitempty"`
	// Process is what the operating system said of the workload process.
	Process Process `json:"process"`
	Summary Summary `json:"summary"`
	// Checks are consistency checks of the trace against the kernel.
	Checks []Check `json:"checks,omitempty"`
	// Output holds the workload's own lines when they are kept.
	Output []string `json:"output,omitempty"`
	// Scenario is set when the run was part of a suite.
	Scenario *Scenario `json:"scenario,omitempty"`
}

// Scenario places a run in a suite and says how it fared against the
// scenario's expectations.
type Scenario struct {
	Suite       string `json:"suite"`
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	// Repetition counts from 1.
	Repetition   int           `json:"repetition"`
	Expectations []Expectation `json:"expectations,omitempty"`
	// Verdict is "pass", "fail", or "none" (no expectations).
	Verdict string `json:"verdict"`
}

// Expectation is one bound on one metric, and the value measured.
type Expectation struct {
	Metric string   `json:"metric"`
	Min    *float64 `json:"min,omitempty"`
	Max    *float64 `json:"max,omitempty"`
	// Relative names the scenario the metric is compared with (the value
	// is then a ratio to that scenario's value).
	Relative string  `json:"relative,omitempty"`
	Value    float64 `json:"value"`
	OK       bool    `json:"ok"`
	// Text is the expectation for people: "throttled_ratio >= 0.95".
	Text string `json:"text"`
}

// Tool names the program that wrote the trace.
type Tool struct {
	Name    string `json:"name"`
	Version string `json:"version"`
}

// Spec says what ran.
type Spec struct {
	// Workload is "periodic", "bursty", "parallel" or "command".
	Workload string `json:"workload"`
	// Args are the workload's flags (built-in) or the command line.
	Args []string `json:"args"`
	// Params are the built-in workload's parsed parameters.
	Params map[string]any `json:"params,omitempty"`
	// View is the CPU view the workload was given (run --view), if any.
	View *View `json:"view,omitempty"`
}

// View is the CPU view a workload was given: the CPU count that libc
// callers (through cfsprobe's LD_PRELOAD library) and runtimes (through
// their variables) saw instead of the host's.
type View struct {
	CPUs int `json:"cpus"`
	// Auto: derived from the run's limits, rounded by Round.
	Auto  bool   `json:"auto"`
	Round string `json:"round,omitempty"`
	// Library: the LD_PRELOAD library was given; false means the
	// variables alone (a binary built without it).
	Library bool `json:"library"`
	// Env are the variables set ("K=V"); values the user had set are kept
	// and not listed.
	Env []string `json:"env"`
}

// Host describes the machine.
type Host struct {
	Hostname   string `json:"hostname"`
	Kernel     string `json:"kernel"`
	Arch       string `json:"arch"`
	CPUs       int    `json:"cpus"`        // online CPUs
	CgroupMode string `json:"cgroup_mode"` // v1, hybrid, v2
	// CPUController is the cgroup version through which the cpu
	// controller is used (1 or 2).
	CPUController int `json:"cpu_controller"`
	// SliceUs is kernel.sched_cfs_bandwidth_slice_us (0 when unknown).
	SliceUs        int64 `json:"sched_cfs_bandwidth_slice_us"`
	BurstSupported bool  `json:"burst_supported"`
}

// Limits are the bandwidth settings of the run's group.
type Limits struct {
	PeriodUs int64 `json:"period_us"`
	// QuotaUs is null when unlimited.
	QuotaUs *int64 `json:"quota_us"`
	BurstUs int64  `json:"burst_us"`
	Cpuset  string `json:"cpuset,omitempty"`
	// CPUs is quota/period (null when unlimited).
	CPUs *float64 `json:"cpus"`
}

// Unlimited reports whether the run had no quota.
func (l Limits) Unlimited() bool { return l.QuotaUs == nil }

// Period is the enforcement period as a duration.
func (l Limits) Period() time.Duration { return time.Duration(l.PeriodUs) * time.Microsecond }

// Quota is the quota as a duration (0 when unlimited).
func (l Limits) Quota() time.Duration {
	if l.QuotaUs == nil {
		return 0
	}
	return time.Duration(*l.QuotaUs) * time.Microsecond
}

// Cgroup says where the run was measured.
type Cgroup struct {
	Path    string `json:"path"`
	Version int    `json:"version"`
}

// Period is one entry of the timeline. Times are nanoseconds since the
// start of the run (the workload's release into its group).
type Period struct {
	StartNs int64 `json:"start_ns"`
	EndNs   int64 `json:"end_ns"`
	// UsageNs is the CPU time the group used in the period.
	UsageNs int64 `json:"usage_ns"`
	// Throttled is true when the kernel counted the period as throttled.
	Throttled bool `json:"throttled"`
	// ThrottledNs is the stall time the kernel accounted at the end of the
	// period (time the group's runqueues spent throttled).
	ThrottledNs int64 `json:"throttled_ns"`
	// BurstNs is the CPU time taken from the burst pool.
	BurstNs int64 `json:"burst_ns"`
	// Kernel is false for wall-clock windows of an unlimited run, where the
	// kernel enforces no period.
	Kernel bool `json:"kernel"`
}

// Process is the workload process's own account.
type Process struct {
	PID      int    `json:"pid"`
	ExitCode int    `json:"exit_code"`
	Signal   string `json:"signal,omitempty"`
	// RusageNs is user+system CPU time from wait4 (the process and the
	// children it waited for).
	RusageNs int64 `json:"rusage_ns"`
	// SelfCPUNs is the CPU time the built-in workload measured for itself
	// with getrusage at its end (0 for external commands).
	SelfCPUNs int64 `json:"self_cpu_ns,omitempty"`
}

// Summary holds the figures scripts rely on. Counters are the kernel's
// deltas over the run.
type Summary struct {
	WallNs         int64   `json:"wall_ns"`
	UsageNs        int64   `json:"usage_ns"`
	NrPeriods      int64   `json:"nr_periods"`
	NrThrottled    int64   `json:"nr_throttled"`
	ThrottledNs    int64   `json:"throttled_ns"`
	NrBursts       int64   `json:"nr_bursts"`
	BurstNs        int64   `json:"burst_ns"`
	ThrottledRatio float64 `json:"throttled_ratio"` // nr_throttled / nr_periods (0 when no period)
	CPURatio       float64 `json:"cpu_ratio"`       // usage / wall, in CPUs
	Ops            int64   `json:"ops"`
	// LatencyNs summarises per-operation latencies (absent without ops).
	LatencyNs *Percentiles `json:"latency_ns,omitempty"`
	// TimelineThrottled is the number of throttled periods in the timeline.
	TimelineThrottled int64 `json:"timeline_throttled"`
}

// Percentiles of a latency distribution, in nanoseconds.
type Percentiles struct {
	Min  int64   `json:"min"`
	Mean float64 `json:"mean"`
	P50  int64   `json:"p50"`
	P90  int64   `json:"p90"`
	P99  int64   `json:"p99"`
	P999 int64   `json:"p999"`
	Max  int64   `json:"max"`
}

// Check is a consistency check recorded with the trace.
type Check struct {
	Name   string `json:"name"`
	OK     bool   `json:"ok"`
	Detail string `json:"detail"`
}

// Write encodes the trace as indented JSON.
func (t *Trace) Write(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(t)
}

// WriteFile saves the trace.
func (t *Trace) WriteFile(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := t.Write(f); err != nil {
		f.Close()
		return fmt.Errorf("write trace %s: %w", path, err)
	}
	return f.Close()
}

// Read decodes a trace and checks its schema.
func Read(r io.Reader) (*Trace, error) {
	var t Trace
	dec := json.NewDecoder(r)
	if err := dec.Decode(&t); err != nil {
		return nil, err
	}
	if t.Schema != Schema {
		return nil, fmt.Errorf("schema %q is not %q", t.Schema, Schema)
	}
	return &t, nil
}

// ReadFile loads a trace from disk.
func ReadFile(path string) (*Trace, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	t, err := Read(f)
	if err != nil {
		return nil, fmt.Errorf("read trace %s: %w", path, err)
	}
	return t, nil
}
