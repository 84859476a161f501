package sim

import (
	"testing"
	"time"

	"github.com/cfsprobe/cfsprobe/internal/cgroup"
)

// benchConfig is the speed case of issue 10: 64 threads of a bursty
// program on 16 CPUs under a quota of 8 CPUs, for 60 simulated seconds.
func benchConfig() (Config, []Thread) {
	th := make([]Thread, 64)
	for i := range th {
		th[i] = Thread{Pin: -1, Behavior: &bursty{burn: 5 * time.Millisecond, sleep: 20 * time.Millisecond}}
	}
	return Config{Era: Era5_14, CPUs: 16, Limits: cgroup.Limits{Quota: 800 * time.Millisecond}, Duration: 60 * time.Second, Seed: 1}, th
}

// BenchmarkSim16x64 reports how many times faster than real time the
// engine simulates the speed case (x_realtime); issue 10 asks for 1000.
func BenchmarkSim16x64(b *testing.B) {
	var r *Result
	for b.Loop() {
		cfg, th := benchConfig()
		var err error
		if r, err = Run(cfg, th); err != nil {
			b.Fatal(err)
		}
	}
	per := b.Elapsed().Seconds() / float64(b.N)
	b.ReportMetric(60/per, "x_realtime")
	b.ReportMetric(float64(len(r.Ops)), "ops")
}
