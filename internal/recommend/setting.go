// Package recommend advises the CPU settings of a group — a quota (and
// period), a CPU burst, a thread cap, or no limit — from its per-period
// demand, predicts what each setting would do with the simulator
// (internal/sim), and compares the advice with the sizing rules in use
// (seed 003's p95 × 1.5, krr, VPA). docs/recommend.md is its description.
package recommend

import (
	"fmt"

	"github.com/cfsprobe/cfsprobe/internal/cgroup"
)

// Setting is what the recommender advises, predicts, or reruns: the
// group's bandwidth limits (Limits.Unlimited(): no limit) and a thread
// cap.
type Setting struct {
	Limits cgroup.Limits
	// Threads caps the CPUs the group's program sizes itself for
	// (GOMAXPROCS, worker counts, through the CPU view): at most this
	// many of its threads run at once. 0: no cap.
	Threads int
}

// String is the setting as people read it: "1.5 CPUs", "0.8 CPUs + 80ms
// burst", "1 CPU, 1 thread", "no limit".
func (s Setting) String() string {
	if s.Limits.Unlimited() {
		if s.Threads > 0 {
			return fmt.Sprintf("no limit, %s", threads(s.Threads))
		}
		return "no limit"
	}
	out := cpus(s.Limits.CPUs())
	if p := s.Limits.Period; p != 0 && p != cgroup.DefaultPeriod {
		out += fmt.Sprintf(" per %v", p)
	}
	if s.Limits.Burst > 0 {
		out += fmt.Sprintf(" + %v burst", s.Limits.Burst)
	}
	if s.Threads > 0 {
		out += ", " + threads(s.Threads)
	}
	return out
}

func cpus(c float64) string {
	if c == 1 {
		return "1 CPU"
	}
	return fmt.Sprintf("%.3g CPUs", c)
}

func threads(n int) string {
	if n == 1 {
		return "1 thread"
	}
	return fmt.Sprintf("%d threads", n)
}
