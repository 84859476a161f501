package cgroup

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
)

// v1Group is a group spread over the v1 hierarchies: cpu (limits and
// cpu.stat), cpuacct (usage; often the same hierarchy) and, when a cpuset
// is asked for, cpuset.
type v1Group struct {
	base
	acctDir string
	buf     []byte
}

func (m *Manager) createV1(name string, lim Limits) (_ Group, err error) {
	l := m.Layout
	var created []string
	defer func() {
		if err != nil {
			undo(created)
		}
	}()
	g := &v1Group{buf: make([]byte, 512)}
	g.path = "/" + m.Parent + "/" + name

	cpuDir, c, err := mkdirGroup(l.CPU.Dir, m.Parent, name, nil)
	created = append(created, c...)
	if err != nil {
		return nil, err
	}
	g.cpuDir = cpuDir
	g.dirs = append(g.dirs, cpuDir)
	g.parents = append(g.parents, filepath.Dir(cpuDir))
	if err := writeV1Limits(cpuDir, lim); err != nil {
		return nil, err
	}

	g.acctDir = cpuDir
	if l.CPUAcct != l.CPU {
		acctDir, c, err := mkdirGroup(l.CPUAcct.Dir, m.Parent, name, nil)
		created = append(created, c...)
		if err != nil {
			return nil, err
		}
		g.acctDir = acctDir
		g.dirs = append(g.dirs, acctDir)
		g.parents = append(g.parents, filepath.Dir(acctDir))
	}

	if lim.Cpuset != "" {
		// A new v1 cpuset starts empty and accepts no task until cpus and
		// mems are set: copy them from the parent, then narrow cpus.
		inherit := func(dir string) error {
			for _, f := range []string{"cpuset.mems", "cpuset.cpus"} {
				if v, _ := readTrim(filepath.Join(dir, f)); v != "" {
					continue
				}
				v, err := readTrim(filepath.Join(filepath.Dir(dir), f))
				if err != nil {
					return err
				}
				if err := WriteFile(filepath.Join(dir, f), v); err != nil {
					return err
				}
			}
			return nil
		}
		var setDir string
		switch l.CPUSet {
		case l.CPU:
			setDir = cpuDir
		case l.CPUAcct:
			setDir = g.acctDir
		default:
			var c []string
			setDir, c, err = mkdirGroup(l.CPUSet.Dir, m.Parent, name, nil)
			created = append(created, c...)
			if err != nil {
				return nil, err
			}
			g.dirs = append(g.dirs, setDir)
			g.parents = append(g.parents, filepath.Dir(setDir))
		}
		for _, d := range []string{filepath.Dir(setDir), setDir} {
			if err := inherit(d); err != nil {
				return nil, err
			}
		}
		if err := WriteFile(filepath.Join(setDir, "cpuset.cpus"), lim.Cpuset); err != nil {
			return nil, err
		}
	}

	if g.statFD, err = os.Open(filepath.Join(cpuDir, "cpu.stat")); err != nil {
		return nil, err
	}
	if g.usageFD, err = os.Open(filepath.Join(g.acctDir, "cpuacct.usage")); err != nil {
		g.statFD.Close()
		return nil, err
	}
	return g, nil
}

func writeV1Limits(dir string, lim Limits) error {
	// A new group has quota -1, so the period can be set first and the
	// quota (validated by the kernel against the period) second.
	if err := WriteFile(filepath.Join(dir, "cpu.cfs_period_us"), durUs(lim.Period)); err != nil {
		return err
	}
	if lim.Unlimited() {
		return nil
	}
	if err := WriteFile(filepath.Join(dir, "cpu.cfs_quota_us"), durUs(lim.Quota)); err != nil {
		return err
	}
	if lim.Burst > 0 {
		if err := WriteFile(filepath.Join(dir, "cpu.cfs_burst_us"), durUs(lim.Burst)); err != nil {
			return err
		}
	}
	return nil
}

func (g *v1Group) Version() int { return 1 }

func (g *v1Group) Stat() (Stat, error) {
	g.statMu.Lock()
	defer g.statMu.Unlock()
	b, err := preadFile(g.statFD, g.buf)
	if err != nil {
		return Stat{}, err
	}
	s, err := parseCPUStat(bytes.NewReader(b), 1)
	if err != nil {
		return Stat{}, fmt.Errorf("parse %s: %w", g.statFD.Name(), err)
	}
	b, err = preadFile(g.usageFD, g.buf)
	if err != nil {
		return Stat{}, err
	}
	if s.UsageNs, err = parseUsage(bytes.NewReader(b)); err != nil {
		return Stat{}, fmt.Errorf("parse %s: %w", g.usageFD.Name(), err)
	}
	return s, nil
}

func (g *v1Group) Destroy() error { return g.destroy(nil) }
