package sim

import (
	"testing"
	"time"

	"github.com/cfsprobe/cfsprobe/internal/cgroup"
	"github.com/cfsprobe/cfsprobe/internal/trace"
)

// replayBenchTrace is a lab run of 1,011 periods on the reference host
// (cfsprobe run --quota 60ms bursty --threads 2 --on-cpu 70ms --off 110ms
// --jitter 60ms --duration 101s; 46 % of its periods throttled), its
// per-operation samples left out.
const replayBenchTrace = "testdata/replay/lab-bursty-2-threads-0.6cpu-1011-periods.json"

// candidateLimits are 20 quotas a user might weigh for a group: 0.1 to
// 2 CPUs in steps of 0.1, per 100 ms period.
func candidateLimits() []cgroup.Limits {
	out := make([]cgroup.Limits, 20)
	for i := range out {
		out[i] = cgroup.Limits{Period: 100 * time.Millisecond, Quota: time.Duration(i+1) * 10 * time.Millisecond}
	}
	return out
}

// replayCandidates replays the trace in file under every limit as
// cfsprobe simulate replay does (the trace read, its demand
// reconstructed, simulated to the close of its last period, written as a
// trace), and returns the simulated traces.
func replayCandidates(tb testing.TB, file string, cpus int, limits []cgroup.Limits) []*trace.Trace {
	out := make([]*trace.Trace, len(limits))
	for i, lim := range limits {
		p, err := Prepare(Setup{Workload: "replay", Args: []string{"--trace", file}, Limits: lim, Era: Era6_18, CPUs: cpus, Seed: 1})
		if err != nil {
			tb.Fatal(err)
		}
		if out[i], err = p.Run(); err != nil {
			tb.Fatal(err)
		}
	}
	return out
}

// Must-show 6 (replay's half): a 1,000-period recorded trace replayed
// under 20 candidate limits in under 5 s in all. s_per_20 is the wall
// clock's time for the 20, s_per_20_cpu the process's CPU time (on a busy
// host the wall clock also counts the time other processes had the CPU).
// bench/run.sh sim records it.
func BenchmarkReplay20Limits(b *testing.B) {
	tr, err := trace.ReadFile(replayBenchTrace)
	if err != nil {
		b.Fatal(err)
	}
	limits := candidateLimits()
	cpu0 := cpuTime()
	for b.Loop() {
		replayCandidates(b, replayBenchTrace, tr.Host.CPUs, limits)
	}
	b.ReportMetric(b.Elapsed().Seconds()/float64(b.N), "s_per_20")
	b.ReportMetric((cpuTime()-cpu0).Seconds()/float64(b.N), "s_per_20_cpu")
	b.ReportMetric(float64(len(tr.Periods)), "periods")
}
