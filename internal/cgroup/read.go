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

// ReadMax reads a group's bandwidth setting (v1 cpu.cfs_quota_us and
// cpu.cfs_period_us, v2 cpu.max). A group without a limit has Quota -1.
func ReadMax(cpuDir string, version int) (Max, error) {
	if version == 2 {
		p := filepath.Join(cpuDir, "cpu.max")
		f, err := os.Open(p)
		if err != nil {
			return Max{}, err
		}
		defer f.Close()
		m, err := parseCPUMax(f)
		if err != nil {
			return Max{}, fmt.Errorf("parse %s: %w", p, err)
		}
		return m, nil
	}
	q, err := os.Open(filepath.Join(cpuDir, "cpu.cfs_quota_us"))
	if err != nil {
		return Max{}, err
	}
	defer q.Close()
	pf, err := os.Open(filepath.Join(cpuDir, "cpu.cfs_period_us"))
	if err != nil {
		return Max{}, err
	}
	defer pf.Close()
	m, err := parseV1Max(q, pf)
	if err != nil {
		return Max{}, fmt.Errorf("parse %s: %w", cpuDir, err)
	}
	return m, nil
}

// ReadBurst reads a group's burst (v1 cpu.cfs_burst_us, v2
// cpu.max.burst). A kernel without burst support gives 0 and no error.
func ReadBurst(cpuDir string, version int) (time.Duration, error) {
	name := "cpu.cfs_burst_us"
	if version == 2 {
		name = "cpu.max.burst"
	}
	v, err := readOptionalUint(filepath.Join(cpuDir, name))
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
