package cgroup

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/cfsprobe/cfsprobe/internal/hostfs"
)

func TestParseMountinfo(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want []Mount
		err  bool
	}{
		{
			name: "no optional fields",
			in:   "32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu\n",
			want: []Mount{{ID: 32, ParentID: 31, Root: "/", MountPoint: "/sys/fs/cgroup/cpu", FSType: "cgroup", Source: "cgroup", SuperOptions: []string{"rw", "cpu"}}},
		},
		{
			name: "one optional field",
			in:   "29 25 0:24 / /sys/fs/cgroup/cpu,cpuacct rw,nosuid,nodev,noexec,relatime shared:11 - cgroup cgroup rw,cpuacct,cpu\n",
			want: []Mount{{ID: 29, ParentID: 25, Root: "/", MountPoint: "/sys/fs/cgroup/cpu,cpuacct", FSType: "cgroup", Source: "cgroup", SuperOptions: []string{"rw", "cpuacct", "cpu"}}},
		},
		{
			name: "several optional fields",
			in:   "2217 2215 0:28 /kubepods/pod1/c1 /sys/fs/cgroup/cpu ro,nosuid shared:3 master:15 propagate_from:2 unbindable - cgroup cgroup rw,cpu\n",
			want: []Mount{{ID: 2217, ParentID: 2215, Root: "/kubepods/pod1/c1", MountPoint: "/sys/fs/cgroup/cpu", FSType: "cgroup", Source: "cgroup", SuperOptions: []string{"rw", "cpu"}}},
		},
		{
			name: "proc(5) example",
			in:   "36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext3 /dev/root rw,errors=continue\n",
			want: []Mount{{ID: 36, ParentID: 35, Root: "/mnt1", MountPoint: "/mnt2", FSType: "ext3", Source: "/dev/root", SuperOptions: []string{"rw", "errors=continue"}}},
		},
		{
			name: "escaped space, tab, newline and backslash",
			in:   `40 27 8:17 /my\040dir /mnt/a\011b\012c\134d rw - ext4 /dev/disk\040one rw` + "\n",
			want: []Mount{{ID: 40, ParentID: 27, Root: "/my dir", MountPoint: "/mnt/a\tb\nc\\d", FSType: "ext4", Source: "/dev/disk one", SuperOptions: []string{"rw"}}},
		},
		{
			name: "backslash not followed by three octal digits stays",
			in:   `40 27 8:17 / /mnt/a\08\1 rw - ext4 /dev/sdb rw` + "\n",
			want: []Mount{{ID: 40, ParentID: 27, Root: "/", MountPoint: `/mnt/a\08\1`, FSType: "ext4", Source: "/dev/sdb", SuperOptions: []string{"rw"}}},
		},
		{
			// The kernel escapes only space, tab, newline and backslash;
			// any other byte, including Unicode spaces, is printed raw
			// and belongs to the field.
			name: "raw no-break space in a mount point",
			in:   "40 27 8:17 / /media/Backup\u00a0Disk rw,relatime - ext4 /dev/sdb1 rw\n",
			want: []Mount{{ID: 40, ParentID: 27, Root: "/", MountPoint: "/media/Backup\u00a0Disk", FSType: "ext4", Source: "/dev/sdb1", SuperOptions: []string{"rw"}}},
		},
		{
			name: "no super options",
			in:   "40 27 8:17 / /mnt rw - ext4 /dev/sdb\n",
			want: []Mount{{ID: 40, ParentID: 27, Root: "/", MountPoint: "/mnt", FSType: "ext4", Source: "/dev/sdb"}},
		},
		{
			name: "blank lines and no final newline",
			in:   "\n22 27 0:21 / /proc rw,relatime - proc proc rw\n\n23 27 0:22 / /sys rw,relatime - sysfs sysfs rw",
			want: []Mount{
				{ID: 22, ParentID: 27, Root: "/", MountPoint: "/proc", FSType: "proc", Source: "proc", SuperOptions: []string{"rw"}},
				{ID: 23, ParentID: 27, Root: "/", MountPoint: "/sys", FSType: "sysfs", Source: "sysfs", SuperOptions: []string{"rw"}},
			},
		},
		{name: "empty", in: "", want: nil},
		{name: "too few fields", in: "22 27 0:21 / /proc\n", err: true},
		{name: "no separator", in: "22 27 0:21 / /proc rw,relatime proc proc rw\n", err: true},
		{name: "separator in place of the options", in: "22 27 0:21 / /proc - proc proc rw\n", err: true},
		{name: "separator without fs type and source", in: "22 27 0:21 / /proc rw shared:1 - proc\n", err: true},
		{name: "separator last", in: "22 27 0:21 / /proc rw -\n", err: true},
		{name: "non-numeric mount ID", in: "x 27 0:21 / /proc rw - proc proc rw\n", err: true},
		{name: "non-numeric parent ID", in: "22 y 0:21 / /proc rw - proc proc rw\n", err: true},
		{name: "a good line then a bad one", in: "22 27 0:21 / /proc rw - proc proc rw\ngarbage\n", err: true},
		{name: "line over 1 MiB", in: "22 27 0:21 / /" + strings.Repeat("a", 1<<20) + " rw - proc proc rw\n", err: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseMountinfo(strings.NewReader(tc.in))
			if tc.err {
				if err == nil {
					t.Fatalf("parseMountinfo: no error, got %+v", got)
				}
				return
			}
			if err != nil {
				t.Fatalf("parseMountinfo: %v", err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("parseMountinfo =\n%+v\nwant\n%+v", got, tc.want)
			}
		})
	}
}

