package cgroup

import (
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"

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
