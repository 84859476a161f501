package cgroup

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// v2Group is a group in the unified hierarchy.
type v2Group struct {
	base
	buf []byte
}

func (m *Manager) createV2(name string, lim Limits) (_ Group, err error) {
	h := m.Layout.CPU
	var created []string
	defer func() {
		if err != nil {
			undo(created)
		}
	}()
	need := []string{"cpu"}
	if lim.Cpuset != "" {
		need = append(need, "cpuset")
	}
	// The controllers must be enabled in the root's and the parent's
	// subtree_control for the leaf to have cpu.max.
	if err := enableControllers(h.Dir, need); err != nil {
		return nil, err
	}
	setupParent := func(dir string) error { return enableControllers(dir, need) }
	leaf, c, err := mkdirGroup(h.Dir, m.Parent, name, setupParent)
	created = append(created, c...)
	if err != nil {
		return nil, err
	}
	if err := enableControllers(filepath.Dir(leaf), need); err != nil {
		return nil, err
	}
	g := &v2Group{buf: make([]byte, 1024)}
	g.path = "/" + m.Parent + "/" + name
	g.cpuDir = leaf
	g.dirs = []string{leaf}
	g.parents = []string{filepath.Dir(leaf)}

	quota := "max"
	if !lim.Unlimited() {
		quota = durUs(lim.Quota)
	}
	if err := WriteFile(filepath.Join(leaf, "cpu.max"), quota+" "+durUs(lim.Period)); err != nil {
		return nil, err
	}
	if lim.Burst > 0 {
		if err := WriteFile(filepath.Join(leaf, "cpu.max.burst"), durUs(lim.Burst)); err != nil {
			return nil, err
		}
	}
	if lim.Cpuset != "" {
		if err := WriteFile(filepath.Join(leaf, "cpuset.cpus"), lim.Cpuset); err != nil {
			return nil, err
		}
	}
	if g.statFD, err = os.Open(filepath.Join(leaf, "cpu.stat")); err != nil {
		return nil, err
	}
	return g, nil
}

// enableControllers writes "+ctrl" to dir/cgroup.subtree_control for each
// controller not yet enabled there.
func enableControllers(dir string, ctrls []string) error {
	f := filepath.Join(dir, "cgroup.subtree_control")
	cur, err := readTrim(f)
	if err != nil {
		return err
	}
	have := strings.Fields(cur)
	for _, c := range ctrls {
		if slices.Contains(have, c) {
			continue
		}
		if err := WriteFile(f, "+"+c); err != nil {
			return fmt.Errorf("enable the %s controller: %w", c, err)
		}
	}
	return nil
}

func (g *v2Group) Version() int { return 2 }

func (g *v2Group) Stat() (Stat, error) {
	g.statMu.Lock()
	defer g.statMu.Unlock()
	b, err := preadFile(g.statFD, g.buf)
	if err != nil {
		return Stat{}, err
	}
	s, err := parseCPUStat(bytes.NewReader(b), 2)
	if err != nil {
		return Stat{}, fmt.Errorf("parse %s: %w", g.statFD.Name(), err)
	}
	return s, nil
}

func (g *v2Group) Destroy() error {
	killFile := filepath.Join(g.cpuDir, "cgroup.kill")
	var kill func() error
	if fileExists(killFile) {
		kill = func() error { return WriteFile(killFile, "1") }
	}
	return g.destroy(kill)
}

// cgroupFD opens the group directory for clone3(CLONE_INTO_CGROUP).
func (g *v2Group) cgroupFD() (int, func(), error) {
	f, err := os.Open(g.cpuDir)
	if err != nil {
		return -1, nil, err
	}
	return int(f.Fd()), func() { f.Close() }, nil
}
