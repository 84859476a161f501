package check

// The result of a check: what cfsprobe check --json prints, and what the
// text form (text.go) shows.

import (
	"time"

	"github.com/cfsprobe/cfsprobe/internal/trace"
)

// Schema is the value of Result.Schema.
const Schema = "cfsprobe.check/v1"

// Verdicts.
const (
	Affected     = "affected"
	NotAffected  = "not affected"
	Inconclusive = "inconclusive"
)

// Thresholds are the analysis's parameters. DefaultThresholds are the
// ones cfsprobe check uses; docs/check.md explains them.
type Thresholds struct {
	// UnderQuota: a throttled period is "under quota" when the group used
	// less than this share of the quota in it, at most as the readings
	// allow and counting its debt (trace.Period.ThrottledUnderQuota: the
	// one definition, which the exporter's counter uses too). Reported,
	// not a setting: trace.UnderQuotaRatio.
	UnderQuota float64 `json:"under_quota"`
	// An operation is slow when it took at least SlowFactor times its
	// expected time and at least SlowMinNs.
	SlowFactor float64 `json:"slow_factor"`
	SlowMinNs  int64   `json:"slow_min_ns"`
	// MinPeriods is how many judged periods a verdict needs.
	MinPeriods int64 `json:"min_periods"`
	// Affected needs at least MinUnderQuota throttled periods under quota,
	// at least MinUnderQuotaShare of the judged periods, and, where
	// operations were timed, at least MinCorroborating slow operations in
	// those periods.
	MinUnderQuota      int64   `json:"min_under_quota"`
	MinUnderQuotaShare float64 `json:"min_under_quota_share"`
	MinCorroborating   int64   `json:"min_corroborating"`
	// MaxNoiseShare: when more than this share of the operations were slow
	// outside any throttled period, something else (another busy process)
	// slowed them, and the runs are too noisy to clear the kernel.
	MaxNoiseShare float64 `json:"max_noise_share"`
}

// DefaultThresholds returns the thresholds of cfsprobe check.
func DefaultThresholds() Thresholds {
	return Thresholds{
		UnderQuota: trace.UnderQuotaRatio,
		SlowFactor: 2, SlowMinNs: int64(20 * time.Millisecond),
		MinPeriods:    30,
		MinUnderQuota: 3, MinUnderQuotaShare: 0.02, MinCorroborating: 2,
		MaxNoiseShare: 0.05,
	}
}

// Result is the check's answer with its evidence. It is JSON
// (cfsprobe check --json) and holds no trace: the traces it was computed
// from are kept beside it (Check.Run, --out).
type Result struct {
	Schema  string `json:"schema"`
	Verdict string `json:"verdict"`
	// Headline is the verdict in a sentence; Summary the numbers behind it.
	Headline string `json:"headline"`
	Summary  string `json:"summary"`
	// Reasons say how the verdict was reached.
	Reasons  []string   `json:"reasons"`
	Evidence Evidence   `json:"evidence"`
	Runs     []Run      `json:"runs"`
	Host     trace.Host `json:"host"`
	Kernel   Kernel     `json:"kernel"`
	// Advice says what to do.
	Advice []string `json:"advice"`
	// Notes are what a reader should also know (version against test,
	// runs left out).
	Notes      []string   `json:"notes,omitempty"`
	Thresholds Thresholds `json:"thresholds"`
	// WallNs is how long a live check took (0 when traces were re-read).
	WallNs int64 `json:"wall_ns,omitempty"`
}

// ExitCode is the exit status cfsprobe check gives the verdict: 0 not
// affected, 1 affected, 3 inconclusive (2 is left to errors).
func (r *Result) ExitCode() int {
	switch r.Verdict {
	case NotAffected:
		return 0
	case Affected:
		return 1
	default:
		return 3
	}
}

