package cgroup

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// ReadStat reads the CPU counters of any group (not only cfsprobe's):
// cpuDir holds cpu.stat; on v1 acctDir holds cpuacct.usage (it is cpuDir
// when cpu and cpuacct are co-mounted, "" when the group has no cpuacct
// directory: UsageNs is then left 0). Durations come back in ns.
func ReadStat(cpuDir, acctDir string, version int) (Stat, error) {
	p := filepath.Join(cpuDir, "cpu.stat")
	f, err := os.Open(p)
	if err != nil {
		return Stat{}, err
	}
	s, err := parseCPUStat(f, version)
	f.Close()
	if err != nil {
		return Stat{}, fmt.Errorf("parse %s: %w", p, err)
	}
	if version == 1 && acctDir != "" {
		p := filepath.Join(acctDir, "cpuacct.usage")
		f, err := os.Open(p)
		if err != nil {
			return Stat{}, err
		}
		s.UsageNs, err = parseUsage(f)
		f.Close()
		if err != nil {
			return Stat{}, fmt.Errorf("parse %s: %w", p, err)
		}
	}
	return s, nil
}

// ReadLimits reads any group's bandwidth settings: v1 cpu.cfs_quota_us,
// cpu.cfs_period_us and cpu.cfs_burst_us, v2 cpu.max and cpu.max.burst.
// No quota ("max", -1) reads as Quota 0, a kernel without burst as Burst
// 0. Cpuset is not read. A v2 group without cpu.max (the root, or a group
// whose parent does not enable the cpu controller) gives an error for
// which errors.Is(err, fs.ErrNotExist).
func ReadLimits(cpuDir string, version int) (Limits, error) {
	l, err := readMax(cpuDir, version)
	if err != nil {
		return Limits{}, err
	}
	if l.Burst, err = readBurst(cpuDir, version); err != nil {
		return Limits{}, err
	}
	return l, nil
}

// readMax reads the quota and the period.
func readMax(cpuDir string, version int) (Limits, error) {
	if version == 2 {
		p := filepath.Join(cpuDir, "cpu.max")
		f, err := os.Open(p)
		if err != nil {
			return Limits{}, err
		}
		defer f.Close()
		l, err := parseCPUMax(f)
		if err != nil {
			return Limits{}, fmt.Errorf("parse %s: %w", p, err)
		}
		return l, nil
	}
	q, err := os.Open(filepath.Join(cpuDir, "cpu.cfs_quota_us"))
	if err != nil {
		return Limits{}, err
	}
	defer q.Close()
	pf, err := os.Open(filepath.Join(cpuDir, "cpu.cfs_period_us"))
	if err != nil {
		return Limits{}, err
	}
	defer pf.Close()
	l, err := parseV1Max(q, pf)
	if err != nil {
		return Limits{}, fmt.Errorf("parse %s: %w", cpuDir, err)
	}
	return l, nil
}

// readBurst reads a group's burst (v1 cpu.cfs_burst_us, v2
// cpu.max.burst). A kernel without burst support gives 0 and no error.
func readBurst(cpuDir string, version int) (time.Duration, error) {
	name := "cpu.cfs_burst_us"
	if version == 2 {
		name = "cpu.max.burst"
	}
	v, err := readOptionalUint(filepath.Join(cpuDir, name))
	if v > maxDurationUs {
		return 0, fmt.Errorf("parse %s (%d): %w", filepath.Join(cpuDir, name), v, errSyntax)
	}
	return time.Duration(v) * time.Microsecond, err
}

// ReadWeight reads a group's relative CPU weight as the kernel shows it
// (v1 cpu.shares, v2 cpu.weight; the scales differ). A group without the
// file (the v2 root) gives 0 and no error.
func ReadWeight(cpuDir string, version int) (int64, error) {
	name := "cpu.shares"
	if version == 2 {
		name = "cpu.weight"
	}
	return readOptionalUint(filepath.Join(cpuDir, name))
}

// readOptionalUint reads a file holding one non-negative integer; a
// missing file is 0.
func readOptionalUint(p string) (int64, error) {
	b, err := os.ReadFile(p)
	if os.IsNotExist(err) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	s := strings.TrimSpace(string(b))
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil || v < 0 {
		return 0, fmt.Errorf("parse %s (%q): %w", p, s, errSyntax)
	}
	return v, nil
}
