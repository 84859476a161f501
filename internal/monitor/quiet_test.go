package monitor

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/cfsprobe/cfsprobe/internal/cgroup"
	"github.com/cfsprobe/cfsprobe/internal/trace"
)

// sleeper is a v1 group as the kernel counts it: it runs on one CPU from
// each burst's start until it has used its length, under a quota it never
// reaches; the period timer, on the grid phase + k × period, counts a
// boundary when the group ran in the period it ends or in the one before
// (the period after the last run finds it idle and stops), and keeps its
// grid while stopped (start_cfs_bandwidth forwards it by whole periods).
type sleeper struct {
	period, phase time.Duration
	bursts        [][2]time.Duration // start, length
}

// at is the usage and nr_periods at t.
func (s sleeper) at(t time.Duration) (usage time.Duration, periods int64) {
	ran := map[int64]bool{} // periods (ending at phase + (k+1) × period) with usage
	for _, b := range s.bursts {
		if b[0] >= t {
			continue
		}
		usage += min(b[1], t-b[0])
		for x := b[0]; x < min(b[0]+b[1], t); x += time.Millisecond / 10 {
			ran[int64((x-s.phase)/s.period)] = true
		}
	}
	for k := int64(0); s.phase+time.Duration(k+1)*s.period <= t; k++ {
		if ran[k] || ran[k-1] {
			periods++
		}
	}
	return usage, periods
}

// write puts the counters at t in dir's cpu.stat and cpuacct.usage.
func (s sleeper) write(t *testing.T, dir string, at time.Duration) {
	u, n := s.at(at)
	if err := os.WriteFile(filepath.Join(dir, "cpu.stat"), fmt.Appendf(nil, "nr_periods %d\nnr_throttled 0\nthrottled_time 0\n", n), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "cpuacct.usage"), fmt.Appendf(nil, "%d\n", u.Nanoseconds()), 0o644); err != nil {
		t.Fatal(err)
	}
}

// A group that runs a little every period for six seconds (its grid is
// pinned in that time: the readings' random intervals drift over the
// period slowly), then 10 ms
// every half second and sleeps between: once its grid is pinned, the
// sampler keeps reading it around each boundary while it sleeps (one
// file each time), and every burst comes out as one period seen closely
// with its 10 ms, where a sampler that backs off while a group sleeps
// sees the burst's period late and blurred.
func TestQuietGroupBurstsSeenClosely(t *testing.T) {
	const period = 100 * time.Millisecond
	g := sleeper{period: period, phase: 37 * time.Millisecond}
	for k := range 60 { // running: 5 ms at the start of every period
		g.bursts = append(g.bursts, [2]time.Duration{g.phase + time.Duration(k)*period + 2*time.Millisecond, 5 * time.Millisecond})
	}
	var sparse []time.Duration
	for x := 7 * time.Second; x < 16*time.Second; x += 500 * time.Millisecond {
		// 30 ms after a boundary, well inside its period.
		start := g.phase + (x-g.phase)/period*period + 30*time.Millisecond
		g.bursts = append(g.bursts, [2]time.Duration{start, 10 * time.Millisecond})
		sparse = append(sparse, start)
	}
	dir := t.TempDir()
	var now time.Duration
	g.write(t, dir, now)
	var got []trace.Period
	s := NewSampler(SamplerOptions{
		MaxGroups: 1, CPUs: 2,
		UsageBuckets: []float64{1}, DemandBuckets: []float64{1}, StallBuckets: []float64{1}, StoppedBuckets: []float64{1},
		Clock:   func() int64 { return int64(now) },
		Periods: func(_ string, p trace.Period) { got = append(got, p) },
	})
	s.Follow([]Target{{Group: Group{Path: "/sleeper", CPUDir: dir, AcctDir: dir, Version: 1}, Limits: cgroup.Limits{Period: period, Quota: 50 * time.Millisecond}}})
	defer s.close()
	// Run's schedule, on the simulated clock.
	r := rand.New(rand.NewPCG(1, 2))
	gap := int64(period / 10)
	for now < 16*time.Second {
		g.write(t, dir, now)
		next, interval := s.pass(int64(now), gap)
		planned := next
		if interval > 0 {
			gap = int64(float64(interval) * (0.8 + 0.4*r.Float64()))
			planned = int64(now) + gap
		}
		now = time.Duration(max(planned, int64(now)+int64(minPassGap)))
	}
	s.mu.Lock()
	s.groups[0].tracker.Flush(s.emitter(s.groups[0]))
	s.mu.Unlock()

	for _, start := range sparse {
		end := g.phase + ((start-g.phase)/period+1)*period
		found := false
		for _, p := range got {
			if d := p.EndNs - int64(end); d > -int64(2*time.Millisecond) && d < int64(2*time.Millisecond) {
				found = true
				if p.Blurred || p.UsageNs < int64(9900*time.Microsecond) || p.UsageNs > int64(10100*time.Microsecond) {
					t.Errorf("the burst at %v: period ending %v blurred %v, usage %v; want seen closely, 10ms", start, end, p.Blurred, time.Duration(p.UsageNs))
				}
			}
		}
		if !found {
			t.Errorf("the burst at %v: no period ends at %v", start, end)
		}
	}
}
