package cgroup

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/cfsprobe/cfsprobe/internal/hostfs"
)

// The host facts every part of cfsprobe records next to a group's counters
// (traces, the check, top, the exporter; trace.ReadHost gathers them). The
// tree is a parameter: a container sees the node's /proc and /sys where
// they are mounted.

// OnlineCPUs counts the CPUs in fs's online file, or gives
// runtime.NumCPU() when that cannot be read.
func OnlineCPUs(fs hostfs.FS) int {
	if b, err := os.ReadFile(fs.OnlineFile()); err == nil {
		if cpus, err := ParseCPUList(strings.TrimSpace(string(b))); err == nil && len(cpus) > 0 {
			return len(cpus)
		}
	}
	return runtime.NumCPU()
}

// CPUTimes is what fs's /proc/stat says of the given CPUs (nil: every
// CPU) since boot: how many CPUs it counted and their idle time (idle
// and iowait). The kernel counts it in USER_HZ ticks (100 a second on
// Linux), so a difference of two readings is exact to 10 ms per CPU.
//
// Busy time is what the CPUs were not idle between two readings, not
// the sum of /proc/stat's busy fields (user, system, irq, ...): the
// kernel samples those at its tick, a whole tick to whatever runs then,
// and a throttled group's threads stop at a tick, so the tick that ends
// each of their runs was theirs. Four threads throttled under 1 CPU on
// 2 CPUs, alone on this project's host (Linux 6.18), came out 0.04 to
// 0.05 CPUs busier by those fields than by the group's usage
// (2026-11-30). A tickless kernel measures idle time at each entry to
// and exit from idle, exactly.
//
// Steal is the time the hypervisor ran something else while the CPUs
// had work (/proc/stat's steal field, from the paravirtual clock where
// the kernel has CONFIG_PARAVIRT_TIME_ACCOUNTING, else 0): busy time
// that no thread was charged, and that a thread which spins for a
// wall-clock time loses from its CPU time.
type CPUTimes struct {
	CPUs  int
	Idle  time.Duration
	Steal time.Duration
}

// ReadCPUTimes reads CPUTimes from fs's /proc/stat.
func ReadCPUTimes(fs hostfs.FS, cpus []int) (CPUTimes, error) {
	b, err := os.ReadFile(fs.Proc("stat"))
	if err != nil {
		return CPUTimes{}, err
	}
	return parseCPUTimes(b, cpus)
}

// userHz is the unit of /proc/stat's times: USER_HZ, which Linux fixes
// at 100 for user space on every architecture.
const userHz = 100

func parseCPUTimes(b []byte, cpus []int) (CPUTimes, error) {
	want := map[int]bool{}
	for _, c := range cpus {
		want[c] = true
	}
	var idle, steal int64
	found := 0
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		// cpuN user nice system idle iowait irq softirq steal ...
		if len(fields) < 9 || !strings.HasPrefix(fields[0], "cpu") || fields[0] == "cpu" {
			continue
		}
		n, err := strconv.Atoi(strings.TrimPrefix(fields[0], "cpu"))
		if err != nil {
			return CPUTimes{}, fmt.Errorf("/proc/stat: %q: %w", fields[0], errSyntax)
		}
		if len(cpus) > 0 && !want[n] {
			continue
		}
		found++
		for i, f := range fields[1:9] {
			v, err := strconv.ParseInt(f, 10, 64)
			if err != nil || v < 0 {
				return CPUTimes{}, fmt.Errorf("/proc/stat: %s: %q: %w", fields[0], f, errSyntax)
			}
			switch i {
			case 3, 4: // idle, iowait
				idle += v
			case 7:
				steal += v
			}
		}
	}
	if err := sc.Err(); err != nil {
		return CPUTimes{}, err
	}
	if found == 0 || len(cpus) > 0 && found < len(want) {
		return CPUTimes{}, fmt.Errorf("/proc/stat: no line for some of CPUs %v", cpus)
	}
	return CPUTimes{CPUs: found, Idle: time.Duration(idle) * (time.Second / userHz), Steal: time.Duration(steal) * (time.Second / userHz)}, nil
}

// BusyBetween is how long the CPUs of two readings taken span apart were
// busy between them: span on each CPU, less their idle time.
func BusyBetween(a, b CPUTimes, span time.Duration) time.Duration {
	return max(span*time.Duration(b.CPUs)-(b.Idle-a.Idle), 0)
}

// KernelRelease reads fs's proc/sys/kernel/osrelease ("" when unknown).
func KernelRelease(fs hostfs.FS) string {
	b, err := os.ReadFile(fs.Proc("sys", "kernel", "osrelease"))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// SliceUs reads kernel.sched_cfs_bandwidth_slice_us from fs's proc (0
// when unknown): how much quota a CPU takes from the group's pool at a
// time.
func SliceUs(fs hostfs.FS) int64 {
	b, err := os.ReadFile(fs.Proc("sys", "kernel", "sched_cfs_bandwidth_slice_us"))
	if err != nil {
		return 0
	}
	v, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil || v < 0 {
		return 0
	}
	return v
}

// BurstSupported reports whether the kernel exposes CPU burst in the
// cpu hierarchy h: cpu.cfs_burst_us on v1; on v2 cpu.max.burst beside
// the cpu.max of a group (the root has neither), or, with no group to
// look at, a kernel release of 5.14 or later (when cpu.max.burst came).
func BurstSupported(h *Hierarchy, release string) bool {
	if h == nil {
		return false
	}
	if h.Version == 1 {
		return fileExists(filepath.Join(h.Dir, "cpu.cfs_burst_us"))
	}
	if fileExists(filepath.Join(h.Dir, "cpu.max.burst")) {
		return true
	}
	entries, _ := os.ReadDir(h.Dir)
	for _, e := range entries {
		if e.IsDir() && fileExists(filepath.Join(h.Dir, e.Name(), "cpu.max")) {
			return fileExists(filepath.Join(h.Dir, e.Name(), "cpu.max.burst"))
		}
	}
	ma, mi, ok := ParseKernelRelease(release)
	return ok && (ma > 5 || ma == 5 && mi >= 14)
}
