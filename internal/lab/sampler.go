package lab

import (
	"math/rand/v2"
	"sync"
	"time"

	"github.com/cfsprobe/cfsprobe/internal/cgroup"
	"github.com/cfsprobe/cfsprobe/internal/trace"
	"github.com/cfsprobe/cfsprobe/internal/workload"
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

	mu      sync.Mutex
	samples []trace.CounterSample
	err     error
	done    chan struct{}
	stopped chan struct{}
	once    sync.Once
}

func newSampler(g statReader, t0 int64, interval time.Duration) *sampler {
	return &sampler{g: g, t0: t0, interval: interval, done: make(chan struct{}), stopped: make(chan struct{})}
}

func (s *sampler) add(st cgroup.Stat, t int64) {
	s.samples = append(s.samples, trace.SampleOf(t, st))
}

// sampleNow takes one reading.
func (s *sampler) sampleNow() {
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
		return
	}
	s.add(st, t)
}

// loop samples until stop. It sleeps to absolute deadlines so the
// interval does not drift, and spreads each deadline at random over
// [interval/2, 3*interval/2): readings at exact multiples of period/10
// would keep the same phase to the kernel's period timer, every boundary
// would be seen in the same window, and the timeline could place
// boundaries no closer than half an interval (5 ms at the default
// period). Spread readings see boundaries at every phase, and the phase
// estimate (trace.BuildTimeline) narrows to well under a millisecond.
func (s *sampler) loop() {
	defer close(s.stopped)
	next := time.Now()
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 0x5eed))
	for {
		next = next.Add(s.interval/2 + time.Duration(rng.Int64N(int64(s.interval))))
		d := time.Until(next)
		if d < 0 { // fell behind: skip ahead rather than burst
			next = time.Now()
			d = 0
		}
		select {
		case <-s.done:
			return
		case <-time.After(d):
		}
		s.sampleNow()
	}
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
	s.once.Do(func() { close(s.done) })
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
