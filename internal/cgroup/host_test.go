package cgroup

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cfsprobe/cfsprobe/internal/hostfs"
)

func TestHostFacts(t *testing.T) {
	root := t.TempDir()
	write := func(rel, s string) {
		p := filepath.Join(root, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	fs := hostfs.New(root)
	if n := OnlineCPUs(fs); n != runtime.NumCPU() {
		t.Errorf("no online file: %d, want runtime.NumCPU() %d", n, runtime.NumCPU())
	}
	if KernelRelease(fs) != "" || SliceUs(fs) != 0 {
		t.Error("missing files: want empty values")
	}
	write("sys/devices/system/cpu/online", "0-3,8-11\n")
	write("proc/sys/kernel/osrelease", "6.1.0-56-amd64\n")
	write("proc/sys/kernel/sched_cfs_bandwidth_slice_us", "5000\n")
	if n := OnlineCPUs(fs); n != 8 {
		t.Errorf("online 0-3,8-11: %d CPUs, want 8", n)
	}
	if k := KernelRelease(fs); k != "6.1.0-56-amd64" {
		t.Errorf("release %q", k)
	}
	if s := SliceUs(fs); s != 5000 {
		t.Errorf("slice %d", s)
	}
	write("proc/sys/kernel/sched_cfs_bandwidth_slice_us", "x\n")
	write("sys/devices/system/cpu/online", "garbage")
	if SliceUs(fs) != 0 || OnlineCPUs(fs) != runtime.NumCPU() {
		t.Error("unparsable files: want the fallbacks")
	}
}

func TestBurstSupported(t *testing.T) {
	for _, tc := range []struct {
		name    string
		version int
		files   []string // under the hierarchy's root
		release string
		want    bool
	}{
		{"v1 with cpu.cfs_burst_us", 1, []string{"cpu.cfs_burst_us"}, "4.19.0", true},
		{"v1 without", 1, []string{"cpu.cfs_quota_us"}, "6.1.0", false},
		{"v2 group with cpu.max.burst", 2, []string{"cgroup.controllers", "system.slice/cpu.max", "system.slice/cpu.max.burst"}, "", true},
		{"v2 group without cpu.max.burst", 2, []string{"cgroup.controllers", "system.slice/cpu.max"}, "6.1.0", false},
		{"v2 no group, new kernel", 2, []string{"cgroup.controllers"}, "5.14.0-1", true},
		{"v2 no group, old kernel", 2, []string{"cgroup.controllers"}, "5.13.19", false},
		{"v2 no group, unknown kernel", 2, []string{"cgroup.controllers"}, "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			for _, f := range tc.files {
				p := filepath.Join(dir, f)
				if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(p, []byte("0\n"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if got := BurstSupported(&Hierarchy{Version: tc.version, Dir: dir}, tc.release); got != tc.want {
				t.Errorf("BurstSupported = %v, want %v", got, tc.want)
			}
		})
	}
	if BurstSupported(nil, "6.18.0") {
		t.Error("no cpu hierarchy: want no burst")
	}
}

func TestCPUTimes(t *testing.T) {
	root := t.TempDir()
	fs := hostfs.New(root)
	if _, err := ReadCPUTimes(fs, nil); err == nil {
		t.Error("no /proc/stat: want an error")
	}
	if err := os.MkdirAll(filepath.Join(root, "proc"), 0o755); err != nil {
		t.Fatal(err)
	}
	// user nice system idle iowait irq softirq steal guest guest_nice
	stat := "cpu  60 0 30 900 9 1 2 3 0 0\n" +
		"cpu0 50 0 20 400 5 1 1 3 0 0\n" +
		"cpu1 10 0 10 500 4 0 1 0 0 0\n" +
		"intr 12345 0 0\nctxt 999\nbtime 1700000000\n"
	if err := os.WriteFile(filepath.Join(root, "proc", "stat"), []byte(stat), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		cpus []int
		want CPUTimes
	}{
		{nil, CPUTimes{2, 9090 * time.Millisecond, 30 * time.Millisecond}},         // (405 + 504) ticks of idle and iowait, 3 of steal
		{[]int{0}, CPUTimes{1, 4050 * time.Millisecond, 30 * time.Millisecond}},    // 400+5
		{[]int{1}, CPUTimes{1, 5040 * time.Millisecond, 0}},                        // 500+4
		{[]int{1, 0}, CPUTimes{2, 9090 * time.Millisecond, 30 * time.Millisecond}}, // both
	} {
		got, err := ReadCPUTimes(fs, c.cpus)
		if err != nil || got != c.want {
			t.Errorf("ReadCPUTimes(%v) = %+v, %v; want %+v", c.cpus, got, err, c.want)
		}
	}
	if _, err := ReadCPUTimes(fs, []int{0, 2}); err == nil {
		t.Error("CPU 2 has no line: want an error")
	}
	if err := os.WriteFile(filepath.Join(root, "proc", "stat"), []byte("cpu0 1 2 x 4 5 6 7 8\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadCPUTimes(fs, nil); err == nil {
		t.Error("a field that is not a number: want an error")
	}
	// Two CPUs for 2 s, idle 1.5 s of it: busy 2.5 s; never below 0.
	a, b := CPUTimes{CPUs: 2, Idle: 10 * time.Second}, CPUTimes{CPUs: 2, Idle: 11500 * time.Millisecond}
	if got := BusyBetween(a, b, 2*time.Second); got != 2500*time.Millisecond {
		t.Errorf("BusyBetween: %v, want 2.5s", got)
	}
	if got := BusyBetween(a, b, time.Second/2); got != 0 {
		t.Errorf("BusyBetween, idle longer than the span: %v, want 0", got)
	}
}

// ProcessCPU reads another process's CPU clock as the process itself
// reads its own; a process that does not exist is an error.
func TestProcessCPU(t *testing.T) {
	own := func() time.Duration {
		var ts unix.Timespec
		if err := unix.ClockGettime(unix.CLOCK_PROCESS_CPUTIME_ID, &ts); err != nil {
			t.Fatal(err)
		}
		return time.Duration(ts.Nano())
	}
	before := own()
	got, err := ProcessCPU(os.Getpid())
	after := own()
	if err != nil || got < before || got > after {
		t.Errorf("ProcessCPU(self) = %v, %v; want between %v and %v", got, err, before, after)
	}
	gone := exec.Command("true")
	if err := gone.Run(); err != nil {
		t.Fatal(err)
	}
	for _, pid := range []int{gone.Process.Pid, 0, -1, 1 << 30} {
		if _, err := ProcessCPU(pid); err == nil {
			t.Errorf("ProcessCPU(%d), a process that does not exist: no error", pid)
		}
	}
}
