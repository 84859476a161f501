package trace

import (
	"os"
	"runtime"
	"testing"

	"github.com/cfsprobe/cfsprobe/internal/cgroup"
	"github.com/cfsprobe/cfsprobe/internal/hostfs"
)

func TestReadHost(t *testing.T) {
	// A 5.10 kernel with 6 CPUs, a 3 ms slice and CPU burst in its v1
	// cpu hierarchy.
	fs := hostfs.New("testdata/host-5.10-v1-burst")
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
