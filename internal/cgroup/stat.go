package cgroup

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"
)

// Stat is a snapshot of a group's CPU counters, all durations in
// nanoseconds whatever the cgroup version reported.
type Stat struct {
	UsageNs     int64 // CPU time used by the group (v1 cpuacct.usage, v2 usage_usec)
	NrPeriods   int64 // enforcement periods that elapsed while the group was active
	NrThrottled int64 // periods in which the group was throttled
	ThrottledNs int64 // total time the group's runqueues spent throttled
	NrBursts    int64 // periods in which burst was used
	BurstNs     int64 // CPU time taken from the burst pool
}

// Sub returns s - o, the counters' deltas.
func (s Stat) Sub(o Stat) Stat {
	return Stat{
		UsageNs:     s.UsageNs - o.UsageNs,
		NrPeriods:   s.NrPeriods - o.NrPeriods,
		NrThrottled: s.NrThrottled - o.NrThrottled,
		ThrottledNs: s.ThrottledNs - o.ThrottledNs,
		NrBursts:    s.NrBursts - o.NrBursts,
		BurstNs:     s.BurstNs - o.BurstNs,
	}
}

// parseCPUStat parses cpu.stat of the given cgroup version. Missing keys
// stay zero, unknown keys are ignored (the kernel keeps adding some),
// negative values clamp to zero. On v1 usage is not in cpu.stat (it comes
// from cpuacct.usage) and durations are ns; on v2 they are us.
func parseCPUStat(r io.Reader, version int) (Stat, error) {
	var s Stat
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := sc.Text()
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		if len(f) != 2 {
			return Stat{}, fmt.Errorf("line %q: %w", line, errSyntax)
		}
		v, err := parseCounter(f[1])
		if err != nil {
			return Stat{}, fmt.Errorf("line %q: %w", line, err)
		}
		us := func(v int64) int64 { return saturatingMul(v, int64(time.Microsecond)) }
		switch version {
		case 1:
			switch f[0] {
			case "nr_periods":
				s.NrPeriods = v
			case "nr_throttled":
				s.NrThrottled = v
			case "throttled_time":
				s.ThrottledNs = v
			case "nr_bursts":
				s.NrBursts = v
			case "burst_time":
				s.BurstNs = v
			}
		default:
			switch f[0] {
			case "usage_usec":
				s.UsageNs = us(v)
			case "nr_periods":
				s.NrPeriods = v
			case "nr_throttled":
				s.NrThrottled = v
			case "throttled_usec":
				s.ThrottledNs = us(v)
			case "nr_bursts":
				s.NrBursts = v
			case "burst_usec":
				s.BurstNs = us(v)
			}
		}
	}
	if err := sc.Err(); err != nil {
		return Stat{}, err
	}
	return s, nil
}

// parseCounter parses a kernel counter. Negative values (seen from kernel
// accounting bugs) clamp to zero; values beyond int64 saturate.
func parseCounter(s string) (int64, error) {
	v, err := strconv.ParseInt(s, 10, 64)
	if err == nil {
		return max(v, 0), nil
	}
	if ne, ok := err.(*strconv.NumError); ok && ne.Err == strconv.ErrRange {
		if strings.HasPrefix(s, "-") {
			return 0, nil
		}
		return math.MaxInt64, nil
	}
	return 0, errSyntax
}

func saturatingMul(a, b int64) int64 {
	if a != 0 && a > math.MaxInt64/b {
		return math.MaxInt64
	}
	return a * b
}

// parseUsage parses cpuacct.usage (one number, ns).
func parseUsage(r io.Reader) (int64, error) {
	b, err := io.ReadAll(io.LimitReader(r, 64))
	if err != nil {
		return 0, err
	}
	s := strings.TrimSpace(string(b))
	v, err := parseCounter(s)
	if err != nil {
		return 0, fmt.Errorf("value %q: %w", s, err)
	}
	return v, nil
}

// Max is a bandwidth setting: Quota per Period; Quota < 0 means unlimited.
type Max struct {
	Quota  time.Duration // -1 when unlimited ("max")
	Period time.Duration
}

// Unlimited reports whether no quota is set.
func (m Max) Unlimited() bool { return m.Quota < 0 }

// maxDurationUs is the largest number of microseconds a time.Duration
// holds; a larger quota or period would wrap to a negative duration (the
// kernel itself never shows more than 2^44-1 us).
const maxDurationUs = math.MaxInt64 / int64(time.Microsecond)

// parseCPUMax parses v2 cpu.max: "$MAX $PERIOD", $MAX being "max" or us.
func parseCPUMax(r io.Reader) (Max, error) {
	b, err := io.ReadAll(io.LimitReader(r, 128))
	if err != nil {
		return Max{}, err
	}
	line := strings.TrimSpace(string(b))
	f := strings.Fields(line)
	if len(f) < 1 || len(f) > 2 {
		return Max{}, fmt.Errorf("line %q: %w", line, errSyntax)
	}
	m := Max{Quota: -1, Period: 100 * time.Millisecond}
	if len(f) == 2 {
		p, err := strconv.ParseInt(f[1], 10, 64)
		if err != nil || p <= 0 || p > maxDurationUs {
			return Max{}, fmt.Errorf("line %q: period: %w", line, errSyntax)
		}
		m.Period = time.Duration(p) * time.Microsecond
	}
	if f[0] != "max" {
		q, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil || q <= 0 || q > maxDurationUs {
			return Max{}, fmt.Errorf("line %q: quota: %w", line, errSyntax)
		}
		m.Quota = time.Duration(q) * time.Microsecond
	}
	return m, nil
}

// parseV1Max builds a Max from v1 cpu.cfs_quota_us and cpu.cfs_period_us
// contents; a quota of -1 means unlimited.
func parseV1Max(quota, period io.Reader) (Max, error) {
	qb, err := io.ReadAll(io.LimitReader(quota, 64))
	if err != nil {
		return Max{}, err
	}
	pb, err := io.ReadAll(io.LimitReader(period, 64))
	if err != nil {
		return Max{}, err
	}
	q, err := strconv.ParseInt(strings.TrimSpace(string(qb)), 10, 64)
	if err != nil || q > maxDurationUs {
		return Max{}, fmt.Errorf("cpu.cfs_quota_us %q: %w", strings.TrimSpace(string(qb)), errSyntax)
	}
	p, err := strconv.ParseInt(strings.TrimSpace(string(pb)), 10, 64)
	if err != nil || p <= 0 || p > maxDurationUs {
		return Max{}, fmt.Errorf("cpu.cfs_period_us %q: %w", strings.TrimSpace(string(pb)), errSyntax)
	}
	m := Max{Quota: -1, Period: time.Duration(p) * time.Microsecond}
	if q > 0 {
		m.Quota = time.Duration(q) * time.Microsecond
	}
	return m, nil
}