func TestParseMountinfoErrorNamesLine(t *testing.T) {
	_, err := parseMountinfo(strings.NewReader("22 27 0:21 / /proc rw proc proc rw\n"))
	if !errors.Is(err, errSyntax) {
		t.Fatalf("err = %v, want errSyntax", err)
	}
	if !strings.Contains(err.Error(), `"22 27 0:21 / /proc rw proc proc rw"`) {
		t.Errorf("error %q does not quote the line", err)
	}
}

func TestUnescapeOctal(t *testing.T) {
	tests := []struct{ in, want string }{
		{"", ""},
		{"/plain/path", "/plain/path"},
		{`/a\040b`, "/a b"},
		{`\040\040`, "  "},
		{`/a\134b`, `/a\b`},
		{`/a\011b\012`, "/a\tb\n"},
		{`/a\0`, `/a\0`},
		{`/a\08`, `/a\08`},
		{`/a\`, `/a\`},
		{`/a\\040`, `/a\ `},
	}
	for _, tc := range tests {
		if got := unescapeOctal(tc.in); got != tc.want {
			t.Errorf("unescapeOctal(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestParseProcCgroup(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want []ProcCgroup
		err  bool
	}{
		{
			name: "v1 lines",
			in:   "4:cpu,cpuacct:/user.slice\n3:cpuset:/\n1:name=systemd:/user.slice/user-1000.slice/session-3.scope\n",
			want: []ProcCgroup{
				{HierarchyID: 4, Controllers: []string{"cpu", "cpuacct"}, Path: "/user.slice"},
				{HierarchyID: 3, Controllers: []string{"cpuset"}, Path: "/"},
				{HierarchyID: 1, Controllers: []string{"name=systemd"}, Path: "/user.slice/user-1000.slice/session-3.scope"},
			},
		},
		{
			name: "v2 root",
			in:   "0::/\n",
			want: []ProcCgroup{{HierarchyID: 0, Path: "/"}},
		},
		{
			name: "hybrid",
			in:   "1:cpu:/cfsprobe/x\n0::/user.slice\n",
			want: []ProcCgroup{
				{HierarchyID: 1, Controllers: []string{"cpu"}, Path: "/cfsprobe/x"},
				{HierarchyID: 0, Path: "/user.slice"},
			},
		},
		{
			name: "path containing colons",
			in:   "0::/system.slice/system-getty.slice/getty@tty1.service:a:b\n",
			want: []ProcCgroup{{HierarchyID: 0, Path: "/system.slice/system-getty.slice/getty@tty1.service:a:b"}},
		},
		{
			name: "path with spaces and a deleted group",
			in:   "0::/my group (deleted)\n",
			want: []ProcCgroup{{HierarchyID: 0, Path: "/my group (deleted)"}},
		},
		{
			name: "outside the cgroup namespace",
			in:   "0::/../../user.slice\n",
			want: []ProcCgroup{{HierarchyID: 0, Path: "/../../user.slice"}},
		},
		{
			name: "blank lines",
			in:   "\n0::/\n\n",
			want: []ProcCgroup{{HierarchyID: 0, Path: "/"}},
		},
		{name: "empty", in: "", want: nil},
		{name: "two fields", in: "0:/\n", err: true},
		{name: "one field", in: "garbage\n", err: true},
		{name: "non-numeric ID", in: "x::/\n", err: true},
		{name: "negative ID", in: "-1::/\n", err: true},
		{name: "relative path", in: "0::user.slice\n", err: true},
		{name: "empty path", in: "0::\n", err: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseProcCgroup(strings.NewReader(tc.in))
			if tc.err {
				if err == nil {
					t.Fatalf("parseProcCgroup: no error, got %+v", got)
				}
				if !errors.Is(err, errSyntax) {
					t.Errorf("err = %v, want errSyntax", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("parseProcCgroup: %v", err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("parseProcCgroup =\n%+v\nwant\n%+v", got, tc.want)
			}
		})
	}
}

func TestReadMountinfoMissing(t *testing.T) {
	if _, err := ReadMountinfo(hostfs.New(t.TempDir()), "self"); err == nil {
		t.Error("ReadMountinfo of a missing file: no error")
	}
	if _, err := ReadProcCgroup(hostfs.New(t.TempDir()), "self"); err == nil {
		t.Error("ReadProcCgroup of a missing file: no error")
	}
}
