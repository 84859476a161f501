package hostfs

import "testing"

func TestPaths(t *testing.T) {
	for _, tc := range []struct {
		name                          string
		fs                            FS
		mountinfo, sys, mount, online string
	}{
		{"default", Default(), "/proc/self/mountinfo", "/sys/fs/cgroup", "/sys/fs/cgroup/cpu", "/sys/devices/system/cpu/online"},
		{"zero", FS{}, "/proc/self/mountinfo", "/sys/fs/cgroup", "/sys/fs/cgroup/cpu", "/sys/devices/system/cpu/online"},
		{"root /", New("/"), "/proc/self/mountinfo", "/sys/fs/cgroup", "/sys/fs/cgroup/cpu", "/sys/devices/system/cpu/online"},
		{"root empty", New(""), "/proc/self/mountinfo", "/sys/fs/cgroup", "/sys/fs/cgroup/cpu", "/sys/devices/system/cpu/online"},
		{"daemonset", New("/host"), "/host/proc/self/mountinfo", "/host/sys/fs/cgroup", "/host/sys/fs/cgroup/cpu", "/host/sys/devices/system/cpu/online"},
		{"fixture", New("testdata/v1-apart"), "testdata/v1-apart/proc/self/mountinfo", "testdata/v1-apart/sys/fs/cgroup",
			"testdata/v1-apart/sys/fs/cgroup/cpu", "testdata/v1-apart/sys/devices/system/cpu/online"},
		{"proc apart", New("/host").WithProc("/hostproc"), "/hostproc/self/mountinfo", "/host/sys/fs/cgroup", "/host/sys/fs/cgroup/cpu", "/host/sys/devices/system/cpu/online"},
		{"proc apart, host root", Default().WithProc("/p"), "/p/self/mountinfo", "/sys/fs/cgroup", "/sys/fs/cgroup/cpu", "/sys/devices/system/cpu/online"},
		{"proc empty", New("/host").WithProc(""), "/host/proc/self/mountinfo", "/host/sys/fs/cgroup", "/host/sys/fs/cgroup/cpu", "/host/sys/devices/system/cpu/online"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.fs.Proc("self", "mountinfo"); got != tc.mountinfo {
				t.Errorf("Proc(self, mountinfo) = %q, want %q", got, tc.mountinfo)
			}
			if got := tc.fs.Sys("fs", "cgroup"); got != tc.sys {
				t.Errorf("Sys(fs, cgroup) = %q, want %q", got, tc.sys)
			}
			if got := tc.fs.CgroupDir(); got != tc.sys {
				t.Errorf("CgroupDir() = %q, want %q", got, tc.sys)
			}
			if got := tc.fs.Path("/sys/fs/cgroup/cpu"); got != tc.mount {
				t.Errorf("Path(/sys/fs/cgroup/cpu) = %q, want %q", got, tc.mount)
			}
			if got := tc.fs.OnlineFile(); got != tc.online {
				t.Errorf("OnlineFile() = %q, want %q", got, tc.online)
			}
		})
	}
}
