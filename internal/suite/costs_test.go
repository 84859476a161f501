package suite

import (
	"context"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/cfsprobe/cfsprobe/internal/cgroup"
	"github.com/cfsprobe/cfsprobe/internal/lab"
	"github.com/cfsprobe/cfsprobe/internal/sim"
	"github.com/cfsprobe/cfsprobe/internal/testenv"
	"github.com/cfsprobe/cfsprobe/internal/trace"
)

// MeasureCosts on real cgroups: a wake-up, positive and within what
// machines of this kind take (on this 2-CPU VM about 25 µs; the qemu
// guest up to eight times as much); a wake-up from a second's sleep costs
// more than from a millisecond's.
func TestMeasureCosts(t *testing.T) {
	l := testenv.NeedCgroups(t)
	parent := testenv.ParentName("suitecosts")
	t.Cleanup(func() { testenv.NoLeftovers(t, l, parent) })
	c, err := MeasureCosts(context.Background(), lab.Config{Parent: parent, Stdout: os.Stderr, Stderr: os.Stderr})
	if err != nil {
		t.Fatal(err)
	}
	interpolated := sim.Costs{Wake: c.Wake, WakeLong: c.WakeLong}.WakeAfter(sim.MidSleep)
	t.Logf("a thread's own %v, wake-up %v after %v of sleep, %v after %v (%v interpolated), %v after %v; a sleep %v late; a throttled thread resumed %v after the refill",
		c.Thread, c.Wake, sim.ShortSleep, c.WakeMid, sim.MidSleep, interpolated, c.WakeLong, sim.LongSleep, c.SleepLate, c.ResumeLate)
	// An idle CPU woken by the refill: tens of µs here, a few tenths of
	// a millisecond under emulation; never near a period.
	if c.ResumeLate <= 0 || c.ResumeLate > 3*time.Millisecond {
		t.Errorf("a throttled thread resumed %v after the refill, want more than nothing and at most 3ms", c.ResumeLate)
	}
	// The timer's slack (50 µs) and the wake-up: about 100 µs here, and
	// some 300 µs under emulation.
	if c.SleepLate < 20*time.Microsecond || c.SleepLate > 2*time.Millisecond {
		t.Errorf("a sleep %v late, want 20µs to 2ms", c.SleepLate)
	}
	if c.Thread < 0 || c.Thread > 5*time.Millisecond {
		t.Errorf("a thread's own cost %v, want 0 to 5ms", c.Thread)
	}
	if c.Wake <= time.Nanosecond || c.Wake > 2*time.Millisecond {
		t.Errorf("wake-up %v, want more than nothing and at most 2ms", c.Wake)
	}
	// A thread that slept a second wakes to cold caches: two to four
	// times the short sleep's cost on this host and under emulation.
	if c.WakeLong <= c.Wake || c.WakeLong > 5*time.Millisecond {
		t.Errorf("wake-up after %v of sleep %v, after %v %v: want more after the long sleep, and at most 5ms", sim.ShortSleep, c.Wake, sim.LongSleep, c.WakeLong)
	}
}

// A throttled burn's resumption is its end less half a burn, against
// the nearest boundary of the grid of the trace's kernel periods: after
// it or, where the timeline placed the boundary late, before it.
func TestResumesOf(t *testing.T) {
	const ms = int64(time.Millisecond)
	us := func(v int64) int64 { return v * int64(time.Microsecond) }
	tr := &trace.Trace{
		Limits: trace.LimitsOf(cgroup.Limits{Period: 100 * time.Millisecond, Quota: 5 * time.Millisecond}),
		// An unlimited window first (not on the grid), then the kernel's periods.
		Periods: []trace.Period{{StartNs: -3 * ms, EndNs: 1 * ms}, {StartNs: 7 * ms, EndNs: 107 * ms, Kernel: true}, {StartNs: 107 * ms, EndNs: 207 * ms, Kernel: true}},
		Latency: &trace.Latency{Samples: []trace.Sample{
			{StartNs: 0, WallNs: us(50)},                                   // not stopped
			{StartNs: 20 * ms, WallNs: 107*ms - 20*ms + us(30) + us(25)},   // resumed 30µs after 107ms
			{StartNs: 200 * ms, WallNs: 407*ms - 200*ms - us(20) + us(25)}, // 20µs before 407ms
		}},
	}
	got := resumesOf(tr, us(50))
	want := []time.Duration{30 * time.Microsecond, -20 * time.Microsecond}
	if !slices.Equal(got, want) {
		t.Errorf("resumes %v, want %v", got, want)
	}
	tr.Latency = nil
	if got := resumesOf(tr, us(50)); got != nil {
		t.Errorf("without operations: %v, want none", got)
	}
}

// A wake-up from a long sleep is what the process used where it woke:
// periods next to each other taken together, the start's and the exit's
// left out.
func TestWakeUsage(t *testing.T) {
	periods := func(usage ...int64) *trace.Trace {
		tr := &trace.Trace{}
		for _, u := range usage {
			tr.Periods = append(tr.Periods, trace.Period{UsageNs: u})
		}
		return tr
	}
	us := func(v ...int64) []time.Duration {
		var d []time.Duration
		for _, x := range v {
			d = append(d, time.Duration(x)*time.Microsecond)
		}
		return d
	}
	for _, tc := range []struct {
		usage []int64 // µs per period
		want  []time.Duration
	}{
		{[]int64{500, 0, 0, 60, 0, 0, 9, 51, 0, 0, 80, 0, 400}, us(60, 60, 80)},
		{[]int64{500, 0, 60, 0, 400}, us(60)},
		{[]int64{500, 0, 400}, nil},         // no wake-up between start and exit
		{[]int64{500, 60, 60, 400}, nil},    // never quiet: one burst
		{[]int64{0, 500, 0, 70, 0, 0}, nil}, // the exit's period is the wake-up's
	} {
		tr := periods(tc.usage...)
		for i := range tr.Periods {
			tr.Periods[i].UsageNs *= 1000
		}
		if got := wakeUsage(tr); !slices.Equal(got, tc.want) {
			t.Errorf("%v: %v, want %v", tc.usage, got, tc.want)
		}
	}
}
