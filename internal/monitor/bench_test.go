package monitor

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// benchGroups is the size of the generated node: about what a busy
// Kubernetes node holds.
const benchGroups = 1000

// genTree writes a Kubernetes node's cgroup root with n groups (systemd
// driver, containerd) to dir: kubepods, its QoS slices and pods of a
// pause container and two containers. Even pods have a limit on the pod
// and both containers, odd ones on one container. Each group has as many
// other files as the real one (v2: every controller's; v1: cpu's and
// cpuacct's), so that listing a directory costs what it costs. It returns
// the root and how many groups have a quota.
func genTree(tb testing.TB, dir, layout string, n int) (root string, limited int) {
	tb.Helper()
	root = filepath.Join(dir, layout)
	var cpuDir, acctDir string
	var extra, acctExtra []string
	switch layout {
	case "v2":
		cpuDir, acctDir = root, root
		writeFile(tb, filepath.Join(root, "cgroup.controllers"), "cpuset cpu io memory hugetlb pids rdma misc\n")
		for _, c := range []string{"cgroup", "cpuset", "io", "memory", "hugetlb", "pids", "rdma", "misc"} {
			for i := 0; i < 6; i++ {
				extra = append(extra, fmt.Sprintf("%s.file%d", c, i))
			}
		}
	case "v1-apart":
		cpuDir, acctDir = filepath.Join(root, "cpu"), filepath.Join(root, "cpuacct")
		extra = []string{"cgroup.clone_children", "cgroup.procs", "cpu.idle", "cpu.rt_period_us", "cpu.rt_runtime_us",
			"cpu.shares", "cpu.stat.local", "notify_on_release", "tasks"}
		acctExtra = []string{"cgroup.clone_children", "cgroup.procs", "cpuacct.stat", "cpuacct.usage_all", "cpuacct.usage_percpu",
			"cpuacct.usage_percpu_sys", "cpuacct.usage_percpu_user", "cpuacct.usage_sys", "cpuacct.usage_user", "notify_on_release", "tasks"}
	default:
		tb.Fatalf("no layout %s", layout)
	}
	group := func(path string, quota int) {
		cd, ad := filepath.Join(cpuDir, path), filepath.Join(acctDir, path)
		if err := os.MkdirAll(cd, 0o755); err != nil {
			tb.Fatal(err)
		}
		if quota > 0 {
			limited++
		}
		if layout == "v2" {
			max := "max 100000\n"
			if quota > 0 {
				max = fmt.Sprintf("%d 100000\n", quota)
			}
			if path != "" { // the root has no cpu.max
				writeFile(tb, filepath.Join(cd, "cpu.max"), max)
				writeFile(tb, filepath.Join(cd, "cpu.max.burst"), "0\n")
			}
			writeFile(tb, filepath.Join(cd, "cpu.stat"), "usage_usec 1234567\nuser_usec 1000000\nsystem_usec 234567\ncore_sched.force_idle_usec 0\n"+
				"nr_periods 4567\nnr_throttled 123\nthrottled_usec 45678\nnr_bursts 0\nburst_usec 0\n")
		} else {
			if quota <= 0 {
				quota = -1
			}
			writeFile(tb, filepath.Join(cd, "cpu.cfs_quota_us"), fmt.Sprintf("%d\n", quota))
			writeFile(tb, filepath.Join(cd, "cpu.cfs_period_us"), "100000\n")
			writeFile(tb, filepath.Join(cd, "cpu.cfs_burst_us"), "0\n")
			writeFile(tb, filepath.Join(cd, "cpu.stat"), "nr_periods 4567\nnr_throttled 123\nthrottled_time 45678000\nnr_bursts 0\nburst_time 0\n")
			writeFile(tb, filepath.Join(ad, "cpuacct.usage"), "1234567890\n")
			for _, f := range acctExtra {
				writeFile(tb, filepath.Join(ad, f), "")
			}
		}
		for _, f := range extra {
			writeFile(tb, filepath.Join(cd, f), "")
		}
	}

	group("", 0)
	group("/kubepods.slice", 0)
	group("/kubepods.slice/kubepods-burstable.slice", 0)
	group("/kubepods.slice/kubepods-besteffort.slice", 0)
	for i := 0; 4+4*(i+1) <= n; i++ {
		uid := fmt.Sprintf("%08x_1b2c_4d3e_8f4a_%012x", i, i)
		pod := fmt.Sprintf("/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod%s.slice", uid)
		ctr := func(j int) string { return fmt.Sprintf("%s/cri-containerd-%056x%08x.scope", pod, i, j) }
		if i%2 == 0 {
			group(pod, 150000)
			group(ctr(0), 0)
			group(ctr(1), 100000)
			group(ctr(2), 50000)
		} else {
			group(pod, 0)
			group(ctr(0), 0)
			group(ctr(1), 20000)
			group(ctr(2), 0)
		}
	}
	return root, limited
}

// BenchmarkDiscoverAndStat measures one scrape of a node with 1,000
// groups: the walk that finds those with a quota, and reading each one's
// counters; and each half alone. The tree is on the temporary directory's
// file system, not cgroupfs: the numbers compare versions of this code,
// not kernels.
func BenchmarkDiscoverAndStat(b *testing.B) {
	for _, layout := range []string{"v2", "v1-apart"} {
		root, limited := genTree(b, b.TempDir(), layout, benchGroups)
		r, err := OpenRoot(root)
		if err != nil {
			b.Fatal(err)
		}
		d, err := r.Discover(Options{})
		if err != nil || len(d.Groups) != limited || len(d.Skipped) > 0 {
			b.Fatalf("Discover found %d groups (want %d), skipped %v, err %v", len(d.Groups), limited, d.Skipped, err)
		}
		all, err := r.Discover(Options{All: true})
		if err != nil || len(all.Groups) != benchGroups {
			b.Fatalf("Discover(All) found %d groups, want %d (err %v)", len(all.Groups), benchGroups, err)
		}
		groups := d.Groups

		b.Run(layout+"/discover+stat", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				d, err := r.Discover(Options{})
				if err != nil {
					b.Fatal(err)
				}
				for _, g := range d.Groups {
					if _, err := g.Stat(); err != nil {
						b.Fatal(err)
					}
				}
			}
			b.ReportMetric(float64(limited), "groups/op")
		})
		b.Run(layout+"/discover", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := r.Discover(Options{}); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(layout+"/stat", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				for _, g := range groups {
					if _, err := g.Stat(); err != nil {
						b.Fatal(err)
					}
				}
			}
			b.ReportMetric(float64(len(groups)), "groups/op")
		})
	}
}
