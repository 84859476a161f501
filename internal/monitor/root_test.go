package monitor

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cfsprobe/cfsprobe/internal/cgroup"
)

// Files that make a directory a mounted hierarchy's root.
var (
	v1CPUFiles  = map[string]string{"cpu.cfs_quota_us": "-1\n", "cpu.cfs_period_us": "100000\n", "cpu.stat": "nr_periods 0\n"}
	v1AcctFiles = map[string]string{"cpuacct.usage": "1\n"}
)

// rootCase is one shape of cgroup root, built in a temporary directory:
// dirs get the files of their hierarchy, links are symlinks.
type rootCase struct {
	name  string
	files map[string]string // path -> contents
	dirs  []string          // empty directories
	links map[string]string // path -> target ("$ROOT" is the fixture's root)
	// What OpenRoot must give (dirs relative to the fixture's root), or
	// the error: a sentinel and/or a text with "$ROOT" for the root.
	mode    cgroup.Mode
	version int
	cpuDir  string
	acctDir string
	err     error
	errText string
}

func hierFiles(dir string, sets ...map[string]string) map[string]string {
	out := map[string]string{}
	for _, s := range sets {
		for k, v := range s {
			out[filepath.Join(dir, k)] = v
		}
	}
	return out
}

func merge(ms ...map[string]string) map[string]string {
	out := map[string]string{}
	for _, m := range ms {
		for k, v := range m {
			out[k] = v
		}
	}
	return out
}

var rootCases = []rootCase{
	{
		name:  "v2",
		files: map[string]string{"cgroup.controllers": "cpuset cpu io memory pids\n"},
		mode:  cgroup.ModeV2, version: 2, cpuDir: ".", acctDir: ".",
	},
	{
		name:    "v2-without-cpu",
		files:   map[string]string{"cgroup.controllers": "memory pids\n"},
		err:     cgroup.ErrNoCPUController,
		errText: `$ROOT is a cgroup v2 tree whose cgroup.controllers lists "memory pids", without cpu`,
	},
	{
		name:  "v1-apart",
		files: merge(hierFiles("cpu", v1CPUFiles), hierFiles("cpuacct", v1AcctFiles), map[string]string{"memory/memory.stat": ""}),
		mode:  cgroup.ModeV1, version: 1, cpuDir: "cpu", acctDir: "cpuacct",
	},
	{
		name:  "v1-comounted-symlinks",
		files: hierFiles("cpu,cpuacct", v1CPUFiles, v1AcctFiles),
		links: map[string]string{"cpu": "cpu,cpuacct", "cpuacct": "cpu,cpuacct"},
		mode:  cgroup.ModeV1, version: 1, cpuDir: "cpu,cpuacct", acctDir: "cpu,cpuacct",
	},
	{
		// CentOS 7 names the mount cpuacct,cpu.
		name:  "v1-cpuacct,cpu",
		files: hierFiles("cpuacct,cpu", v1CPUFiles, v1AcctFiles),
		mode:  cgroup.ModeV1, version: 1, cpuDir: "cpuacct,cpu", acctDir: "cpuacct,cpu",
	},
	{
		// Absolute links, seen in a container that mounts the host's
		// tree elsewhere, point at the container's own /sys/fs/cgroup:
		// they are taken as naming a sibling.
		name:  "v1-absolute-symlinks",
		files: hierFiles("cpu,cpuacct", v1CPUFiles, v1AcctFiles),
		links: map[string]string{"cpu": "/sys/fs/cgroup/cpu,cpuacct", "cpuacct": "/sys/fs/cgroup/cpu,cpuacct"},
		mode:  cgroup.ModeV1, version: 1, cpuDir: "cpu,cpuacct", acctDir: "cpu,cpuacct",
	},
	{
		// A container whose cpu mount is named cpu alone but carries
		// cpuacct too.
		name:  "v1-cpu-with-cpuacct",
		files: hierFiles("cpu", v1CPUFiles, v1AcctFiles),
		mode:  cgroup.ModeV1, version: 1, cpuDir: "cpu", acctDir: "cpu",
	},
	{
		// This machine: cpu and cpuacct apart, unified without controllers.
		name:  "hybrid",
		files: merge(hierFiles("cpu", v1CPUFiles), hierFiles("cpuacct", v1AcctFiles), map[string]string{"unified/cgroup.controllers": ""}),
		mode:  cgroup.ModeHybrid, version: 1, cpuDir: "cpu", acctDir: "cpuacct",
	},
	{
		// Booted with cgroup_no_v1=cpu,cpuacct: cpu is on unified.
		name:  "hybrid-cpu-on-unified",
		files: map[string]string{"unified/cgroup.controllers": "cpu\n", "cpuset/cpuset.cpus": "0-1\n"},
		mode:  cgroup.ModeHybrid, version: 2, cpuDir: "unified", acctDir: "unified",
	},
	{
		name:    "v1-without-cpuacct",
		files:   hierFiles("cpu", v1CPUFiles),
		errText: "$ROOT has a cgroup v1 cpu hierarchy at $ROOT/cpu but no cpuacct",
	},
	{
		// /sys/fs/cgroup/cpu exists (a tmpfs directory) but nothing is
		// mounted there.
		name:    "v1-cpu-not-mounted",
		dirs:    []string{"cpu", "cpuacct"},
		err:     cgroup.ErrNoCPUController,
		errText: "$ROOT/cpu has no cpu.cfs_quota_us",
	},
	{
		name:    "empty",
		err:     cgroup.ErrNoCPUController,
		errText: "$ROOT has neither cgroup.controllers (cgroup v2) nor a cpu, cpu,cpuacct or cpuacct,cpu directory (cgroup v1)",
	},
	{
		name:    "dangling-symlink",
		links:   map[string]string{"cpu": "cpu,cpuacct"},
		err:     cgroup.ErrNoCPUController,
		errText: "$ROOT has neither",
	},
}

