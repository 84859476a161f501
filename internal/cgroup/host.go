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

// BusyTime is how long the given CPUs (nil: every CPU) have been busy
// since boot, from fs's /proc/stat: their user, nice, system, irq,
// softirq and steal time (all but idle and iowait). The kernel counts it
// in USER_HZ ticks (100 a second on Linux), so a difference of two
// readings is exact to 10 ms per CPU.
func BusyTime(fs hostfs.FS, cpus []int) (time.Duration, error) {
	b, err := os.ReadFile(fs.Proc("stat"))
	if err != nil {
		return 0, err
	}
	return parseBusyTime(b, cpus)
}

// userHz is the unit of /proc/stat's times: USER_HZ, which Linux fixes
// at 100 for user space on every architecture.
const userHz = 100

func parseBusyTime(b []byte, cpus []int) (time.Duration, error) {
	want := map[int]bool{}
	for _, c := range cpus {
		want[c] = true
	}
	var ticks int64
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
			return 0, fmt.Errorf("/proc/stat: %q: %w", fields[0], errSyntax)
		}
		if len(cpus) > 0 && !want[n] {
			continue
		}
		found++
		for i, f := range fields[1:9] {
			v, err := strconv.ParseInt(f, 10, 64)
			if err != nil || v < 0 {
				return 0, fmt.Errorf("/proc/stat: %s: %q: %w", fields[0], f, errSyntax)
			}
			if i != 3 && i != 4 { // idle, iowait
				ticks += v
			}
		}
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	if found == 0 || len(cpus) > 0 && found < len(want) {
		return 0, fmt.Errorf("/proc/stat: no line for some of CPUs %v", cpus)
	}
	return time.Duration(ticks) * (time.Second / userHz), nil
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
