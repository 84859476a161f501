package cgroup

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Under a directory that is not a cgroup filesystem nothing is written,
// killed or removed, even where the files look like a group's.
func TestNotCgroupFS(t *testing.T) {
	dir := t.TempDir()
	if err := CheckFS(dir); !errors.Is(err, ErrNotCgroupFS) {
		t.Errorf("CheckFS(%s) = %v, want ErrNotCgroupFS", dir, err)
	}
	if err := CheckFS(filepath.Join(dir, "missing")); err == nil || errors.Is(err, ErrNotCgroupFS) {
		t.Errorf("CheckFS of a missing directory = %v, want statfs's error", err)
	}

	quota := filepath.Join(dir, "cpu.cfs_quota_us")
	if err := os.WriteFile(quota, []byte("-1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := WriteFile(quota, "50000"); !errors.Is(err, ErrNotCgroupFS) {
		t.Errorf("WriteFile to a regular file = %v, want ErrNotCgroupFS", err)
	}
	if b, _ := os.ReadFile(quota); string(b) != "-1\n" {
		t.Errorf("the file was changed to %q", b)
	}

	// A leftover whose cgroup.procs names a live process of ours.
	child := exec.Command("sleep", "60")
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = child.Process.Kill(); _ = child.Wait() })
	left := filepath.Join(dir, "cfsprobe", "run-999999-0badcafe")
	if err := os.MkdirAll(left, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(left, "cgroup.procs"), []byte(strconv.Itoa(child.Process.Pid)+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	m := NewManager(&Layout{Mode: ModeV1, CPU: &Hierarchy{Version: 1, Dir: dir, Root: "/", Controllers: []string{"cpu"}}}, "")
	if err := m.Layout.CheckFS(); !errors.Is(err, ErrNotCgroupFS) {
		t.Errorf("Layout.CheckFS = %v, want ErrNotCgroupFS", err)
	}
	if err := m.CheckWritable(); !errors.Is(err, ErrNotCgroupFS) {
		t.Errorf("CheckWritable = %v, want ErrNotCgroupFS", err)
	}
	if err := m.Remove(Leftover{Dir: left, Name: filepath.Base(left), OwnerPID: 999999}); !errors.Is(err, ErrNotCgroupFS) {
		t.Errorf("Remove = %v, want ErrNotCgroupFS", err)
	}
	time.Sleep(20 * time.Millisecond)
	// Killed, it would be a zombie until waited for: read its state.
	stat, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(child.Process.Pid), "stat"))
	if i := strings.LastIndexByte(string(stat), ')'); err != nil || i < 0 || len(stat) < i+3 || stat[i+2] == 'Z' {
		t.Errorf("the process named in the fake cgroup.procs was killed: %q, %v", stat, err)
	}
	if _, err := os.Stat(left); err != nil {
		t.Errorf("the fake group was removed: %v", err)
	}
}

// The host's cgroup hierarchies are cgroup filesystems.
func TestCheckFSHost(t *testing.T) {
	for _, d := range []string{"/sys/fs/cgroup/cpu", "/sys/fs/cgroup/unified", "/sys/fs/cgroup"} {
		if _, err := os.Stat(filepath.Join(d, "cgroup.procs")); err != nil {
			continue
		}
		if err := CheckFS(d); err != nil {
			t.Errorf("CheckFS(%s) = %v", d, err)
		}
		return
	}
	t.Skip("no cgroup hierarchy mounted at /sys/fs/cgroup")
}
