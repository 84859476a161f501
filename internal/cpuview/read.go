package cpuview

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"strconv"
	"strings"

	"github.com/cfsprobe/cfsprobe/internal/cgroup"
	"github.com/cfsprobe/cfsprobe/internal/hostfs"
)

var errSyntax = errors.New("invalid syntax")

// ReadAffinity reads the CPUs process pid may run on, from the
// Cpus_allowed_list line of fs's proc/<pid>/status (what
// sched_getaffinity returns).
func ReadAffinity(fs hostfs.FS, pid string) (*CPUList, error) {
	p := fs.Proc(pid, "status")
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	list, err := parseAffinity(f)
	if err != nil {
		return nil, fmt.Errorf("parse %s: %w", p, err)
	}
	cpus, err := cgroup.ParseCPUList(list)
	if err != nil {
		return nil, fmt.Errorf("parse %s (Cpus_allowed_list %q): %w", p, list, err)
	}
	if len(cpus) == 0 {
		return nil, fmt.Errorf("parse %s: Cpus_allowed_list is empty: %w", p, errSyntax)
	}
	return &CPUList{List: list, Count: len(cpus), Source: p, cpus: cpus}, nil
}

// parseAffinity returns the value of the Cpus_allowed_list line of a
// /proc/<pid>/status file.
func parseAffinity(r io.Reader) (string, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		k, val, ok := strings.Cut(sc.Text(), ":")
		if ok && k == "Cpus_allowed_list" {
			return strings.TrimSpace(val), nil
		}
	}
	if err := sc.Err(); err != nil {
		return "", err
	}
	return "", fmt.Errorf("no Cpus_allowed_list line: %w", errSyntax)
}

func parsePID(s string) (int, bool) {
	n, err := strconv.Atoi(s)
	return n, err == nil && n > 0
}

func numCPU() int { return runtime.NumCPU() }
