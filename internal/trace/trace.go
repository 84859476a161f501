// Package trace defines cfsprobe's trace: what ran, where, under which
// limits, a per-period timeline, per-operation latencies and a summary,
// and its one model of a period: Tracker turns a group's counter samples
// into the kernel's enforcement periods for the lab (run, suites, check),
// record and the monitor (top, exporter) alike. The lab and record write
// traces; report and check read them. The format is versioned JSON
// documented in docs/trace.md.
package trace

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/cfsprobe/cfsprobe/internal/cgroup"
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
	// StartedMonoNs is the run's start (its time 0) on the kernel's
	// monotonic clock (CLOCK_MONOTONIC), 0 when unknown: the scheduler's
	// tick falls on its multiples of the tick on every CPU, so it says
	// where the ticks were in the run (a simulation compared with it
	// puts its own there).
	StartedMonoNs int64 `json:"started_mono_ns,omitempty"`
	// SampleIntervalNs is how often the counters were read.
	SampleIntervalNs int64 `json:"sample_interval_ns"`
	// ReaderClass is where the threads that read the counters ran:
	// ReaderApart, ReaderRealtime or ReaderFair; empty when not said (a
	// simulated trace, a run shorter than one reading, a trace written
	// before the field).
	ReaderClass string `json:"reader_class,omitempty"`
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

// Where the reader ran (Trace.ReaderClass). Apart: on CPUs that a
// pinned workload does not run on, in the fair class, where it keeps
// nothing of the group's from running. In the real-time class
// (SCHED_FIFO) a wake-up of the reader preempts the group's thread on its
// CPU at once; in the fair class it may wait beside it until the next
// tick, where the load balancer may count it and move one of the group's
// threads to another CPU (docs/design.md, "The lab's reader").
const (
	ReaderApart    = "apart"
	ReaderRealtime = "realtime"
	ReaderFair     = "fair"
)

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
	// Unit is "ns" when Value (and Min, Max) are durations in
	// nanoseconds; empty for a ratio or a count.
	Unit string `json:"unit,omitempty"`
	OK   bool   `json:"ok"`
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
	// Params are what the built-in workload ran with (nil for a command).
	Params *Params `json:"params,omitempty"`
	// View is the CPU view the workload was given (run --view), if any.
	View *View `json:"view,omitempty"`
	// Synthetic, on a trace that is not a measurement, says where it comes
	// from.
	Synthetic string `json:"synthetic,omitempty"`
	// Stretches, on a synthetic trace built from the exporter's series,
	// are the group's throttled stretches as the exporter counted them
	// over the window: the trace's periods are in a made-up order, so
	// replay reads whether the group is a closed loop from these
	// (sim.TraceDemand).
	Stretches *Stretches `json:"stretches,omitempty"`
	// Simulated is set on a trace that internal/sim wrote from its model
	// rather than from a measurement.
	Simulated *Simulated `json:"simulated,omitempty"`
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

// Limits are the bandwidth settings of the run's group, as the file
// writes them: cgroup.Limits in microseconds, no quota as null. LimitsOf
// makes them and Cgroup turns them back; nothing else builds them.
type Limits struct {
	PeriodUs int64 `json:"period_us"`
	// QuotaUs is null when unlimited.
	QuotaUs *int64 `json:"quota_us"`
	BurstUs int64  `json:"burst_us"`
	Cpuset  string `json:"cpuset,omitempty"`
	// CPUs is quota/period (null when unlimited).
	CPUs *float64 `json:"cpus"`
}

// LimitsOf writes limits in the trace's form.
func LimitsOf(l cgroup.Limits) Limits {
	t := Limits{PeriodUs: l.Period.Microseconds(), BurstUs: l.Burst.Microseconds(), Cpuset: l.Cpuset}
	if !l.Unlimited() {
		q, c := l.Quota.Microseconds(), l.CPUs()
		t.QuotaUs, t.CPUs = &q, &c
	}
	return t
}

// Cgroup reads the limits back: a null (or, in a file written by hand,
// a non-positive) quota is no quota.
func (l Limits) Cgroup() cgroup.Limits {
	c := cgroup.Limits{Period: time.Duration(l.PeriodUs) * time.Microsecond, Burst: time.Duration(l.BurstUs) * time.Microsecond, Cpuset: l.Cpuset}
	if l.QuotaUs != nil && *l.QuotaUs > 0 {
		c.Quota = time.Duration(*l.QuotaUs) * time.Microsecond
	}
	return c
}

// Unlimited reports whether the run had no quota.
func (l Limits) Unlimited() bool { return l.Cgroup().Unlimited() }

