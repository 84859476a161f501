package sim

import (
	"math"
	"slices"
	"testing"
	"time"

	"github.com/cfsprobe/cfsprobe/internal/cgroup"
)

// The published cases of issue 10's must-show 3 and 4.

// fibtest runs indeedeng/fibtest (runfibtest on 64 CPUs: quota 10ms per
// 100ms, 5s, one fast thread on CPU 0 and a slow one on every other CPU)
// and returns the group's CPU time and nr_throttled, as runfibtest reads
// them from cpuacct.usage and cpu.stat around the whole run: the run
// ends when the last thread has seen the end and exited.
func fibtest(t *testing.T, era Era, seed uint64) (time.Duration, int64) {
	t.Helper()
	end := 5 * time.Second
	th := []Thread{{Pin: 0, Behavior: fibFast{end: end}}}
	for i := 1; i < 64; i++ {
		th = append(th, Thread{Pin: i, Behavior: &fibSlow{end: end}})
	}
	r, err := Run(Config{Era: era, CPUs: 64, Limits: cgroup.Limits{Quota: 10 * time.Millisecond}, Seed: seed}, th)
	if err != nil {
		t.Fatal(err)
	}
	last := r.Samples[len(r.Samples)-1]
	return time.Duration(last.UsageNs), last.NrThrottled
}

// TestFibtestMatchesPublishedNumbers: fibtest's README reports, on 64
// CPUs, 88ms of CPU and 58 throttled periods on an affected kernel (4.18
// to 5.3: local runtime expires, and each slow thread's CPU strands
// min_cfs_rq_runtime every period) and 493ms and 51 on a fixed one
// (5.4). The model must come within 25% of each, on the mean of several
// seeds: the fast thread's share on 4.18 depends on where the period
// boundary falls between two ticks (after a refill it runs until its
// next tick), which the seed sets.
func TestFibtestMatchesPublishedNumbers(t *testing.T) {
	cases := []struct {
		era       Era
		cpu       time.Duration
		throttled float64
	}{
		{Era4_18, 88 * time.Millisecond, 58},
		{Era5_4, 493 * time.Millisecond, 51},
	}
	const seeds = 12
	for _, c := range cases {
		var cpu time.Duration
		var thr float64
		for s := uint64(1); s <= seeds; s++ {
			u, n := fibtest(t, c.era, s)
			cpu += u
			thr += float64(n)
		}
		cpu /= seeds
		thr /= seeds
		t.Logf("era %s: CPU %v (published %v), throttled periods %.1f (published %.0f)", c.era, cpu.Round(time.Millisecond), c.cpu, thr, c.throttled)
		if r := float64(cpu) / float64(c.cpu); r < 0.75 || r > 1.25 {
			t.Errorf("era %s: CPU %v is not within 25%% of the published %v", c.era, cpu, c.cpu)
		}
		if r := thr / c.throttled; r < 0.75 || r > 1.25 {
			t.Errorf("era %s: %.1f throttled periods are not within 25%% of the published %.0f", c.era, thr, c.throttled)
		}
	}
}

// seed000 runs seed 000's program (cfs.go: 5ms burns, 1000ms sleeps,
// quota 20ms per 100ms) on 16 CPUs and returns how long each burn took.
func seed000(t *testing.T, era Era) []time.Duration {
	t.Helper()
	p := &goProc{iterations: 60, sleep: time.Second}
	th := []Thread{
		{Pin: -1, Behavior: &goMain{p: p}},
		{Pin: -1, Behavior: &goHelper{p: p, offset: -20 * time.Microsecond, work: 10 * time.Microsecond}}, // timer
		{Pin: -1, Behavior: &goHelper{p: p, offset: 5 * time.Microsecond, work: 20 * time.Microsecond}},   // spinning M
		{Pin: -1, Behavior: &goSysmon{p: p}},
	}
	r, err := Run(Config{Era: era, CPUs: 16, Limits: cgroup.Limits{Quota: 20 * time.Millisecond}, Seed: 1, Duration: 70 * time.Second}, th)
	if err != nil {
		t.Fatal(err)
	}
	var burns []time.Duration
	for _, op := range r.Ops {
		if op.Thread == 0 {
			burns = append(burns, time.Duration(op.WallNs))
		}
	}
	if len(burns) != p.iterations {
		t.Fatalf("era %s: %d burns, want %d", era, len(burns), p.iterations)
	}
	return burns
}

