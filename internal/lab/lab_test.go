package lab

import (
	"strings"
	"testing"
	"time"

	"github.com/cfsprobe/cfsprobe/internal/monitor"
)

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
