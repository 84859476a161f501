package cgroup

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"
)

// The kernel's rules for CFS bandwidth (kernel/sched/core.c,
// tg_set_cfs_bandwidth): period between 1 ms and 1 s, quota at least 1 ms,
// burst at most the quota.
const (
	MinPeriod     = time.Millisecond
	MaxPeriod     = time.Second
	MinQuota      = time.Millisecond
	DefaultPeriod = 100 * time.Millisecond
)

// Limits is what a transient group is given. The zero value of Quota means
// unlimited.
type Limits struct {
	Period time.Duration // enforcement period; DefaultPeriod when zero
	Quota  time.Duration // CPU time per period; 0 = unlimited
	Burst  time.Duration // extra CPU time a period may borrow; 0 = none
	Cpuset string        // CPU list such as "0-1"; "" = inherit
}

// Unlimited reports whether no quota is set.
func (l Limits) Unlimited() bool { return l.Quota == 0 }

// EffectivePeriod is Period, or the kernel default when unset.
func (l Limits) EffectivePeriod() time.Duration {
	if l.Period == 0 {
		return DefaultPeriod
	}
	return l.Period
}

// CPUs is the quota expressed in CPUs (0 when unlimited).
func (l Limits) CPUs() float64 {
	if l.Unlimited() {
		return 0
	}
	return float64(l.Quota) / float64(l.EffectivePeriod())
}

// LimitError is a limit the kernel would refuse. Its message says what to do.
type LimitError struct{ Msg string }

func (e *LimitError) Error() string { return e.Msg }

// Validate checks the limits against the kernel's rules before anything is
// written. The period and quota are written in whole microseconds.
func (l Limits) Validate() error {
	p := l.EffectivePeriod()
	switch {
	case p < MinPeriod:
		return &LimitError{fmt.Sprintf("period %v is below the kernel's minimum of 1ms: use --period 1ms or more", p)}
	case p > MaxPeriod:
		return &LimitError{fmt.Sprintf("period %v is above the kernel's maximum of 1s: use --period 1s or less", p)}
	case p%time.Microsecond != 0:
		return &LimitError{fmt.Sprintf("period %v is not a whole number of microseconds: use --period %v", p, p.Round(time.Microsecond))}
	}
	if l.Quota < 0 {
		return &LimitError{fmt.Sprintf("quota %v is negative: leave it out for no limit", l.Quota)}
	}
	if !l.Unlimited() && l.Quota < MinQuota {
		return &LimitError{fmt.Sprintf("quota %v is below the kernel's minimum of 1ms per period: raise --quota or --cpus (with period %v, --cpus %.3g is the least)", l.Quota, p, float64(MinQuota)/float64(p))}
	}
	if l.Burst < 0 {
		return &LimitError{fmt.Sprintf("burst %v is negative: use --burst 0 or more, or leave it out", l.Burst)}
	}
	if l.Burst > 0 && l.Unlimited() {
		return &LimitError{"burst needs a quota: add --quota or --cpus"}
	}
	if l.Burst > l.Quota && !l.Unlimited() {
		return &LimitError{fmt.Sprintf("burst %v is above the quota %v; the kernel allows at most the quota: lower --burst", l.Burst, l.Quota)}
	}
	if l.Cpuset != "" {
		if _, err := ParseCPUList(l.Cpuset); err != nil {
			return &LimitError{fmt.Sprintf("cpuset %q is not a CPU list like 0-1 or 0,2: %v", l.Cpuset, err)}
		}
	}
	return nil
}

// maxCPU is the largest CPU number ParseCPUList accepts, far above any
// kernel's NR_CPUS (8192 at most today).
const maxCPU = 1<<16 - 1

// ParseCPUList parses a kernel CPU list ("0-3,5,7-8") into sorted CPU numbers.
func ParseCPUList(s string) ([]int, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, nil
	}
	seen := map[int]bool{}
	for _, part := range strings.Split(s, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.Atoi(lo)
		if err != nil || a < 0 {
			return nil, fmt.Errorf("%q: %w", part, errSyntax)
		}
		b := a
		if isRange {
			b, err = strconv.Atoi(hi)
			if err != nil || b < a {
				return nil, fmt.Errorf("%q: %w", part, errSyntax)
			}
		}
		// Bounding the numbers also keeps c++ below from wrapping
		// around at the largest int (an endless loop).
		if b > maxCPU {
			return nil, fmt.Errorf("%q: CPU number above %d", part, maxCPU)
		}
		for c := a; c <= b; c++ {
			seen[c] = true
		}
	}
	out := make([]int, 0, len(seen))
	for c := range seen {
		out = append(out, c)
	}
	sort.Ints(out)
	return out, nil
}
