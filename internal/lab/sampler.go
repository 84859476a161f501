package lab

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/cfsprobe/cfsprobe/internal/alarm"
	"github.com/cfsprobe/cfsprobe/internal/cgroup"
	"github.com/cfsprobe/cfsprobe/internal/trace"
	"github.com/cfsprobe/cfsprobe/internal/workload"
	"golang.org/x/sys/unix"
)

// statReader is what the sampler needs of a group.
type statReader interface {
	Stat() (cgroup.Stat, error)
}

// sampler reads a group's counters at a fixed interval, stamping each
// reading with CLOCK_MONOTONIC relative to t0.
type sampler struct {
	g        statReader
	t0       int64
	interval time.Duration
	// avoid are the CPUs a pinned workload keeps to, which the reader
	// keeps off when it can (apart); nil: none.
	avoid *unix.CPUSet

	mu      sync.Mutex
	alarm   *alarm.Alarm // while loop runs
	samples []trace.CounterSample
	err     error
	// class is the scheduling class the reader ran in (trace.Trace's
	// ReaderClass), set at its first reading.
	class string
	// grid follows the readings of a group with a quota, for where its
	// period boundaries are (trace.Tracker.Grid): the loop reads just
	// before and just after each (focusAt). nil: no quota.
	grid *trace.Tracker
	// lates are how late the latest readings around boundaries came
	// after the time they were aimed at (focusAt, noteLate), a ring:
	// nLates of them hold one, the next goes to lateNext. lateLo and
	// lateHi are the least and the most of them but for two each.
	lates            [16]int64
	nLates, lateNext int
	lateLo, lateHi   int64
	done             chan struct{}
	stopped          chan struct{}
	once             sync.Once
}

// newSampler reads g every interval (on average) from t0; l are its
// limits, whose period boundaries it also reads around when it has a
// quota.
func newSampler(g statReader, t0 int64, interval time.Duration, l cgroup.Limits) *sampler {
	s := &sampler{g: g, t0: t0, interval: interval, done: make(chan struct{}), stopped: make(chan struct{})}
	if !l.Unlimited() {
		s.grid = trace.NewTracker(trace.TrackerConfig{Period: l.PeriodOrDefault(), Quota: l.Quota})
	}
	return s
}

func (s *sampler) add(st cgroup.Stat, t int64) {
	c := trace.SampleOf(t, st)
	s.samples = append(s.samples, c)
	if s.grid != nil {
		s.grid.Add(c, func(trace.Period) {})
	}
}

// focusStraddle is how far before and after a period boundary the
// reader reads once the grid of the boundaries is known, however widely
// (trace.Tracker.Phase).
const focusStraddle = 30 * time.Microsecond

// focusAt is when, after the newest reading, the reader reads next to
// pin the group's period boundaries down (relative to t0): focusStraddle
// before the next boundary on the grid known so far, or as far after the
// one just passed.
//
// The random readings alone put a boundary between the two closest to it
// on either side over the run, which the timeline places half-way: a
// quarter of a millisecond off after 20 periods, a tenth after 100, where
// the model of a run compared with it (sim.Plan.WithRunOf) needs it to a
// few tens of µs (a burst cut by a boundary is throttled or not by that
// much). A pair of readings that close to where the grid is believed to
// be shrinks the interval the boundary is known to lie in to 60 µs when
// it lies between them, and moves its nearer side to the middle of the
// interval when it does not: a bisection, to a few tens of µs within
// some periods.
//
// A reader wakes late, by 50 to 250 µs in a test on this host: the
// reading before a boundary is aimed earlier by what the latest such
// readings took beyond their aim at the most (but for two of 16), and
// the one after it by what they took at the least (but for two), so
// that they fall on either side of it. False: no grid yet.
func (s *sampler) focusAt() (int64, bool) {
	if s.grid == nil || len(s.samples) == 0 {
		return 0, false
	}
	last := s.samples[len(s.samples)-1].T
	st := int64(focusStraddle)
	// The boundary whose after-reading is the first still to come.
	b, ok := s.grid.BoundaryAfter(last - st)
	if !ok {
		return 0, false
	}
	if b-st > last {
		return b - st - s.lateHi, true
	}
	return b + st - s.lateLo, true
}

// noteLate records how late the newest reading, aimed at aim, came
// (focusAt).
func (s *sampler) noteLate(aim int64) {
	s.lates[s.lateNext] = max(s.samples[len(s.samples)-1].T-aim, 0)
	s.lateNext = (s.lateNext + 1) % len(s.lates)
	s.nLates = min(s.nLates+1, len(s.lates))
	l := slices.Clone(s.lates[:s.nLates])
	slices.Sort(l)
	n := len(l)
	s.lateLo, s.lateHi = l[min(2, n-1)], l[max(n-3, 0)]
}

// sampleNow takes one reading; false: it failed (the sampler's error).
func (s *sampler) sampleNow() bool {
	// Stamped with the middle of the read: the counters were read at some
	// instant between the two clocks.
	t1 := workload.ClockMono()
	st, err := s.g.Stat()
	t := (t1+workload.ClockMono())/2 - s.t0
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		if s.err == nil {
			s.err = err
		}
		return false
	}
	s.add(st, t)
	return true
}

