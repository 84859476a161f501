package trace

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/cfsprobe/cfsprobe/internal/cgroup"
	"github.com/cfsprobe/cfsprobe/internal/hostfs"
)

func TestReadHost(t *testing.T) {
	root := t.TempDir()
	for f, s := range map[string]string{
		"proc/sys/kernel/osrelease":                    "5.10.0-28-amd64\n",
		"proc/sys/kernel/sched_cfs_bandwidth_slice_us": "3000\n",
		"sys/devices/system/cpu/online":                "0-5\n",
		"sys/fs/cgroup/cpu/cpu.cfs_burst_us":           "0\n",
	} {
		p := filepath.Join(root, f)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	fs := hostfs.New(root)
	hostname, _ := os.Hostname()

	got := ReadHost(fs, cgroup.ModeHybrid, &cgroup.Hierarchy{Version: 1, Dir: fs.Path("/sys/fs/cgroup/cpu")})
	want := Host{Hostname: hostname, Kernel: "5.10.0-28-amd64", Arch: runtime.GOARCH, CPUs: 6, CgroupMode: "hybrid",
		CPUController: 1, SliceUs: 3000, BurstSupported: true}
	if got != want {
		t.Errorf("v1 cpu:\n got %+v\nwant %+v", got, want)
	}

	// A v2 tree without groups: burst from the fixture's kernel (5.10,
	// before cpu.max.burst), not the running one.
	got = ReadHost(fs, cgroup.ModeV2, &cgroup.Hierarchy{Version: 2, Dir: t.TempDir()})
	want.CgroupMode, want.CPUController, want.BurstSupported = "v2", 2, false
	if got != want {
		t.Errorf("v2 cpu:\n got %+v\nwant %+v", got, want)
	}

	got = ReadHost(fs, cgroup.ModeV2, nil)
	want.CPUController = 0
	if got != want {
		t.Errorf("no cpu controller:\n got %+v\nwant %+v", got, want)
	}
}
