// Package host reads what a benchmark's numbers depend on, for the host
// facts bench/RESULTS.md records beside them: the CPU model, the kernel
// release and the load.
package host

import (
	"os"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// CPUModel is /proc/cpuinfo's first model name ("?" when unknown).
func CPUModel() string {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return "?"
	}
	for _, l := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "?"
}

// KernelRelease is uname -r.
func KernelRelease() string {
	var u unix.Utsname
	_ = unix.Uname(&u)
	return unix.ByteSliceToString(u.Release[:])
}

// LoadAvg is the load averages over 1, 5 and 15 minutes ("?" when
// unknown).
func LoadAvg() string {
	b, _ := os.ReadFile("/proc/loadavg")
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

// SelfCPU is the CPU time this process has used, user and system.
func SelfCPU() time.Duration {
	var ru unix.Rusage
	_ = unix.Getrusage(unix.RUSAGE_SELF, &ru)
	return time.Duration(unix.TimevalToNsec(ru.Utime) + unix.TimevalToNsec(ru.Stime))
}