// loop samples until stop. It sleeps to absolute deadlines so the
// interval does not drift, and spreads each deadline at random over
// [interval/2, 3*interval/2): readings at exact multiples of period/10
// would keep the same phase to the kernel's period timer, every boundary
// would be seen in the same window, and the timeline could place
// boundaries no closer than half an interval (5 ms at the default
// period). Spread readings see boundaries at every phase, and the phase
// estimate (trace.BuildTimeline) narrows to well under a millisecond.
//
// It waits on an alarm (internal/alarm), which wakes one thread of
// cfsprobe's where a runtime timer woke five or six, each a context
// switch on a CPU that the measured group's threads may be running on
// (docs/design.md, "The lab's reader"); from its first reading on,
// cfsprobe's threads are in the real-time class (realtime), until loop
// returns. An alarm that cannot be made (out of descriptors) is the
// sampler's error.
func (s *sampler) loop() {
	defer close(s.stopped)
	a, err := alarm.New()
	s.mu.Lock()
	if err != nil {
		s.err = cmp.Or(s.err, fmt.Errorf("wait for the next reading: %w", err))
		s.mu.Unlock()
		return
	}
	s.alarm = a
	s.mu.Unlock()
	defer func() {
		// stop rings the alarm while loop runs, not once it is closed.
		s.mu.Lock()
		s.alarm = nil
		s.mu.Unlock()
		a.Close()
	}()
	next := time.Now()
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 0x5eed))
	var restore func() // the reader's threads back in their class
	defer func() {
		if restore != nil {
			restore()
		}
	}()
	drawn := false // next is the coming regular reading's
	for {
		if !drawn {
			next = next.Add(s.interval/2 + time.Duration(rng.Int64N(int64(s.interval))))
			drawn = true
		}
		d := time.Until(next)
		if d < 0 { // fell behind: skip ahead rather than burst
			next = time.Now()
			d = 0
		}
		// A reading around a boundary comes first when it is due first;
		// the regular one is still to come after it.
		focused, aim := false, int64(0)
		s.mu.Lock()
		if at, ok := s.focusAt(); ok {
			if f := time.Duration(s.t0 + at - workload.ClockMono()); f < d {
				d, focused, aim = max(f, 0), true, at
			}
		}
		s.mu.Unlock()
		if !focused {
			drawn = false
		}
		// Set under the lock, after a look at done: stop rings the
		// alarm under it.
		s.mu.Lock()
		select {
		case <-s.done:
			s.mu.Unlock()
			return
		default:
		}
		a.Set(d)
		s.mu.Unlock()
		if err := a.Wait(); err != nil {
			return // (a timerfd's read does not fail)
		}
		select {
		case <-s.done:
			return
		default:
		}
		if restore == nil {
			// At the first reading: by then the runtime has the threads
			// it waits on (realtime, apart).
			restore = s.place()
		}
		if s.sampleNow() && focused {
			s.mu.Lock()
			s.noteLate(aim)
			s.mu.Unlock()
		}
	}
}

// place puts the reader's threads where it reads from: apart from a
// pinned workload when there is a CPU for them, else in the real-time
// class, else (refused) where they are; it records which (class) and
// returns what undoes it.
func (s *sampler) place() (restore func()) {
	class := trace.ReaderFair
	if set, all, ok := offCPUs(s.avoid); ok {
		if r, err := apart(set, all); err == nil {
			restore, class = r, trace.ReaderApart
		}
	}
	if restore == nil {
		var err error
		if restore, err = realtime(); err == nil {
			class = trace.ReaderRealtime
		}
	}
	s.mu.Lock()
	s.class = class
	s.mu.Unlock()
	return restore
}

// waitPeriodChange keeps sampling until nr_periods moves past its value
// at the last sample, or the timeout passes.
func (s *sampler) waitPeriodChange(timeout time.Duration) {
	s.mu.Lock()
	if len(s.samples) == 0 {
		s.mu.Unlock()
		return
	}
	base := s.samples[len(s.samples)-1].NrPeriods
	s.mu.Unlock()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		time.Sleep(s.interval / 2)
		s.mu.Lock()
		last := s.samples[len(s.samples)-1].NrPeriods
		s.mu.Unlock()
		if last > base {
			return
		}
	}
}

func (s *sampler) stop() {
	s.once.Do(func() {
		s.mu.Lock()
		close(s.done)
		if s.alarm != nil {
			s.alarm.Set(0)
		}
		s.mu.Unlock()
	})
	<-s.stopped
	s.mu.Lock()
	defer s.mu.Unlock()
	// Samples are appended in order by one goroutine at a time, except the
	// explicit sampleNow; keep them sorted by time.
	for i := 1; i < len(s.samples); i++ {
		for j := i; j > 0 && s.samples[j].T < s.samples[j-1].T; j-- {
			s.samples[j], s.samples[j-1] = s.samples[j-1], s.samples[j]
		}
	}
}
