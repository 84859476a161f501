package sim

import (
	"fmt"
	"sync"
	"time"

	"github.com/cfsprobe/cfsprobe/internal/trace"
	"github.com/cfsprobe/cfsprobe/internal/workload"
)

// EventQuantiles are the probabilities at which an EventSpread gives the
// time of one event of the parallel workload.
var EventQuantiles = [...]float64{0, 0.10, 0.25, 0.50, 0.75, 0.90, 0.95, 0.99, 0.999, 1}

// EventSpread is how the CPU time of the parallel workload's events
// spreads: their time at each of EventQuantiles, increasing. An event's
// time is drawn from it, linear between two quantiles. The zero spread
// is none: every event costs Costs.Event.
//
// The same event is not always as fast. Timed alone, one thread outside
// any group (workload.EventCPU), the engine's events of the default
// --max-prime took 2.75 to 5.3 ms in the qemu guest, 2.9 ms at the median
// and 3.7 to 5.2 at the 99th percentile (three runs, 2026-11-28: the
// emulator translating code, and the host stopping a vCPU); a run of one
// thread under a 1-CPU quota, which it does not exceed, showed the same
// (p99 3.5 to 5.3 ms). A model whose events all took their mean CPU time
// put that run's p99 at its median. On this host events vary by a few
// per cent, and a few are stretched by what else ran on their CPU: a
// model that charges those as CPU time charges the group a little more
// than the kernel did, so the spread is scaled to the events' mean CPU
// time (its mean is Costs.Event).
type EventSpread [len(EventQuantiles)]time.Duration

// draw is the time of the event at quantile u (0 ≤ u < 1).
func (s EventSpread) draw(u float64) time.Duration {
	for i := 1; i < len(EventQuantiles); i++ {
		if p := EventQuantiles[i]; u < p || i == len(EventQuantiles)-1 {
			p0 := EventQuantiles[i-1]
			f := min(max((u-p0)/(p-p0), 0), 1)
			return s[i-1] + time.Duration(f*float64(s[i]-s[i-1]))
		}
	}
	return s[len(s)-1]
}

// Mean is the mean time of an event drawn from the spread.
func (s EventSpread) Mean() time.Duration {
	var m float64
	for i := 1; i < len(EventQuantiles); i++ {
		m += (EventQuantiles[i] - EventQuantiles[i-1]) * float64(s[i-1]+s[i]) / 2
	}
	return time.Duration(m)
}

// Zero says that there is no spread: every event takes the same time.
func (s EventSpread) Zero() bool { return s == EventSpread{} }

// Check says what is wrong with a spread that is not zero: each time
// positive, none below the one before.
func (s EventSpread) Check() error {
	if s.Zero() {
		return nil
	}
	for i, d := range s {
		if d <= 0 || i > 0 && d < s[i-1] {
			return fmt.Errorf("an event's CPU time at quantiles %v must be positive and increasing, not %v", EventQuantiles, s[:])
		}
	}
	return nil
}

// Trace is the spread as spec.simulated records it (nil: none).
func (s EventSpread) Trace() []trace.QuantileNs {
	if s.Zero() {
		return nil
	}
	q := make([]trace.QuantileNs, len(s))
	for i, d := range s {
		q[i] = trace.QuantileNs{P: EventQuantiles[i], Ns: int64(d)}
	}
	return q
}

// spreadOf is the spread of events timed (a histogram of their times)
// scaled to a mean of mean: their CPU time.
func spreadOf(mean time.Duration, times *trace.Latency) (EventSpread, error) {
	var s EventSpread
	h, err := times.Histogram()
	if err != nil {
		return s, err
	}
	if h.TotalCount() == 0 {
		return s, fmt.Errorf("no event was timed")
	}
	for i, p := range EventQuantiles {
		s[i] = time.Duration(h.ValueAtQuantile(100 * p))
	}
	s[0] = time.Duration(h.Min())
	m := s.Mean()
	if m <= 0 {
		return EventSpread{}, fmt.Errorf("events timed at %v", s[:])
	}
	k := float64(mean) / float64(m)
	for i := range s {
		s[i] = max(time.Duration(k*float64(s[i])), time.Nanosecond)
	}
	return s, s.Check()
}

// calibrations holds an event's cost by --max-prime, measured once per
// process (workload.EventCPU).
var calibrations sync.Map // int -> *calibration

type calibration struct {
	once   sync.Once
	spread EventSpread
	err    error
}

// calibrated is how the time of one event of --max-prime spreads on
// this host; its mean is the events' mean CPU time, to a few ns.
func calibrated(maxPrime int) (EventSpread, error) {
	v, _ := calibrations.LoadOrStore(maxPrime, &calibration{})
	c := v.(*calibration)
	c.once.Do(func() {
		mean, times, err := workload.EventCPU(maxPrime)
		if c.err = err; err == nil {
			c.spread, c.err = spreadOf(mean, times)
		}
	})
	return c.spread, c.err
}
