package trace

import (
	"testing"
	"time"
)

func TestPeriodDemand(t *testing.T) {
	ms := int64(time.Millisecond)
	cases := []struct {
		name    string
		p       Period
		maxCPUs float64
		want    time.Duration
	}{
		{"not throttled: the usage", Period{EndNs: 100 * ms, UsageNs: 30 * ms}, 0, 30 * time.Millisecond},
		// 4 CPUs ran 12.5 ms each (50 ms of quota), then stood still 87.5 ms.
		{"throttled on 4 CPUs", Period{EndNs: 100 * ms, UsageNs: 50 * ms, Throttled: true, StallNs: 87500000, StoppedCPUs: 4}, 0, 400 * time.Millisecond},
		// Busy all along on at most 2 CPUs: 2 CPUs all period.
		{"at most the CPUs the group can use", Period{EndNs: 100 * ms, UsageNs: 50 * ms, Throttled: true, StallNs: 87500000, StoppedCPUs: 4}, 2, 200 * time.Millisecond},
		// 1.05 running CPUs is one CPU read a little late: busy all along
		// on one.
		{"running CPUs a little above a whole number", Period{EndNs: 100 * ms, UsageNs: 52500000, Throttled: true, StallNs: 50 * ms, StoppedCPUs: 1}, 0, 100 * time.Millisecond},
		// 0.2 CPUs running of the 2 stopped: it paused, but the 2 stopped
		// CPUs had runnable threads for the stall.
		{"not busy all along", Period{EndNs: 100 * ms, UsageNs: 10 * ms, Throttled: true, StallNs: 50 * ms, StoppedCPUs: 2}, 0, 10*time.Millisecond + 100*time.Millisecond},
		// Written before stall_ns: throttled_ns over the stopped CPUs.
		// (80 ms on 2 CPUs; it ran 1 CPU for 20 ms: busy all along on 2.)
		{"old trace: stall from the throttled time", Period{EndNs: 100 * ms, UsageNs: 20 * ms, Throttled: true, ThrottledNs: 160 * ms, StoppedCPUs: 2}, 0, 200 * time.Millisecond},
		{"old trace without stopped CPUs: one", Period{EndNs: 100 * ms, UsageNs: 20 * ms, Throttled: true, ThrottledNs: 80 * ms}, 0, 100 * time.Millisecond},
		// One thread: 2.7 ms of running with 5 ms of usage (a boundary's
		// usage counted in this period) is not 1.85 CPUs; with its running
		// time read 2 ms long it is at most one, busy all along.
		{"a boundary's usage in the wrong period", Period{EndNs: 50 * ms, UsageNs: 5 * ms, Throttled: true, StallNs: 47300000, StoppedCPUs: 1}, 0, 50 * time.Millisecond},
		// 36 ms used in 16 ms of running: at least 2 CPUs (36 ms in 18),
		// where the kernel stopped one.
		{"ran on more CPUs than were stopped", Period{EndNs: 100 * ms, UsageNs: 36 * ms, Throttled: true, StallNs: 84 * ms, StoppedCPUs: 1}, 0, 200 * time.Millisecond},
		// A whole-period stall keeps 1 % of running, as Stall says.
		{"stood still all period", Period{EndNs: 100 * ms, UsageNs: 1 * ms, Throttled: true, StallNs: 100 * ms, StoppedCPUs: 1}, 0, 1*time.Millisecond + 99*time.Millisecond},
		{"no length", Period{StartNs: 5, EndNs: 5, UsageNs: 3}, 0, 3},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := c.p.Demand(c.maxCPUs); got != c.want {
				t.Errorf("Demand(%v) = %v, want %v", c.maxCPUs, got, c.want)
			}
		})
	}
	p := Period{StartNs: 100 * ms, EndNs: 200 * ms, UsageNs: 50 * ms, Throttled: true, StallNs: 87500000, StoppedCPUs: 4}
	if got := p.DemandCPUs(0); got != 4 {
		t.Errorf("DemandCPUs = %v, want 4", got)
	}
}
