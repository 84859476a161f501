package sim

import (
	"math/rand/v2"
	"time"
)

// The programs the engine's tests run. The built-in workloads as
// simulated threads are workload.go's; these are small programs that
// exercise one behaviour each, and the programs of the published cases
// (fibtest, seed 000, schbench).

// busy burns CPU for ever, in chunks.
type busy struct{}

func (busy) Next(time.Duration, *rand.Rand) Step { return Step{Kind: Burn, CPU: time.Second} }

// cycle repeats: burn cpu (one operation), then sleep; with random, each
// burn and each sleep is drawn from an exponential distribution of that
// mean (a bursty program).
type cycle struct {
	cpu, sleep time.Duration
	random     bool
	polls      bool // its burns poll its CPU clock (Step.Polls)
	sleeping   bool
}

func (c *cycle) Next(now time.Duration, rng *rand.Rand) Step {
	c.sleeping = !c.sleeping
	d := c.sleep
	if c.sleeping {
		d = c.cpu
	}
	if c.random {
		d = time.Duration(rng.ExpFloat64()*float64(d)) + time.Microsecond // never a burn of nothing
	}
	if c.sleeping {
		return Step{Kind: Burn, CPU: d, OpStart: true, OpEnd: true, Polls: c.polls}
	}
	return Step{Kind: Sleep, Until: now + d}
}

// bursty is cycle at random.
func bursty(burn, sleep time.Duration) *cycle { return &cycle{cpu: burn, sleep: sleep, random: true} }

// fibFast is fibtest's fast thread (indeedeng/fibtest, fibtest.c): a
// million Fibonacci iterations (about a millisecond) between checks of
// the clock, until the end.
type fibFast struct{ end time.Duration }

func (f fibFast) Next(now time.Duration, _ *rand.Rand) Step {
	if now >= f.end {
		return Step{Kind: Exit}
	}
	return Step{Kind: Burn, CPU: time.Millisecond}
}

// fibSlow is fibtest's slow thread: check the clock and run 100
// Fibonacci iterations (with the system calls around them, about 1.5µs
// of CPU), then usleep(10000) (10ms and the default 50µs timer slack, and
// the wake-up); until the end, which it sees only once it runs again.
type fibSlow struct {
	end     time.Duration
	working bool
}

func (f *fibSlow) Next(now time.Duration, _ *rand.Rand) Step {
	f.working = !f.working
	if f.working {
		return Step{Kind: Burn, CPU: 1500 * time.Nanosecond}
	}
	if now >= f.end {
		return Step{Kind: Exit}
	}
	return Step{Kind: Sleep, Until: now + 10*time.Millisecond + 60*time.Microsecond}
}

// goProc is seed 000's Go program (cfs.go): the main goroutine's thread
// burns 5ms of wall-clock time (one operation: "burn took"), logs a line
// and sleeps 1000ms; its runtime's other threads run tiny bits on other
// CPUs around it: the thread that wakes the main goroutine when its
// timer fires, an M that spins looking for work when it becomes
// runnable, and sysmon, which polls every 20µs (backing off to 10ms)
// while a goroutine runs and sleeps while all are parked.
type goProc struct {
	iterations int
	sleep      time.Duration
	wake       time.Duration // the main thread's next wake-up
	active     bool          // the main goroutine runs
}

type goMain struct {
	p     *goProc
	state int
	n     int
}

func (m *goMain) Next(now time.Duration, _ *rand.Rand) Step {
	m.state = (m.state + 1) % 3
	switch m.state {
	case 1:
		if m.n == m.p.iterations {
			m.p.active = false
			return Step{Kind: Exit}
		}
		m.n++
		m.p.active = true
		return Step{Kind: Spin, Until: now + 5*time.Millisecond, OpStart: true, OpEnd: true}
	case 2:
		return Step{Kind: Burn, CPU: 30 * time.Microsecond} // log.Printf
	}
	m.p.active = false
	m.p.wake = now + m.p.sleep
	return Step{Kind: Sleep, Until: m.p.wake}
}

// goHelper does work at offset from each of the main thread's wake-ups.
type goHelper struct {
	p       *goProc
	offset  time.Duration
	work    time.Duration
	working bool
	served  time.Duration // the wake-up served last
}

func (h *goHelper) Next(now time.Duration, _ *rand.Rand) Step {
	h.working = !h.working
	if h.working && h.served != h.p.wake && now >= h.p.wake+h.offset {
		h.served = h.p.wake
		return Step{Kind: Burn, CPU: h.work}
	}
	h.working = false
	if next := h.p.wake + h.offset; next > now && h.served != h.p.wake {
		return Step{Kind: Sleep, Until: next}
	}
	return Step{Kind: Sleep, Until: now + time.Millisecond} // the next wake-up is not known yet
}

// goSysmon is the Go runtime's sysmon thread (runtime/proc.go): it polls
// every 20µs, doubling the delay after 50 idle polls up to 10ms, while a
// goroutine runs, and sleeps while all are parked.
type goSysmon struct {
	p       *goProc
	delay   time.Duration
	polls   int
	working bool
}

func (s *goSysmon) Next(now time.Duration, _ *rand.Rand) Step {
	s.working = !s.working
	if s.working {
		return Step{Kind: Burn, CPU: 2 * time.Microsecond}
	}
	if !s.p.active {
		s.delay, s.polls = 0, 0
		if s.p.wake > now {
			return Step{Kind: Sleep, Until: s.p.wake}
		}
		return Step{Kind: Sleep, Until: now + 10*time.Millisecond}
	}
	switch {
	case s.delay == 0:
		s.delay = 20 * time.Microsecond
	case s.polls > 50:
		s.delay = min(2*s.delay, 10*time.Millisecond)
	}
	s.polls++
	return Step{Kind: Sleep, Until: now + s.delay}
}

// requests serves requests that arrive at random (Poisson, rate per
// second), each work of CPU (one operation, from when it is taken up);
// a request that arrives while the last is served waits for it.
type requests struct {
	rate    float64
	work    time.Duration
	next    time.Duration
	working bool
}

func (r *requests) arrival(rng *rand.Rand) time.Duration {
	r.next += time.Duration(rng.ExpFloat64() / r.rate * float64(time.Second))
	return r.next
}

func (r *requests) Next(now time.Duration, rng *rand.Rand) Step {
	if r.working {
		r.working = false
		if a := r.arrival(rng); a > now {
			return Step{Kind: Sleep, Until: a}
		}
	} else if r.next == 0 {
		if a := r.arrival(rng); a > now {
			return Step{Kind: Sleep, Until: a}
		}
	}
	r.working = true
	return Step{Kind: Burn, CPU: r.work, OpStart: true, OpEnd: true}
}
