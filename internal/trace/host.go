package trace

import (
	"os"
	"runtime"

	"github.com/cfsprobe/cfsprobe/internal/cgroup"
	"github.com/cfsprobe/cfsprobe/internal/hostfs"
)

// ReadHost reads the facts of the machine fs locates, the one reader of
// them for the lab, record, top and the exporter: kernel release, online
// CPUs and bandwidth slice from its /proc and /sys; how it mounts
// cgroups (mode); the hierarchy the cpu controller is used through (cpu,
// nil when none has it), whose files say whether CPU burst is supported.
func ReadHost(fs hostfs.FS, mode cgroup.Mode, cpu *cgroup.Hierarchy) Host {
	h := Host{
		Arch: runtime.GOARCH, Kernel: cgroup.KernelRelease(fs), CPUs: cgroup.OnlineCPUs(fs),
		CgroupMode: string(mode), SliceUs: cgroup.SliceUs(fs),
	}
	h.Hostname, _ = os.Hostname()
	if cpu != nil {
		h.CPUController = cpu.Version
		h.BurstSupported = cgroup.BurstSupported(cpu, h.Kernel)
	}
	return h
}
