package testenv

import (
	"fmt"
	"os"
	"path/filepath"
)

// WriteNode writes the cgroup root of a busy Kubernetes node (systemd
// driver, containerd) under dir/layout and returns it: pods of three
// containers, each pod and its containers limited, until there are n
// limited groups, with counters of a node that has run for weeks.
// layout is "v1" (cpu and cpuacct mounted apart, as on this project's
// hosts) or "v2". The files are plain files, not cgroupfs: what reads
// them costs what the paths and the exposition cost, not the kernel.
func WriteNode(dir, layout string, n int) (string, error) {
	root := filepath.Join(dir, layout)
	var werr error
	write := func(p, data string) {
		if werr != nil {
			return
		}
		if werr = os.MkdirAll(filepath.Dir(p), 0o755); werr == nil {
			werr = os.WriteFile(p, []byte(data), 0o644)
		}
	}
	cpuDir, acctDir := root, root
	switch layout {
	case "v1":
		cpuDir, acctDir = filepath.Join(root, "cpu"), filepath.Join(root, "cpuacct")
	case "v2":
		write(filepath.Join(root, "cgroup.controllers"), "cpuset cpu io memory pids\n")
	default:
		return "", fmt.Errorf("no cgroup layout %q: v1 or v2", layout)
	}
	group := func(path string, quota, k int) {
		c := filepath.Join(cpuDir, path)
		if layout == "v1" {
			write(filepath.Join(c, "cpu.cfs_quota_us"), fmt.Sprintf("%d\n", quota))
			write(filepath.Join(c, "cpu.cfs_period_us"), "100000\n")
			write(filepath.Join(c, "cpu.cfs_burst_us"), "0\n")
			write(filepath.Join(c, "cpu.stat"), fmt.Sprintf("nr_periods %d\nnr_throttled %d\nthrottled_time %d\nnr_bursts 0\nburst_time 0\n",
				400000+k, 12000+k, 98765432100+int64(k)))
			write(filepath.Join(acctDir, path, "cpuacct.usage"), fmt.Sprintf("%d\n", 1234567890123+int64(k)))
			return
		}
		max := "max 100000\n"
		if quota > 0 {
			max = fmt.Sprintf("%d 100000\n", quota)
		}
		if path != "" { // the root has no cpu.max
			write(filepath.Join(c, "cpu.max"), max)
			write(filepath.Join(c, "cpu.max.burst"), "0\n")
		}
		write(filepath.Join(c, "cpu.stat"), fmt.Sprintf("usage_usec %d\nuser_usec 1\nsystem_usec 1\ncore_sched.force_idle_usec 0\nnr_periods %d\nnr_throttled %d\nthrottled_usec %d\nnr_bursts 0\nburst_usec 0\n",
			1234567890+k, 400000+k, 12000+k, 98765432+k))
	}
	group("", -1, 0)
	group("/kubepods.slice", -1, 0)
	group("/kubepods.slice/kubepods-burstable.slice", -1, 0)
	for i, limited := 0, 0; limited < n; i++ {
		pod := fmt.Sprintf("/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod%08x_1b2c_4d3e_8f4a_%012x.slice", i, i)
		group(pod, 300000, i)
		limited++
		for j := 0; j < 3 && limited < n; j++ {
			group(fmt.Sprintf("%s/cri-containerd-%056x%08x.scope", pod, i, j), 100000, i*3+j)
			limited++
		}
	}
	return root, werr
}
