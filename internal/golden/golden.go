// Package golden compares what a test produces with a file committed
// under testdata, and rewrites the file instead under `go test -update`.
// Only tests import it; every golden comparison in cfsprobe goes through
// Check, so every package takes the same -update flag.
package golden

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// update is go test's -update: every test binary that imports golden has
// it, and no test registers a flag of that name itself.
var update = flag.Bool("update", false, "rewrite the golden files with what the tests produce")

// Check compares got with the file at path and fails the test where they
// differ, showing the lines that do. Under -update it writes got to path
// (and the directories above it) instead.
func Check(t testing.TB, path string, got []byte) {
	t.Helper()
	if err := compare(path, got, *update); err != nil {
		test, _, _ := strings.Cut(t.Name(), "/")
		t.Errorf("%v\n(go test -run '^%s$' -update rewrites it)", err, test)
	}
}

// compare is Check without the test: nil when got is the file's content
// (or, with rewrite, once got is written there).
func compare(path string, got []byte, rewrite bool) error {
	if rewrite {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return err
		}
		return os.WriteFile(path, got, 0o644)
	}
	want, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("golden file %s does not exist", path)
	}
	if err != nil {
		return err
	}
	if bytes.Equal(got, want) {
		return nil
	}
	return fmt.Errorf("output differs from the golden file %s:\n%s", path, Diff(string(want), string(got)))
}

// maxShown is how many lines of each side diff shows.
const maxShown = 30

// Diff shows the lines between the first and the last that differ, want's
// as "- " and got's as "+ ", after the number of the first.
func Diff(want, got string) string {
	wl, gl := strings.SplitAfter(want, "\n"), strings.SplitAfter(got, "\n")
	pre := 0
	for pre < len(wl) && pre < len(gl) && wl[pre] == gl[pre] {
		pre++
	}
	suf := 0
	for suf < len(wl)-pre && suf < len(gl)-pre && wl[len(wl)-1-suf] == gl[len(gl)-1-suf] {
		suf++
	}
	var b strings.Builder
	fmt.Fprintf(&b, "@@ line %d\n", pre+1)
	side := func(sign string, lines []string) {
		if n := len(lines); n > 0 && lines[n-1] == "" { // after the last newline
			lines = lines[:n-1]
		}
		for i, l := range lines {
			if i == maxShown {
				fmt.Fprintf(&b, "%s ... (%d more lines)\n", sign, len(lines)-maxShown)
				break
			}
			if !strings.HasSuffix(l, "\n") {
				l += " (no newline at the end)\n"
			}
			b.WriteString(sign + " " + l)
		}
	}
	side("-", wl[pre:len(wl)-suf])
	side("+", gl[pre:len(gl)-suf])
	return strings.TrimSuffix(b.String(), "\n")
}