// Evidence sums the judged runs.
type Evidence struct {
	// Runs is how many runs were judged (limited, complete, consistent).
	Runs int `json:"runs"`
	// PeriodsObserved counts the enforcement periods of the judged runs;
	// PeriodsJudged leaves out each run's warm-up.
	PeriodsObserved int64 `json:"periods_observed"`
	PeriodsJudged   int64 `json:"periods_judged"`
	// Throttled counts judged periods the kernel throttled;
	// ThrottledUnderQuota those in which the group used less than
	// Thresholds.UnderQuota of its quota.
	Throttled           int64 `json:"throttled"`
	ThrottledUnderQuota int64 `json:"throttled_under_quota"`
	// UsageOfQuota is CPU used per judged period over the quota (mean).
	UsageOfQuota float64 `json:"usage_of_quota"`
	// MaxUsageOfQuotaThrottledUnder is the most any throttled-under-quota
	// period used, as a share of the quota (0 without such periods).
	MaxUsageOfQuotaThrottledUnder float64 `json:"max_usage_of_quota_throttled_under"`
	// Operations (burns, bursts, events) timed, without each thread's
	// first (warm-up).
	Ops int64 `json:"ops"`
	// SlowOps took at least SlowFactor x their expected time and
	// SlowMinNs; SlowOpsThrottledUnder overlap a throttled-under-quota
	// period; SlowOpsUnexplained overlap no throttled period at all.
	SlowOps               int64 `json:"slow_ops"`
	SlowOpsThrottledUnder int64 `json:"slow_ops_throttled_under"`
	SlowOpsUnexplained    int64 `json:"slow_ops_unexplained"`
	// Worst is the slowest operation, P99 the run with the highest p99
	// relative to its expected time.
	Worst *OpRef `json:"worst,omitempty"`
	P99   *OpRef `json:"p99,omitempty"`
}

// OpRef is one latency figure and where it comes from.
type OpRef struct {
	Run        string `json:"run"`
	Op         string `json:"op"`
	WallNs     int64  `json:"wall_ns"`
	ExpectedNs int64  `json:"expected_ns"`
}

// Run is the evidence of one trace.
type Run struct {
	// Name is the scenario's name, or the workload's.
	Name        string `json:"name"`
	Description string `json:"description"`
	// Source is the file the trace was read from, if any.
	Source   string `json:"source,omitempty"`
	Workload string `json:"workload"`
	Threads  int    `json:"threads"`
	PeriodUs int64  `json:"period_us"`
	QuotaUs  int64  `json:"quota_us"` // 0 when unlimited
	WallNs   int64  `json:"wall_ns"`
	// Judged is false when the run could not be judged; Skipped says why.
	Judged  bool   `json:"judged"`
	Skipped string `json:"skipped,omitempty"`
	// WarmupNs: periods that start before this time, and each thread's
	// first operation, are not judged.
	WarmupNs            int64   `json:"warmup_ns"`
	Periods             int64   `json:"periods"`
	PeriodsJudged       int64   `json:"periods_judged"`
	Throttled           int64   `json:"throttled"`
	ThrottledUnderQuota int64   `json:"throttled_under_quota"`
	UsageNs             int64   `json:"usage_ns"` // in judged periods
	UsageOfQuota        float64 `json:"usage_of_quota"`
	// Op names an operation; ExpectedOpNs is its expected wall time.
	Op                    string `json:"op,omitempty"`
	ExpectedOpNs          int64  `json:"expected_op_ns,omitempty"`
	Ops                   int64  `json:"ops"`
	SlowOps               int64  `json:"slow_ops"`
	SlowOpsThrottledUnder int64  `json:"slow_ops_throttled_under"`
	SlowOpsUnexplained    int64  `json:"slow_ops_unexplained"`
	P50OpNs               int64  `json:"p50_op_ns,omitempty"`
	P99OpNs               int64  `json:"p99_op_ns,omitempty"`
	MaxOpNs               int64  `json:"max_op_ns,omitempty"`
	// MaxUsageOfQuotaThrottledUnder is the most any throttled-under-quota
	// period of the run used, as a share of the quota (over all of them,
	// not only the Incidents listed).
	MaxUsageOfQuotaThrottledUnder float64 `json:"max_usage_of_quota_throttled_under,omitempty"`
	// Incidents are the throttled-under-quota periods (the first
	// MaxIncidents of them).
	Incidents []Incident `json:"incidents,omitempty"`
}

// MaxIncidents is how many incidents a Run lists.
const MaxIncidents = 20

// Incident is a period the kernel throttled although the group used less
// than Thresholds.UnderQuota of its quota in it.
type Incident struct {
	StartNs     int64 `json:"start_ns"`
	EndNs       int64 `json:"end_ns"`
	UsageNs     int64 `json:"usage_ns"`
	ThrottledNs int64 `json:"throttled_ns"`
	// SlowOps overlapping the period, and the slowest of them.
	SlowOps   int64 `json:"slow_ops"`
	WorstOpNs int64 `json:"worst_op_ns,omitempty"`
}
