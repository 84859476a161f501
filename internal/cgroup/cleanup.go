package cgroup

import (
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/cfsprobe/cfsprobe/internal/hostfs"
)

// Leftover is a group directory that a cfsprobe process made and did not
// remove (it was killed with SIGKILL, or the machine lost power).
type Leftover struct {
	Dir      string // the directory on disk
	Name     string
	OwnerPID int  // the cfsprobe process that made it
	Alive    bool // that process still runs: the group is in use
}

// groupNameRE matches names made by GroupName: prefix-pid-hex.
var groupNameRE = regexp.MustCompile(`^[a-z][a-z0-9]*-(\d+)-[0-9a-f]{8}$`)

// Leftovers lists cfsprobe's groups under the parent in every hierarchy of
// the layout. Only names made by GroupName count: nothing else is touched.
// Whether a group's owner still runs is read from fs's proc.
func (m *Manager) Leftovers(fs hostfs.FS) ([]Leftover, error) {
	var out []Leftover
	for _, h := range m.Layout.Hierarchies() {
		pdir := filepath.Join(h.Dir, m.Parent)
		entries, err := os.ReadDir(pdir)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		for _, e := range entries {
			sm := groupNameRE.FindStringSubmatch(e.Name())
			if !e.IsDir() || sm == nil {
				continue
			}
			pid, _ := strconv.Atoi(sm[1])
			dir := filepath.Join(pdir, e.Name())
			out = append(out, Leftover{Dir: dir, Name: e.Name(), OwnerPID: pid, Alive: ownerAlive(fs, pid, dir)})
		}
	}
	return out, nil
}

// ownerAlive reports whether pid runs and started before the group was
// made (so a recycled PID does not keep a leftover alive).
func ownerAlive(fs hostfs.FS, pid int, dir string) bool {
	if pid == os.Getpid() {
		return true
	}
	start, ok := processStart(fs, pid)
	if !ok {
		return false
	}
	gi, err := os.Stat(dir)
	if err != nil {
		return false
	}
	// Start times have a resolution of a clock tick (10 ms); allow a second.
	return !start.After(gi.ModTime().Add(time.Second))
}

// processStart computes when a process started from /proc/<pid>/stat
// (field 22, clock ticks since boot) and /proc/stat's btime.
func processStart(fs hostfs.FS, pid int) (time.Time, bool) {
	b, err := os.ReadFile(fs.Proc(strconv.Itoa(pid), "stat"))
	if err != nil {
		return time.Time{}, false
	}
	// The command name (field 2) may hold spaces: split after its ')'.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return time.Time{}, false
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 20 {
		return time.Time{}, false
	}
	ticks, err := strconv.ParseInt(f[19], 10, 64)
	if err != nil {
		return time.Time{}, false
	}
	st, err := os.ReadFile(fs.Proc("stat"))
	if err != nil {
		return time.Time{}, false
	}
	for _, line := range strings.Split(string(st), "\n") {
		if v, ok := strings.CutPrefix(line, "btime "); ok {
			bt, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			if err != nil {
				return time.Time{}, false
			}
			const clkTck = 100 // USER_HZ, fixed on Linux
			return time.Unix(bt, 0).Add(time.Duration(ticks) * time.Second / clkTck), true
		}
	}
	return time.Time{}, false
}

// Remove kills the tasks of a leftover and removes its directory, and the
// parent when it is left empty. It touches nothing unless the directory is
// on a cgroup filesystem (ErrNotCgroupFS).
func (m *Manager) Remove(l Leftover) error {
	if err := CheckFS(l.Dir); err != nil {
		return err
	}
	var kill func() error
	if kf := filepath.Join(l.Dir, "cgroup.kill"); fileExists(kf) {
		kill = func() error { return WriteFile(kf, "1") }
	}
	if err := killAll(l.Dir, kill); err != nil {
		return err
	}
	if err := Rmdir(l.Dir); err != nil {
		return err
	}
	removeIfEmpty(filepath.Dir(l.Dir))
	return nil
}

// IsOwnGroupPath reports whether a cgroup path is one cfsprobe made.
func IsOwnGroupPath(p string) bool {
	return groupNameRE.MatchString(filepath.Base(p)) && strings.Contains(p, "/"+DefaultParent+"/")
}
