// Package recommend advises the CPU settings of a group — a quota (and
// period), a CPU burst, a thread cap, or no limit — from its per-period
// demand, predicts what each setting would do with the simulator
// (internal/sim), and compares the advice with the sizing rules in use
// (seed 003's p95 × 1.5, krr, VPA). docs/recommend.md is its description.
package recommend

import (
	"fmt"
	"time"

	"github.com/cfsprobe/cfsprobe/internal/cgroup"
	"github.com/cfsprobe/cfsprobe/internal/report"
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
	out := report.CPUs(s.Limits.CPUs())
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

func threads(n int) string {
	if n == 1 {
		return "1 thread"
	}
	return fmt.Sprintf("%d threads", n)
}

// Millicores is the quota as Kubernetes writes limits.cpu (1000m = one
// CPU per period), rounded up; 0 without a limit.
func (s Setting) Millicores() int64 {
	l := s.Limits
	if l.Unlimited() || l.Period <= 0 {
		return 0
	}
	return (int64(l.Quota)*1000 + int64(l.Period) - 1) / int64(l.Period)
}

// milliSetting is the setting of m millicores per period (the quota as
// Kubernetes makes it from limits.cpu: m × period / 1000, in whole
// microseconds, at least the kernel's minimum), with a burst of the
// quota when burst is set, the cpuset kept, and a thread cap.
func milliSetting(m int64, period time.Duration, cpuset string, burst bool, threads int) Setting {
	q := time.Duration(m) * period / 1000
	q = max(q.Round(time.Microsecond), cgroup.MinQuota)
	l := cgroup.Limits{Period: period, Quota: q, Cpuset: cpuset}
	if burst {
		l.Burst = q
	}
	return Setting{Limits: l, Threads: threads}
}
