package cgroup

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"
)

// The kernel's bounds for CFS bandwidth (kernel/sched/core.c,
// tg_set_bandwidth and tg_set_cfs_bandwidth before 6.17): the period
// from 1 ms to 1 s, the quota at least 1 ms and at most max_cfs_runtime
// (MAX_BW microseconds: 2^44-1, some 203 days, so that the quota survives
// the bandwidth shift), the burst at most the quota and, with the quota,
// at most max_cfs_runtime. Both files take whole microseconds.
const (
	MinPeriod     = time.Millisecond
	MaxPeriod     = time.Second
	MinQuota      = time.Millisecond
	MaxQuota      = (1<<44 - 1) * time.Microsecond
	DefaultPeriod = 100 * time.Millisecond
)

// Limits are a group's CFS bandwidth settings: what a transient group is
// given, and what is read back from any group. Period is always the real
// enforcement period (the kernel's default is DefaultPeriod); nothing
// stands for "the default".
type Limits struct {
	Period time.Duration // enforcement period
	Quota  time.Duration // CPU time per period; 0 = unlimited (the kernel's "max" and -1)
	Burst  time.Duration // CPU time a period may borrow from earlier ones; 0 = none
	Cpuset string        // CPU list such as "0-1"; "" = inherit (not read back from groups)
}

// Unlimited reports whether no quota is set.
func (l Limits) Unlimited() bool { return l.Quota == 0 }

// PeriodOrDefault is the period, or the kernel's default where it is not
// given (0).
func (l Limits) PeriodOrDefault() time.Duration {
	if l.Period == 0 {
		return DefaultPeriod
	}
	return l.Period
}

// CPUs is the quota expressed in CPUs (0 when unlimited).
func (l Limits) CPUs() float64 {
	if l.Unlimited() || l.Period <= 0 {
		return 0
	}
	return float64(l.Quota) / float64(l.Period)
}

// CPULimits are the limits of cpus CPUs per period (docker --cpus,
// Kubernetes limits.cpu): the quota is cpus × period rounded to whole
// microseconds, as the kernel takes it, and at least 1µs, so that a
// positive count never reads as unlimited. A count that is not a
// positive finite number, or whose quota is beyond the kernel's
// maximum, is a *LimitError for FieldCPUs; the rest is for Validate.
func CPULimits(cpus float64, period time.Duration) (Limits, error) {
	l := Limits{Period: period}
	value := strconv.FormatFloat(cpus, 'g', -1, 64)
	if !(cpus > 0) || math.IsInf(cpus, 0) { // also NaN
		return l, &LimitError{Field: FieldCPUs, Value: value, Period: period, Reason: "is not a positive number of CPUs"}
	}
	us := math.Round(cpus * float64(period) / float64(time.Microsecond))
	if us > float64(MaxQuota/time.Microsecond) {
		return l, &LimitError{Field: FieldCPUs, Value: value, Period: period,
			Reason: fmt.Sprintf("is more CPU time per %v period than the kernel's maximum quota of %v", period, MaxQuota),
			Max:    MaxQuota, HasMax: true}
	}
	l.Quota = max(time.Duration(us)*time.Microsecond, time.Microsecond)
	return l, nil
}

// Field names one of the limits.
type Field string

// The fields of Limits, and the CPU count a quota is made from.
const (
	FieldPeriod Field = "period"
	FieldQuota  Field = "quota"
	FieldBurst  Field = "burst"
	FieldCpuset Field = "cpuset"
	FieldCPUs   Field = "cpus"
)

// LimitError is a limit the kernel would refuse, or that cannot be met
// here: which field, its value, and why. It names no flag or file field:
// each front end says it in its own words, with Want for the fix.
type LimitError struct {
	Field  Field
	Value  string // the value at fault as the field shows it: "0s", "1e+09", "\"1-0\""
	Reason string // what is wrong with it: "is below the kernel's minimum of 1ms"
	// Min and Max (when HasMin, HasMax) bound the values the field may
	// take, given the rest of the limits; Min == Max is the one value to
	// use instead. For a quota and a CPU count they are quotas.
	Min, Max       time.Duration
	HasMin, HasMax bool
	// Period is the period the quota is per (for bounds in CPUs).
	Period time.Duration
	Err    error // the underlying error, if any
}

func (e *LimitError) Error() string { return fmt.Sprintf("%s %s %s", e.Field, e.Value, e.Reason) }
func (e *LimitError) Unwrap() error { return e.Err }

