package cgroup

import (
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
)

// The host facts every part of cfsprobe records next to a group's counters
// (traces, the check, top, the exporter). Roots are parameters: a container
// sees the node's /proc and /sys where they are mounted.

// OnlineCPUs counts the CPUs in sysRoot's devices/system/cpu/online, or
// gives runtime.NumCPU() when that cannot be read.
func OnlineCPUs(sysRoot string) int {
	if b, err := os.ReadFile(filepath.Join(sysRoot, "devices/system/cpu/online")); err == nil {
		if cpus, err := ParseCPUList(strings.TrimSpace(string(b))); err == nil && len(cpus) > 0 {
			return len(cpus)
		}
	}
	return runtime.NumCPU()
}

// KernelRelease reads procRoot's sys/kernel/osrelease ("" when unknown).
func KernelRelease(procRoot string) string {
	b, err := os.ReadFile(filepath.Join(procRoot, "sys/kernel/osrelease"))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// SliceUs reads kernel.sched_cfs_bandwidth_slice_us from procRoot (0 when
// unknown): how much quota a CPU takes from the group's pool at a time.
func SliceUs(procRoot string) int64 {
	b, err := os.ReadFile(filepath.Join(procRoot, "sys/kernel/sched_cfs_bandwidth_slice_us"))
	if err != nil {
		return 0
	}
	v, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil || v < 0 {
		return 0
	}
	return v
}
