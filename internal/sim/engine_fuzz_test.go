package sim

import (
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/cfsprobe/cfsprobe/internal/cgroup"
	"github.com/cfsprobe/cfsprobe/internal/trace"
)

// checkState is the engine's invariants, checked after every event: the
// pools are never negative, local runtime never exceeds a slice, and the
// kernel never counts more throttled periods than periods.
func checkState(e *engine) error {
	for l := 0; l < e.levels; l++ {
		b := &e.bw[l]
		if b.runtime < 0 {
			return fmt.Errorf("level %d: pool %d is negative", l, b.runtime)
		}
		if b.nrThrottled > b.nrPeriods {
			return fmt.Errorf("level %d: nr_throttled %d > nr_periods %d", l, b.nrThrottled, b.nrPeriods)
		}
		if b.quota == 0 {
			continue
		}
		for ci := range e.cpus {
			if r := e.cpus[ci].rq[l].remaining; r > e.slice {
				return fmt.Errorf("level %d: CPU %d holds %d, more than a slice", l, ci, r)
			}
		}
	}
	return nil
}

// fuzzCase builds a run from fuzzed numbers, each brought into the range
// the kernel allows.
func fuzzCase(eraI, cpus uint8, quotaMs, periodMs, burstMs, slice100us uint16, nthreads uint8, burnUs, sleepUs uint16, pins uint16, seed uint64) (Config, []Thread) {
	ms := time.Millisecond
	era := eras[int(eraI)%len(eras)]
	n := 1 + int(cpus)%16
	period := time.Duration(10+int(periodMs)%191) * ms
	quota := time.Duration(1+int(quotaMs)%(n*int(period/ms))) * ms
	var burst time.Duration
	if modelOf(era).burst {
		burst = time.Duration(int(burstMs)%(int(quota/ms)+1)) * ms
	}
	c := Config{
		Era:      era,
		CPUs:     n,
		Limits:   cgroup.Limits{Period: period, Quota: quota, Burst: burst},
		Slice:    time.Duration(1+int(slice100us)%100) * 100 * time.Microsecond,
		Seed:     seed,
		Duration: 20 * period,
	}
	if pins&0x4000 != 0 { // another task wakes every 1 to 20 ms
		c.Wakeups = time.Duration(1+int(burnUs)%20) * ms
	}
	if pins&0x8000 != 0 {
		c.Parent = &cgroup.Limits{Period: period, Quota: time.Duration(1+int(pins>>8)%(n*int(period/ms))) * ms}
	}
	th := []Thread{{Pin: -1, Behavior: busy{}}}
	for i := 1; i < 1+int(nthreads)%12; i++ {
		pin := -1
		if pins&(1<<(i%8)) != 0 {
			pin = i % n
		}
		th = append(th, Thread{Pin: pin, Behavior: bursty(time.Duration(1+int(burnUs))*time.Microsecond*10, time.Duration(1+int(sleepUs))*time.Microsecond*10)})
	}
	if pins&1 != 0 {
		th[0].Pin = 0
	}
	return c, th
}

// FuzzProperties checks issue 10's properties on fuzzed groups: every
// period's usage is at most quota + burst + (slice + tick) per CPU (a
// CPU starts a period with at most a slice of local runtime and is
// charged at the tick, so it can overrun by up to a tick before it is
// throttled); a lone busy thread uses its quota (or the whole period)
// in every period, within a tick; the pools are never negative;
// nr_throttled ≤ nr_periods; the same seed gives the same result.
func FuzzProperties(f *testing.F) {
	for i := range eras {
		f.Add(uint8(i), uint8(3), uint16(150), uint16(90), uint16(40), uint16(49), uint8(6), uint16(300), uint16(1500), uint16(0x0006), uint64(i))
		f.Add(uint8(i), uint8(0), uint16(34), uint16(90), uint16(0), uint16(49), uint8(0), uint16(0), uint16(0), uint16(0x0001), uint64(i))
		f.Add(uint8(i), uint8(15), uint16(20), uint16(90), uint16(20), uint16(9), uint8(11), uint16(50), uint16(5000), uint16(0x80aa), uint64(100+i))
	}
	f.Fuzz(func(t *testing.T, eraI, cpus uint8, quotaMs, periodMs, burstMs, slice100us uint16, nthreads uint8, burnUs, sleepUs uint16, pins uint16, seed uint64) {
		c, th := fuzzCase(eraI, cpus, quotaMs, periodMs, burstMs, slice100us, nthreads, burnUs, sleepUs, pins, seed)
		r, err := run(c, th, options{verify: checkState})
		if err != nil {
			t.Fatalf("%+v: %v", c, err)
		}
		q, p := c.Limits.Quota, c.Limits.Period
		ps := trace.BuildTimeline(r.Samples, trace.TrackerConfig{Period: p, Quota: q, CPUs: c.CPUs, FromStart: true})
		bound := q + c.Limits.Burst + time.Duration(c.CPUs)*(c.Slice+DefaultTick+2*time.Duration(straddle))
		for i, pd := range ps {
			if time.Duration(pd.UsageNs) > bound {
				t.Errorf("%+v: period %d used %v, more than %v", c, i, time.Duration(pd.UsageNs), bound)
			}
		}
		if len(th) == 1 && c.Parent == nil {
			checkLoneBusy(t, fmt.Sprintf("%+v", c), ps, min(q, p), p)
		}
		last := r.Samples[len(r.Samples)-1]
		if last.NrThrottled > last.NrPeriods {
			t.Errorf("%+v: nr_throttled %d > nr_periods %d", c, last.NrThrottled, last.NrPeriods)
		}
		c2, th2 := fuzzCase(eraI, cpus, quotaMs, periodMs, burstMs, slice100us, nthreads, burnUs, sleepUs, pins, seed)
		r2, err := Run(c2, th2)
		if err != nil || !reflect.DeepEqual(r, r2) {
			t.Errorf("%+v: a second run with the same seed differs (%v)", c, err)
		}
	})
}

// checkLoneBusy checks that a lone busy thread used want in every period
// once it is in its steady state (the first throttle: before it, it may
// still hold local runtime from a period it did not use up), but the
// last, within a tick: it overruns by up to a tick and pays it back in
// the next period. A thread never throttled had whole periods (period):
// a quota of the whole period, or a burst allowance it started with
// (quota + burst) and had not drained by the end (quota 151 ms of 157
// with 114 ms of burst drains 6 ms a period, for 19 periods).
func checkLoneBusy(t *testing.T, name string, ps []trace.Period, want, period time.Duration) {
	t.Helper()
	steady := len(ps)
	for i, p := range ps {
		if p.Throttled {
			steady = i + 1
			break
		}
	}
	if steady == len(ps) { // never throttled: it had whole periods
		steady, want = 1, period
	}
	for i := steady; i < len(ps)-1; i++ {
		if d := time.Duration(ps[i].UsageNs) - want; d < -DefaultTick || d > DefaultTick {
			t.Errorf("%s: a lone busy thread used %v in period %d, want %v within a tick", name, time.Duration(ps[i].UsageNs), i, want)
		}
	}
}