// Cgroup says where the run was measured.
type Cgroup struct {
	Path    string `json:"path"`
	Version int    `json:"version"`
	// Names are the container runtime's names of the group's container
	// or pod, when one was asked and answered (cfsprobe record); absent
	// otherwise.
	Names
}

// Names are what a container runtime calls the container or pod a group
// belongs to: the names people know it by (docker ps, kubectl get pods),
// where the group's path has only IDs. Each is empty when unknown.
type Names struct {
	// ContainerName is a Docker container's name (without docker's
	// leading /), or a Kubernetes container's name in its pod ("POD" for
	// the pod's sandbox); empty for a pod's own group.
	ContainerName string `json:"container_name,omitempty"`
	// Image is the image the container was started from, as it was
	// given (nginx:1.25); empty for a pod's own group.
	Image string `json:"image,omitempty"`
	// PodNamespace and PodName name a Kubernetes container's pod.
	PodNamespace string `json:"pod_namespace,omitempty"`
	PodName      string `json:"pod_name,omitempty"`
}

// IsZero reports whether no name is known.
func (n Names) IsZero() bool { return n == Names{} }

// Label is how people name the group: a Kubernetes container as
// namespace/pod/container (a pod's own group as namespace/pod), a Docker
// container by its name and image ("web (nginx:1.25)"); pathName (what
// the group's path says, monitor.Identity.Name) when no name is known.
func (n Names) Label(pathName string) string {
	switch {
	case n.PodName != "":
		l := n.PodNamespace + "/" + n.PodName
		if n.ContainerName != "" {
			l += "/" + n.ContainerName
		}
		return l
	case n.ContainerName != "" && n.Image != "":
		return n.ContainerName + " (" + n.Image + ")"
	case n.ContainerName != "":
		return n.ContainerName
	}
	return pathName
}

// Short is the name a group's advice goes by: its container's (the one a
// pod spec names), else its pod's as namespace/pod, else pathName.
func (n Names) Short(pathName string) string {
	switch {
	case n.ContainerName != "":
		return n.ContainerName
	case n.PodName != "":
		return n.PodNamespace + "/" + n.PodName
	}
	return pathName
}

// Period is one entry of the timeline: one enforcement period of the
// kernel's (Kernel), or, for an unlimited run, a wall-clock window of one
// period. Times are nanoseconds since the start of the run. Each figure
// has one definition, given here and in docs/trace.md; the Tracker works
// them out, the same way for the lab, the monitor and record.
type Period struct {
	StartNs int64 `json:"start_ns"`
	EndNs   int64 `json:"end_ns"`
	// UsageNs is the CPU time the group used in the period.
	UsageNs int64 `json:"usage_ns"`
	// UsageMaxNs is the most the group can have used in the period, given
	// where the readings around its two ends put them and that it runs on
	// at most the node's CPUs (at least UsageNs; 0 in traces written
	// before it was recorded).
	UsageMaxNs int64 `json:"usage_max_ns,omitempty"`
	// EndBusy is true when the group used CPU between the readings on
	// either side of the period's end: its work ran on into the next
	// period, or stopped or began within a reading of the end. Replay
	// keeps such work in one piece (docs/simulate.md).
	EndBusy bool `json:"end_busy,omitempty"`
	// Throttled is true when the kernel counted the period as throttled.
	Throttled bool `json:"throttled"`
	// ThrottledNs is the throttled time the kernel accounted for the
	// period: the time the group's run queues stood still, summed over
	// them (two CPUs stopped for 50 ms count 100 ms).
	ThrottledNs int64 `json:"throttled_ns"`
	// StallNs is the wall time the group stood still in a throttled
	// period: ThrottledNs divided by StoppedCPUs, at most the period (0
	// when not throttled).
	StallNs int64 `json:"stall_ns,omitempty"`
	// StoppedCPUs is the number of CPUs whose run queues the kernel
	// throttled in the period (0 when not throttled).
	StoppedCPUs int `json:"stopped_cpus,omitempty"`
	// RunningCPUs is how many CPUs the group kept busy on average while
	// it was not stopped: UsageNs / (period - StallNs).
	RunningCPUs float64 `json:"running_cpus,omitempty"`
	// DebtNs is the CPU time the group had used beyond its quota (and
	// burst) in earlier periods and not yet paid back when the period
	// began: the kernel takes it from the next refill, so a group in debt
	// is throttled without running.
	DebtNs int64 `json:"debt_ns,omitempty"`
	// BurstNs is the CPU time taken from the burst pool.
	BurstNs int64 `json:"burst_ns"`
	// Kernel is false for wall-clock windows of an unlimited run, where the
	// kernel enforces no period.
	Kernel bool `json:"kernel"`
	// Blurred is true when the readings did not see the period closely:
	// an end could not be placed to within a millisecond (the grid of
	// the kernel's period timer was not learnt yet, and the readings
	// around it were further apart), fell in readings more than half a
	// period apart (the reader was starved, the group woke up from
	// idle), or it began before the first reading. Its usage is an
	// interpolation across the gap, and UsageMaxNs bounds it.
	Blurred bool `json:"blurred,omitempty"`

	stop stopAt // where the readings put the group's stop (Tracker)
}

