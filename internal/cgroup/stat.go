package cgroup

import (
	"bytes"
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

// parseCPUStat reads cpu.stat from r and parses it (ParseCPUStat).
func parseCPUStat(r io.Reader, version int) (Stat, error) {
	b, err := io.ReadAll(io.LimitReader(r, 1<<20))
	if err != nil {
		return Stat{}, err
	}
	return ParseCPUStat(b, version)
}

// parseUsage reads cpuacct.usage from r and parses it (ParseUsage).
func parseUsage(r io.Reader) (int64, error) {
	b, err := io.ReadAll(io.LimitReader(r, 64))
	if err != nil {
		return 0, err
	}
	return ParseUsage(b)
}

// ParseCPUStat parses cpu.stat of the given cgroup version. Missing keys
// stay zero, unknown keys are ignored (the kernel keeps adding some),
// negative values clamp to zero. On v1 usage is not in cpu.stat (it comes
// from cpuacct.usage) and durations are ns; on v2 they are us. It does not
// allocate (unless a line holds non-ASCII bytes): the monitor runs it for
// every group at every scrape and ten times per period in its sampler.
func ParseCPUStat(b []byte, version int) (Stat, error) {
	var s Stat
	for len(b) > 0 {
		line := b
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			line, b = b[:i], b[i+1:]
		} else {
			b = nil
		}
		line = bytes.TrimSuffix(line, []byte{'\r'})
		key, val, n := twoFields(line)
		if n == 0 {
			continue
		}
		if n != 2 {
			return Stat{}, fmt.Errorf("line %q: %w", line, errSyntax)
		}
		v, err := parseCounter(val)
		if err != nil {
			return Stat{}, fmt.Errorf("line %q: %w", line, err)
		}
		if version == 1 {
			switch string(key) {
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
			continue
		}
		switch string(key) {
		case "usage_usec":
			s.UsageNs = usToNs(v)
		case "nr_periods":
			s.NrPeriods = v
		case "nr_throttled":
			s.NrThrottled = v
		case "throttled_usec":
			s.ThrottledNs = usToNs(v)
		case "nr_bursts":
			s.NrBursts = v
		case "burst_usec":
			s.BurstNs = usToNs(v)
		}
	}
	return s, nil
}

// usToNs converts microseconds to nanoseconds, saturating.
func usToNs(v int64) int64 {
	if v > math.MaxInt64/int64(time.Microsecond) {
		return math.MaxInt64
	}
	return v * int64(time.Microsecond)
}

// twoFields splits a line at runs of white space as strings.Fields does
// and returns the first two fields and how many there are (up to 3).
func twoFields(line []byte) (a, b []byte, n int) {
	for _, c := range line {
		if c >= 0x80 { // Unicode spaces: rare enough to allocate for
			f := strings.Fields(string(line))
			switch len(f) {
			case 0:
				return nil, nil, 0
			case 1:
				return []byte(f[0]), nil, 1
			case 2:
				return []byte(f[0]), []byte(f[1]), 2
			}
			return nil, nil, 3
		}
	}
	i := 0
	for n < 3 {
		for i < len(line) && asciiSpace(line[i]) {
			i++
		}
		if i == len(line) {
			break
		}
		j := i
		for j < len(line) && !asciiSpace(line[j]) {
			j++
		}
		switch n {
		case 0:
			a = line[i:j]
		case 1:
			b = line[i:j]
		}
		n++
		i = j
	}
	return a, b, n
}

func asciiSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r'
}

// parseCounter parses a kernel counter. Negative values (seen from kernel
// accounting bugs) clamp to zero; values beyond int64 saturate.
func parseCounter(b []byte) (int64, error) {
	if len(b) > 0 && len(b) <= 18 {
		var v int64
		ok := true
		for _, c := range b {
			if c < '0' || c > '9' {
				ok = false
				break
			}
			v = v*10 + int64(c-'0')
		}
		if ok {
			return v, nil
		}
	}
	v, err := strconv.ParseInt(string(b), 10, 64)
	if err == nil {
		return max(v, 0), nil
	}
	if ne, ok := err.(*strconv.NumError); ok && ne.Err == strconv.ErrRange {
		if b[0] == '-' {
			return 0, nil
		}
		return math.MaxInt64, nil
	}
	return 0, errSyntax
}

// ParseUsage parses v1 cpuacct.usage (one number, ns): the first 64
// bytes, trimmed.
func ParseUsage(b []byte) (int64, error) {
	if len(b) > 64 {
		b = b[:64]
	}
	b = bytes.TrimSpace(b)
	v, err := parseCounter(b)
	if err != nil {
		return 0, fmt.Errorf("value %q: %w", b, err)
	}
	return v, nil
}

// maxDurationUs is the largest number of microseconds a time.Duration
// holds; a larger quota or period would wrap to a negative duration (the
// kernel itself never shows more than 2^44-1 us).
const maxDurationUs = math.MaxInt64 / int64(time.Microsecond)

// parseCPUMax parses v2 cpu.max: "$MAX $PERIOD", $MAX being "max" (no
// quota: Quota 0) or us. Burst is another file.
func parseCPUMax(r io.Reader) (Limits, error) {
	b, err := io.ReadAll(io.LimitReader(r, 128))
	if err != nil {
		return Limits{}, err
	}
	line := strings.TrimSpace(string(b))
	f := strings.Fields(line)
	if len(f) < 1 || len(f) > 2 {
		return Limits{}, fmt.Errorf("line %q: %w", line, errSyntax)
	}
	m := Limits{Period: DefaultPeriod}
	if len(f) == 2 {
		p, err := strconv.ParseInt(f[1], 10, 64)
		if err != nil || p <= 0 || p > maxDurationUs {
			return Limits{}, fmt.Errorf("line %q: period: %w", line, errSyntax)
		}
		m.Period = time.Duration(p) * time.Microsecond
	}
	if f[0] != "max" {
		q, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil || q <= 0 || q > maxDurationUs {
			return Limits{}, fmt.Errorf("line %q: quota: %w", line, errSyntax)
		}
		m.Quota = time.Duration(q) * time.Microsecond
	}
	return m, nil
}

// parseV1Max reads the limits of v1 cpu.cfs_quota_us and
// cpu.cfs_period_us contents; a quota of -1 (or any not positive) is no
// quota: Quota 0. Burst is another file.
func parseV1Max(quota, period io.Reader) (Limits, error) {
	qb, err := io.ReadAll(io.LimitReader(quota, 64))
	if err != nil {
		return Limits{}, err
	}
	pb, err := io.ReadAll(io.LimitReader(period, 64))
	if err != nil {
		return Limits{}, err
	}
	q, err := strconv.ParseInt(strings.TrimSpace(string(qb)), 10, 64)
	if err != nil || q > maxDurationUs {
		return Limits{}, fmt.Errorf("cpu.cfs_quota_us %q: %w", strings.TrimSpace(string(qb)), errSyntax)
	}
	p, err := strconv.ParseInt(strings.TrimSpace(string(pb)), 10, 64)
	if err != nil || p <= 0 || p > maxDurationUs {
		return Limits{}, fmt.Errorf("cpu.cfs_period_us %q: %w", strings.TrimSpace(string(pb)), errSyntax)
	}
	m := Limits{Period: time.Duration(p) * time.Microsecond}
	if q > 0 {
		m.Quota = time.Duration(q) * time.Microsecond
	}
	return m, nil
}