// TestSeed000OverlyAggressiveCFS: seed 000 measured, on 4.14 and older
// kernels, 5ms burns that took ~100ms in most iterations though the
// program used a few percent of its quota. The 3.16 era reproduces it:
// after the idle period timer is re-armed, the group's deadline is
// stale, so every runtime update throws the local slice away and takes
// another until the pool is empty, and the group is throttled until the
// next refill; the burn then ends at a period boundary, so the next
// iteration (1000ms later) starts just after one and waits a whole
// period. 512ac999d275 (4.18) fixed it: no later era shows it.
func TestSeed000OverlyAggressiveCFS(t *testing.T) {
	for _, era := range Eras() {
		burns := seed000(t, era)
		long := 0
		for _, b := range burns {
			if b >= 90*time.Millisecond {
				long++
			}
		}
		t.Logf("era %s: %d of %d burns took 90ms or more (median %v)", era, long, len(burns), median(burns))
		if era == Era3_16 {
			if long < len(burns)/2 {
				t.Errorf("era %s: %d of %d burns took ~100ms; seed 000 saw most", era, long, len(burns))
			}
			continue
		}
		if m := slices.Max(burns); m > 10*time.Millisecond {
			t.Errorf("era %s: a burn took %v; the program uses a few percent of its quota and should never wait", era, m)
		}
	}
}

func median(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}

// quantile is the q-quantile of the operations' latencies.
func quantile(r *Result, q float64) time.Duration {
	w := make([]int64, len(r.Ops))
	for i, op := range r.Ops {
		w[i] = op.WallNs
	}
	slices.Sort(w)
	return time.Duration(w[min(len(w)-1, int(math.Ceil(q*float64(len(w))))-1)])
}

// TestBurstShortensTails is the burst patch's case (f4183717b370's cover
// letter, schbench): 30 threads serving requests of 10ms at random,
// 80% of a 100ms quota on average. Without burst, periods where more
// than the quota arrives throttle the group and requests wait for the
// next refill (long tails); with a burst of 100ms the quota left unused
// in quieter periods absorbs them.
func TestBurstShortensTails(t *testing.T) {
	tails := map[time.Duration]time.Duration{}
	slow := map[time.Duration]int{}
	for _, burst := range []time.Duration{0, 100 * time.Millisecond} {
		th := make([]Thread, 30)
		for i := range th {
			th[i] = Thread{Pin: -1, Behavior: &requests{rate: 80.0 / 30, work: 10 * time.Millisecond}}
		}
		r, err := Run(Config{Era: Era5_14, CPUs: 8, Limits: cgroup.Limits{Quota: 100 * time.Millisecond, Burst: burst}, Seed: 3, Duration: 120 * time.Second}, th)
		if err != nil {
			t.Fatal(err)
		}
		for _, op := range r.Ops {
			if op.WallNs > int64(30*time.Millisecond) {
				slow[burst]++
			}
		}
		tails[burst] = quantile(r, 0.99)
		last := r.Samples[len(r.Samples)-1]
		t.Logf("burst %v: %d requests, p50 %v p99 %v p99.9 %v, %d over 30ms; %d of %d periods throttled, %d bursts", burst, len(r.Ops),
			quantile(r, 0.5), tails[burst], quantile(r, 0.999), slow[burst], last.NrThrottled, last.NrPeriods, last.NrBursts)
	}
	if tails[0] < 30*time.Millisecond {
		t.Errorf("without burst p99 is %v; the throttled periods should make it long", tails[0])
	}
	if tails[100*time.Millisecond] > tails[0]/2 {
		t.Errorf("with burst p99 is %v, not far below %v without", tails[100*time.Millisecond], tails[0])
	}
	if slow[0] < 5*max(slow[100*time.Millisecond], 1) {
		t.Errorf("requests over 30ms: %d without burst, %d with; want far fewer with", slow[0], slow[100*time.Millisecond])
	}
}
