package cgroup

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/cfsprobe/cfsprobe/internal/hostfs"
)

// Mount is one line of /proc/<pid>/mountinfo (proc(5)).
type Mount struct {
	ID           int
	ParentID     int
	Root         string   // the path inside the filesystem that is mounted here
	MountPoint   string   // where it is mounted, relative to the process's root
	FSType       string   // "cgroup", "cgroup2", "tmpfs", ...
	Source       string   // mount source
	SuperOptions []string // per-superblock options: the v1 controllers live here
}

// ReadMountinfo reads fs's proc/<pid>/mountinfo. pid is a number or "self".
func ReadMountinfo(fs hostfs.FS, pid string) ([]Mount, error) {
	p := fs.Proc(pid, "mountinfo")
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	m, err := parseMountinfo(f)
	if err != nil {
		return nil, fmt.Errorf("parse %s: %w", p, err)
	}
	return m, nil
}

// parseMountinfo parses the mountinfo format:
//
//	36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext3 /dev/root rw,errors=continue
//	(1)(2)(3)   (4)   (5)      (6)      (7)   (8) (9)   (10)         (11)
//
// Field 7 is zero or more optional fields ended by a lone "-".
func parseMountinfo(r io.Reader) ([]Mount, error) {
	var out []Mount
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		line := sc.Text()
		if strings.TrimSpace(line) == "" {
			continue
		}
		// Fields are separated by single spaces; the kernel escapes
		// space, tab, newline and backslash in paths but prints every
		// other byte raw, so \f, \v or a UTF-8 no-break space inside a
		// path belong to it (strings.Fields would split there).
		fields := strings.FieldsFunc(line, func(r rune) bool { return r == ' ' })
		sep := -1
		for i := 6; i < len(fields); i++ {
			if fields[i] == "-" {
				sep = i
				break
			}
		}
		if len(fields) < 7 || sep < 0 || sep+3 > len(fields) {
			return nil, fmt.Errorf("line %q: %w", line, errSyntax)
		}
		id, err1 := strconv.Atoi(fields[0])
		parent, err2 := strconv.Atoi(fields[1])
		if err1 != nil || err2 != nil {
			return nil, fmt.Errorf("line %q: mount IDs: %w", line, errSyntax)
		}
		m := Mount{
			ID:         id,
			ParentID:   parent,
			Root:       unescapeOctal(fields[3]),
			MountPoint: unescapeOctal(fields[4]),
			FSType:     fields[sep+1],
			Source:     unescapeOctal(fields[sep+2]),
		}
		if sep+3 < len(fields) {
			m.SuperOptions = strings.Split(fields[sep+3], ",")
		}
		out = append(out, m)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return out, nil
}

// unescapeOctal undoes the kernel's \040-style escaping of spaces, tabs,
// newlines and backslashes in mountinfo paths.
func unescapeOctal(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) && isOctal(s[i+1:i+4]) {
			v, _ := strconv.ParseUint(s[i+1:i+4], 8, 8)
			b.WriteByte(byte(v))
			i += 3
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func isOctal(s string) bool {
	if len(s) != 3 {
		return false
	}
	for _, c := range s {
		if c < '0' || c > '7' {
			return false
		}
	}
	return true
}

// ProcCgroup is one line of /proc/<pid>/cgroup: "hierarchy-ID:controllers:path".
// On cgroup v2 the line is "0::/path" (no controllers).
type ProcCgroup struct {
	HierarchyID int
	Controllers []string // empty for the unified hierarchy
	Path        string
}

// ReadProcCgroup reads fs's proc/<pid>/cgroup.
func ReadProcCgroup(fs hostfs.FS, pid string) ([]ProcCgroup, error) {
	p := fs.Proc(pid, "cgroup")
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	c, err := parseProcCgroup(f)
	if err != nil {
		return nil, fmt.Errorf("parse %s: %w", p, err)
	}
	return c, nil
}

func parseProcCgroup(r io.Reader) ([]ProcCgroup, error) {
	var out []ProcCgroup
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	// Lines end at '\n' only: the kernel prints a path as it is, and a
	// cgroup's name may end in '\r', which bufio.ScanLines would drop.
	sc.Split(splitNewline)
	for sc.Scan() {
		line := sc.Text()
		if strings.TrimSpace(line) == "" {
			continue
		}
		// The path itself may contain ':' so split into at most three parts.
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			return nil, fmt.Errorf("line %q: %w", line, errSyntax)
		}
		id, err := strconv.Atoi(parts[0])
		if err != nil || id < 0 {
			return nil, fmt.Errorf("line %q: hierarchy ID: %w", line, errSyntax)
		}
		pc := ProcCgroup{HierarchyID: id, Path: parts[2]}
		if parts[1] != "" {
			pc.Controllers = strings.Split(parts[1], ",")
		}
		if !strings.HasPrefix(pc.Path, "/") {
			return nil, fmt.Errorf("line %q: path is not absolute: %w", line, errSyntax)
		}
		out = append(out, pc)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return out, nil
}

// splitNewline is bufio.ScanLines without its carriage-return stripping.
func splitNewline(data []byte, atEOF bool) (int, []byte, error) {
	if i := bytes.IndexByte(data, '\n'); i >= 0 {
		return i + 1, data[:i], nil
	}
	if atEOF && len(data) > 0 {
		return len(data), data, nil
	}
	return 0, nil, nil
}