func TestOpenRoot(t *testing.T) {
	for _, tc := range rootCases {
		t.Run(tc.name, func(t *testing.T) {
			root := filepath.Join(t.TempDir(), "cgroup")
			if err := os.Mkdir(root, 0o755); err != nil {
				t.Fatal(err)
			}
			for p, data := range tc.files {
				writeFile(t, filepath.Join(root, p), data)
			}
			for _, d := range tc.dirs {
				if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			for p, target := range tc.links {
				if err := os.Symlink(target, filepath.Join(root, p)); err != nil {
					t.Fatal(err)
				}
			}
			r, err := OpenRoot(root + "/") // a trailing slash changes nothing
			if tc.err != nil || tc.errText != "" {
				if err == nil {
					t.Fatalf("OpenRoot = %+v, want an error", r)
				}
				if tc.err != nil && !errors.Is(err, tc.err) {
					t.Errorf("err = %v, want %v", err, tc.err)
				}
				if want := strings.ReplaceAll(tc.errText, "$ROOT", root); !strings.Contains(err.Error(), want) {
					t.Errorf("err = %q, want it to contain %q", err, want)
				}
				return
			}
			if err != nil {
				t.Fatalf("OpenRoot: %v", err)
			}
			want := Root{Dir: root, Mode: tc.mode, Version: tc.version,
				CPUDir: filepath.Join(root, tc.cpuDir), AcctDir: filepath.Join(root, tc.acctDir)}
			if *r != want {
				t.Errorf("OpenRoot =\n %+v\nwant\n %+v", *r, want)
			}
		})
	}
}

func TestOpenRootNotThere(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "nothing")
	if _, err := OpenRoot(dir); !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), dir) {
		t.Errorf("OpenRoot(missing) = %v, want ErrNotExist naming %s", err, dir)
	}
	file := filepath.Join(t.TempDir(), "file")
	writeFile(t, file, "")
	if _, err := OpenRoot(file); err == nil || !strings.Contains(err.Error(), file+" is not a directory") {
		t.Errorf("OpenRoot(file) = %v, want a 'not a directory' error naming it", err)
	}
}