// OfCPUs restates an error of a quota made from a CPU count (CPULimits)
// as one of the count, written as cpus: "cpus 0.001 (a quota of 100µs per
// 100ms period) is below the kernel's minimum of 1ms". Errors of other
// fields are returned as they are.
func (e *LimitError) OfCPUs(cpus string) *LimitError {
	c := *e
	switch e.Field {
	case FieldQuota:
		c.Reason = fmt.Sprintf("(a quota of %s per %v period) %s", e.Value, e.Period, e.Reason)
	case FieldCPUs:
	default:
		return e
	}
	c.Field, c.Value = FieldCPUs, cpus
	return &c
}

// Want says which values would do: "1ms to 1s", "1ms or more", "20ms or
// less", or "" when no bound applies. For FieldCPUs, the quota bounds are
// given as CPU counts over Period, rounded inwards to three significant
// digits ("0.01 or more").
func (e *LimitError) Want() string {
	lo, hi := fmtDuration(e.Min), fmtDuration(e.Max)
	if e.Field == FieldCPUs && e.Period > 0 {
		lo = fmtCPUs(float64(e.Min)/float64(e.Period), math.Ceil)
		hi = fmtCPUs(float64(e.Max)/float64(e.Period), math.Floor)
	}
	switch {
	case e.HasMin && e.HasMax && e.Min == e.Max:
		return lo
	case e.HasMin && e.HasMax:
		return lo + " to " + hi
	case e.HasMin:
		return lo + " or more"
	case e.HasMax:
		return hi + " or less"
	}
	return ""
}

func fmtDuration(d time.Duration) string {
	if d == 0 {
		return "0"
	}
	return d.String()
}

// fmtCPUs rounds x to three significant digits with round (math.Ceil for
// a least value, math.Floor for a most), so that the count shown is
// within the bound.
func fmtCPUs(x float64, round func(float64) float64) string {
	if x <= 0 {
		return "0"
	}
	scale := math.Pow(10, 2-math.Floor(math.Log10(x)))
	return strconv.FormatFloat(round(x*scale)/scale, 'f', -1, 64)
}

// Validate checks the limits against the kernel's rules before anything
// is written (see the constants above). A rule that depends on the host
// (a parent's quota on v1, the cpuset, burst support) is Manager.Check's.
func (l Limits) Validate() error {
	period := func(reason string) *LimitError {
		return &LimitError{Field: FieldPeriod, Value: l.Period.String(), Reason: reason, Min: MinPeriod, Max: MaxPeriod, HasMin: true, HasMax: true}
	}
	switch p := l.Period; {
	case p < MinPeriod:
		return period("is below the kernel's minimum of 1ms")
	case p > MaxPeriod:
		return period("is above the kernel's maximum of 1s")
	case p%time.Microsecond != 0:
		e := period("is not a whole number of microseconds")
		e.Min, e.Max = p.Round(time.Microsecond), p.Round(time.Microsecond)
		return e
	}
	quota := func(reason string) *LimitError {
		return &LimitError{Field: FieldQuota, Value: l.Quota.String(), Reason: reason, Period: l.Period}
	}
	switch q := l.Quota; {
	case q < 0:
		e := quota("is negative")
		e.Min, e.HasMin = MinQuota, true
		return e
	case q > 0 && q < MinQuota:
		e := quota("is below the kernel's minimum of 1ms")
		e.Min, e.HasMin = MinQuota, true
		return e
	case q > MaxQuota:
		e := quota(fmt.Sprintf("is above the kernel's maximum of %v", MaxQuota))
		e.Max, e.HasMax = MaxQuota, true
		return e
	case q%time.Microsecond != 0:
		e := quota("is not a whole number of microseconds")
		e.Min, e.Max, e.HasMin, e.HasMax = q.Round(time.Microsecond), q.Round(time.Microsecond), true, true
		return e
	}
	burst := func(reason string) *LimitError {
		return &LimitError{Field: FieldBurst, Value: l.Burst.String(), Reason: reason, Min: 0, Max: l.Quota, HasMin: true, HasMax: true}
	}
	switch b := l.Burst; {
	case b == 0:
	case b < 0:
		return burst("is negative")
	case l.Unlimited():
		e := burst("needs a quota")
		e.HasMin, e.HasMax = false, false
		return e
	case b > l.Quota:
		return burst(fmt.Sprintf("is above the quota %v", l.Quota))
	case b > MaxQuota-l.Quota:
		e := burst(fmt.Sprintf("and the quota %v add up to more than the kernel's maximum of %v", l.Quota, MaxQuota))
		e.Max = MaxQuota - l.Quota
		return e
	case b%time.Microsecond != 0:
		e := burst("is not a whole number of microseconds")
		e.Min, e.Max = b.Round(time.Microsecond), b.Round(time.Microsecond)
		return e
	}
	if l.Cpuset != "" {
		if _, err := ParseCPUList(l.Cpuset); err != nil {
			return &LimitError{Field: FieldCpuset, Value: strconv.Quote(l.Cpuset), Reason: "is not a CPU list like 0-1 or 0,2", Err: err}
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
