package lab

import (
	"testing"
	"time"

	"github.com/cfsprobe/cfsprobe/internal/cgroup"
	"github.com/cfsprobe/cfsprobe/internal/trace"
	"github.com/cfsprobe/cfsprobe/internal/workload"
)

// gridGroup is a group whose period timer fires at phase + k × period
// after t0 (CLOCK_MONOTONIC), using half a CPU.
type gridGroup struct{ t0, phase, period int64 }

func (g gridGroup) Stat() (cgroup.Stat, error) {
	now := workload.ClockMono() - g.t0
	var n int64
	if now >= g.phase {
		n = (now-g.phase)/g.period + 1
	}
	return cgroup.Stat{UsageNs: now / 2, NrPeriods: n}, nil
}

// Once the grid of a group's period boundaries is known, the reader
// reads just before and just after each boundary, and the timeline
// places the boundaries to within tens of µs: with its random readings
// alone (10 a period) it placed them half-way between the two closest to
// each over the run, hundreds of µs off after 20 periods.
func TestReaderPinsBoundaries(t *testing.T) {
	const period = int64(100 * time.Millisecond)
	t0 := workload.ClockMono()
	g := gridGroup{t0: t0, phase: 37_123_456, period: period}
	lim := cgroup.Limits{Period: time.Duration(period), Quota: 50 * time.Millisecond}
	smp := newSampler(g, t0, time.Duration(period/10), lim)
	st, _ := g.Stat()
	smp.add(st, 0)
	go smp.loop()
	time.Sleep(2500 * time.Millisecond)
	smp.stop()
	<-smp.stopped
	smp.mu.Lock()
	samples := append([]trace.CounterSample(nil), smp.samples...)
	smp.mu.Unlock()

	// Readings within 100 µs before and after a boundary.
	near := map[int64][2]bool{}
	for _, s := range samples {
		k := (s.T - g.phase + period/2) / period // the nearest boundary
		d := s.T - (g.phase + k*period)
		if d > -int64(100*time.Microsecond) && d < 0 {
			near[k] = [2]bool{true, near[k][1]}
		}
		if d >= 0 && d < int64(100*time.Microsecond) {
			near[k] = [2]bool{near[k][0], true}
		}
	}
	both := 0
	for _, n := range near {
		if n[0] && n[1] {
			both++
		}
	}
	// 25 boundaries in the run, the grid known after 10 or so.
	if both < 5 {
		t.Errorf("%d boundaries were read within 100µs on both sides, want 5 or more of the 25", both)
	}
	ps := trace.BuildTimeline(samples, trace.TrackerConfig{Period: lim.Period, Quota: lim.Quota, FromStart: true})
	var last trace.Period
	for _, p := range ps {
		if p.Kernel {
			last = p
		}
	}
	k := (last.EndNs - g.phase + period/2) / period
	if off := time.Duration(last.EndNs - (g.phase + k*period)); off < -150*time.Microsecond || off > 150*time.Microsecond {
		t.Errorf("the timeline placed a boundary %v from the period timer's, want within 150µs (%d readings, %d boundaries read closely on both sides)", off, len(samples), both)
	} else {
		t.Logf("the timeline placed the boundaries %v from the period timer's; %d of 25 read within 100µs on both sides", off, both)
	}
}