// UnderQuotaRatio is the line below which a throttled period counts as
// throttled under quota.
const UnderQuotaRatio = 0.5

// UsageRatio is the period's usage as a fraction of quota (0 without a
// quota).
func (p Period) UsageRatio(quota time.Duration) float64 {
	if quota <= 0 {
		return 0
	}
	return float64(p.UsageNs) / float64(quota)
}

// ThrottledUnderQuota reports whether the kernel throttled the group in
// the period while it used less than UnderQuotaRatio of its quota, which
// a correct kernel never does (the defect of Linux 3.16 to 5.3 that
// cfsprobe check looks for). It judges by the most the readings allow
// (UsageMaxNs) plus the overrun of earlier periods the group was paying
// back (DebtNs), so that a period the readings blur, or one throttled for
// an earlier overrun, is not taken for one throttled under quota.
func (p Period) ThrottledUnderQuota(quota time.Duration) bool {
	return p.Throttled && quota > 0 && float64(max(p.UsageMaxNs, p.UsageNs)+p.DebtNs) < UnderQuotaRatio*float64(quota)
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
	// at its end (its process CPU clock, from its fork; 0 for external
	// commands).
	SelfCPUNs int64 `json:"self_cpu_ns,omitempty"`
	// ReleasedNs is when the built-in workload's clock started, on the
	// run's clock: its process's start done (its threads not yet made);
	// before 0 when that was done before the process's start returned
	// to cfsprobe (on cgroup v1, where the lab releases the process
	// into its group: internal/cgroup.Start).
	// StartCPUNs is the CPU time the group was charged for the process up
	// to then, ExitCPUNs what it was charged after the process's last
	// operation (joining its threads, reporting, exiting). Absent for
	// external commands.
	ReleasedNs int64 `json:"released_ns,omitempty"`
	StartCPUNs int64 `json:"start_cpu_ns,omitempty"`
	ExitCPUNs  int64 `json:"exit_cpu_ns,omitempty"`
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
	// OthersBusyCPUs, for a lab run, is how many CPUs other work than
	// the group and cfsprobe kept busy on average during the run, among
	// the CPUs the group could run on: their busy time
	// (cgroup.BusyBetween: the time they were not idle) less the group's
	// usage, and less cfsprobe's own (SelfBusyCPUs) when the group could
	// run on every CPU. Absent from simulated and recorded traces.
	OthersBusyCPUs *float64 `json:"others_busy_cpus,omitempty"`
	// StolenCPUs, for a lab run, is how much of OthersBusyCPUs was the
	// hypervisor's steal time on those CPUs (cgroup.CPUTimes.Steal):
	// time it ran something else while they had work, which a thread
	// that runs then loses, whatever the limit. Absent where the kernel
	// counts none (no paravirtual steal clock) and from simulated and
	// recorded traces.
	StolenCPUs *float64 `json:"stolen_cpus,omitempty"`
	// SelfBusyCPUs, for a lab run, is how many CPUs cfsprobe's own
	// threads kept busy on average during the run: its reader of the
	// counters, mostly, whose wake-ups a simulation compared with the run
	// models (sim.Config.Wakeups), and so not other work. Where they may
	// not all have been on the group's CPUs (a pinned workload, a cpuset),
	// OthersBusyCPUs keeps them. Absent from simulated and recorded
	// traces.
	SelfBusyCPUs *float64 `json:"self_busy_cpus,omitempty"`
}

// DisturbedCPUs is how many CPUs other work may keep busy beside a lab
// run before the run is a disturbed measurement (Summary.Disturbed): a
// workload that burns CPU for a wall-clock time loses what other work
// takes on its CPU, so 5 ms burns once a second beside a twentieth of a
// CPU of other work show about 5 % less CPU used, and a wake-up that other
// work delays by a tick moves a burst against the period.
const DisturbedCPUs = 0.05

// Disturbed says whether other work kept more than DisturbedCPUs busy
// beside the run (false when that was not measured).
func (s Summary) Disturbed() bool {
	return s.OthersBusyCPUs != nil && *s.OthersBusyCPUs > DisturbedCPUs
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
