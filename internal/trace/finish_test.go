package trace_test

import (
	"strings"
	"testing"
	"time"

	"github.com/cfsprobe/cfsprobe/internal/cgroup"
	"github.com/cfsprobe/cfsprobe/internal/trace"
)

// Finish computes the summary as the kernel counters' deltas and checks
// the timeline and the usage against getrusage.
func TestFinish(t *testing.T) {
	tr := &trace.Trace{Limits: trace.LimitsOf(cgroup.Limits{Period: 100 * time.Millisecond, Quota: 20 * time.Millisecond}), Spec: trace.Spec{Workload: "bursty"},
		Process: trace.Process{RusageNs: 60e6}}
	const ms = int64(1e6)
	var s []trace.CounterSample
	for i := int64(0); i <= 30; i++ {
		t := i * 10 * ms
		p := (t + 5*ms) / (100 * ms)
		s = append(s, trace.CounterSample{T: t, UsageNs: min(t/5, 60*ms), NrPeriods: 7 + p, NrThrottled: 3 + p, ThrottledNs: p * 50 * ms})
	}
	trace.Finish(tr, s, 300*ms, true)
	sum := tr.Summary
	if sum.NrPeriods != 3 || sum.NrThrottled != 3 || sum.ThrottledNs != 150*ms || sum.UsageNs != 60*ms {
		t.Errorf("summary %+v", sum)
	}
	if sum.ThrottledRatio != 1 || sum.CPURatio != 0.2 || sum.TimelineThrottled != 3 {
		t.Errorf("ratios %+v", sum)
	}
	if len(tr.Checks) != 2 || !tr.Checks[0].OK || !tr.Checks[1].OK {
		t.Errorf("checks %+v", tr.Checks)
	}
	tr2 := &trace.Trace{Limits: tr.Limits, Spec: tr.Spec, Process: trace.Process{RusageNs: 50e6}}
	trace.Finish(tr2, s, 300*ms, true)
	if tr2.Checks[1].OK || !strings.Contains(tr2.Checks[1].Detail, "+20.00%") {
		t.Errorf("a 20%% usage mismatch passes: %+v", tr2.Checks[1])
	}
}
