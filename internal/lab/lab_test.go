package lab

import (
	"strings"
	"testing"
	"time"

	"github.com/cfsprobe/cfsprobe/internal/cgroup"
	"github.com/cfsprobe/cfsprobe/internal/monitor"
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
	Finish(tr, s, 300*ms, true)
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
	Finish(tr2, s, 300*ms, true)
	if tr2.Checks[1].OK || !strings.Contains(tr2.Checks[1].Detail, "+20.00%") {
		t.Errorf("a 20%% usage mismatch passes: %+v", tr2.Checks[1])
	}
}

// Bad input is a UserError before any cgroup is touched.
func TestPrepareUserErrors(t *testing.T) {
	for _, cfg := range []Config{
		{},
		{Workload: "nosuch"},
		{Workload: "bursty", Command: []string{"true"}},
		{Command: []string{"/no/such/program"}},
		{Workload: "periodic", WorkloadArgs: []string{"--burn", "x"}},
	} {
		_, err := Prepare(cfg)
		if _, ok := err.(*UserError); !ok {
			t.Errorf("%+v: %v is not a *UserError", cfg, err)
		}
	}
}

// A group whose usage cannot be read (made in a cgroup v1 cpu hierarchy
// alone, monitor's fixture) is not recorded: its timeline would show
// every throttled period as throttled under quota.
func TestRecordRefusesUnknownUsage(t *testing.T) {
	r, err := monitor.OpenRoot("../monitor/testdata/cpu-only-v1-apart")
	if err != nil {
		t.Fatal(err)
	}
	g, err := r.GroupAt("/batch")
	if err != nil {
		t.Fatal(err)
	}
	rec, err := PrepareRecord(RecordConfig{Group: g, Duration: time.Millisecond})
	if err == nil || rec != nil || !strings.Contains(err.Error(), string(monitor.UsageNoCpuacctGroup)) || !strings.Contains(err.Error(), "/batch") {
		t.Errorf("PrepareRecord of a group without usage: %v, %v; want an error naming the group and why", rec, err)
	}
}
