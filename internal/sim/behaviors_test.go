package sim

import (
	"math/rand/v2"
	"time"
)

// Test programs. The built-in workloads (workload.go) are s2's; these
// are the small programs the engine's tests need.

// busy burns CPU until the end, in chunks.
type busy struct{}

func (busy) Next(time.Duration, *rand.Rand) Step { return Step{Kind: Burn, CPU: time.Second} }

// cycle repeats: burn CPU, then sleep (relative), as one operation.
type cycle struct {
	cpu, sleep time.Duration
	sleeping   bool
}

func (c *cycle) Next(now time.Duration, _ *rand.Rand) Step {
	c.sleeping = !c.sleeping
	if c.sleeping {
		return Step{Kind: Burn, CPU: c.cpu, OpStart: true, OpEnd: true}
	}
	return Step{Kind: Sleep, Until: now + c.sleep}
}

// spinSleep repeats: spin for a wall-clock time (a burn loop that checks
// the clock), then sleep; the spin is the operation.
type spinSleep struct {
	spin, sleep time.Duration
	sleeping    bool
}

func (s *spinSleep) Next(now time.Duration, _ *rand.Rand) Step {
	s.sleeping = !s.sleeping
	if s.sleeping {
		return Step{Kind: Spin, Until: now + s.spin, OpStart: true, OpEnd: true}
	}
	return Step{Kind: Sleep, Until: now + s.sleep}
}
