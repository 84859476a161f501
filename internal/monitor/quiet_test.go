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

// sample follows the group with a Sampler, on a simulated clock that
// passes as Run's schedule says (each reading instant) until the end,
// and returns the periods it handed out.
func (s sleeper) sample(t *testing.T, end time.Duration) []trace.Period {
	t.Helper()
	return sampleSimulated(t, func(dir string, at time.Duration) { s.write(t, dir, at) }, cgroup.Limits{Period: s.period, Quota: s.period / 2}, end)
}

// sampleSimulated follows a v1 group whose counter files write puts in
// dir as they are at a moment, under limits, with a Sampler on a
// simulated clock that passes as Run's schedule says (each reading
// instant) until the end, and returns the periods it handed out.
func sampleSimulated(t *testing.T, write func(dir string, at time.Duration), limits cgroup.Limits, end time.Duration) []trace.Period {
	t.Helper()
	dir := t.TempDir()
	var now time.Duration
	write(dir, now)
	var got []trace.Period
	sm := NewSampler(SamplerOptions{
		MaxGroups: 1, CPUs: 2,
		UsageBuckets: []float64{1}, DemandBuckets: []float64{1}, StallBuckets: []float64{1}, StoppedBuckets: []float64{1},
		Clock:   func() int64 { return int64(now) },
		Periods: func(_ string, p trace.Period) { got = append(got, p) },
	})
	sm.Follow([]Target{{Group: Group{Path: "/simulated", CPUDir: dir, AcctDir: dir, Version: 1}, Limits: limits}})
	defer sm.close()
	r := rand.New(rand.NewPCG(1, 2))
	gap := int64(limits.Period / 10)
	for now < end {
		write(dir, now)
		var planned int64
		planned, gap = sm.pass(int64(now), gap).schedule(int64(now), gap, r.Float64())
		now = time.Duration(planned)
	}
	sm.mu.Lock()
	sm.groups[0].tracker.Flush(sm.emitter(sm.groups[0]))
	sm.mu.Unlock()
	return got
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
	got := g.sample(t, 16*time.Second)

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

// A group that only ever runs in bursts of 40 ms every 2 s (a period or
// two each, the fleet test's b4 groups): it is read every period while
// it sleeps, so that a burst wakes it within a period and the rest of
// the burst's boundaries are read closely, until its grid is pinned;
// from then on every burst is seen closely. A sampler that backs off to
// a reading a second while such a group sleeps wakes after most bursts
// have ended, and never pins it (every period blurred, as on a
// clean-clone CI run). The usage at a boundary is interpolated between
// the readings around it, the one before up to a fifth of a period
// early, so a burst that ends in that time is seen partly in the period
// after it (at most what it used after the reading).
func TestSparseGroupPinned(t *testing.T) {
	const period = 100 * time.Millisecond
	g := sleeper{period: period, phase: 37 * time.Millisecond}
	for x := 500 * time.Millisecond; x < 60*time.Second; x += 2003 * time.Millisecond {
		g.bursts = append(g.bursts, [2]time.Duration{x, 40 * time.Millisecond})
	}
	got := g.sample(t, 60*time.Second)
	closely := 0
	for _, b := range g.bursts {
		if b[0] < 30*time.Second || b[0]+b[1] > 59*time.Second {
			continue
		}
		var in, after time.Duration // in the periods it ran in; in the one after
		blurred := false
		for _, p := range got {
			switch {
			case p.EndNs > int64(b[0]) && p.StartNs < int64(b[0]+b[1]):
				in += time.Duration(p.UsageNs)
			case p.StartNs >= int64(b[0]+b[1]) && p.StartNs < int64(b[0]+b[1]+period):
				after += time.Duration(p.UsageNs)
			default:
				continue
			}
			blurred = blurred || p.Blurred
		}
		if blurred || in < 32*time.Millisecond || in+after < 39800*time.Microsecond || in+after > 40200*time.Microsecond {
			t.Errorf("the burst at %v: blurred %v, %v used in its periods and %v in the one after; want seen closely, 40ms", b[0], blurred, in, after)
			continue
		}
		closely++
	}
	if closely < 14 {
		t.Errorf("%d bursts seen closely after 30 s, want 14", closely)
	}
}
