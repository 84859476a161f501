package main

import (
	"reflect"
	"strings"
	"testing"
)

// replayFixture is a lab run of 1,011 periods (internal/sim's replay
// benchmark's): two threads of 70 ms CPU bursts under 0.6 CPU.
const replayFixture = "../../internal/sim/testdata/replay/lab-bursty-2-threads-0.6cpu-1011-periods.json"

// cfsprobe simulate replay writes a simulated trace of the fixture's
// demand under the limits given, and records in spec.simulated.replay
// where the demand came from and how; the same seed gives the same trace;
// --help teaches the flags.
func TestSimulateReplay(t *testing.T) {
	args := []string{"--kernel", "6.18", "--host-cpus", "2", "--cpus", "1", "replay", "--trace", replayFixture}
	tr := simulateTrace(t, args...)
	rep := tr.Spec.Simulated.Replay
	if tr.Spec.Workload != "replay" || rep == nil {
		t.Fatalf("spec %+v: want the replay workload with spec.simulated.replay", tr.Spec)
	}
	if rep.Source != replayFixture || rep.Workload != "bursty" || rep.Periods != 1011 || rep.Demand != "closed" || rep.DemandFrom != "params" ||
		rep.Parallelism != 2 || rep.ParallelismFrom != "params" || rep.Scale != 1 || rep.DemandNs != rep.UsageNs || *rep.Limits.QuotaUs != 60000 {
		t.Errorf("spec.simulated.replay %+v", rep)
	}
	// The source used 49 s of CPU; the replay asks for all of it (a
	// closed loop only delays), and under a whole CPU it fits in fewer
	// periods, fewer throttled than the source's 46 %.
	s := tr.Summary
	if d := float64(s.UsageNs-rep.UsageNs) / float64(rep.UsageNs); d < -0.01 || d > 0.01 {
		t.Errorf("the replay used %d ns of CPU, the source %d", s.UsageNs, rep.UsageNs)
	}
	if s.NrPeriods < 500 || s.ThrottledRatio > 0.3 || !tr.Checks[0].OK {
		t.Errorf("summary %+v, checks %+v", s, tr.Checks)
	}

	if again := simulateTrace(t, args...); !reflect.DeepEqual(again.Periods, tr.Periods) {
		t.Error("the same seed gave other periods")
	}
	// The trace as the argument is the trace as --trace.
	positional := append(append([]string{}, args[:len(args)-2]...), replayFixture)
	if again := simulateTrace(t, positional...); !reflect.DeepEqual(again.Periods, tr.Periods) {
		t.Error("replay FILE gave other periods than replay --trace FILE")
	}

	scaled := simulateTrace(t, append(args, "--scale", "1.5", "--demand", "open")...).Spec.Simulated.Replay
	if scaled.Scale != 1.5 || scaled.Demand != "open" || scaled.DemandFrom != "given" || scaled.DemandNs <= scaled.UsageNs*3/2 {
		t.Errorf("--scale 1.5 --demand open: %+v; want the open backlog on top of 1.5 times the usage", scaled)
	}

	r := cfsprobe(t, "simulate", "replay", "--help")
	if r.code != 0 || !strings.Contains(r.stdout, "--demand") || !strings.Contains(r.stdout, "cfsprobe simulate --cpus 0.5 replay tight.json") {
		t.Errorf("replay --help: exit %d\n%s", r.code, r.stdout)
	}
}
