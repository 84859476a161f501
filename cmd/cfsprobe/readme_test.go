package main

// The README's examples are run by this test, so they never rot: every
// `$ cfsprobe ...` line of a console block runs (in a temporary directory,
// under the test parent group), exits as the README shows (2 when the
// README shows an error, else 0), and prints every labelled summary line
// the README shows ("run", "limits", "throttled", ...). A cfsprobe inside
// an example's command line is the binary under test.

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

type readmeExample struct {
	args   []string
	labels []string // first words of summary lines the README shows
	isErr  bool
}

var summaryLine = regexp.MustCompile(`^([a-z][a-z.0-9]*)\s{2,}\S`)

func readmeExamples(t *testing.T) []readmeExample {
	f, err := os.Open("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []readmeExample
	var cur *readmeExample
	inConsole := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "```console":
			inConsole = true
		case strings.HasPrefix(line, "```"):
			inConsole, cur = false, nil
		case !inConsole:
		case strings.HasPrefix(line, "$ "):
			fields := strings.Fields(strings.TrimPrefix(line, "$ "))
			if fields[0] == "sudo" {
				fields = fields[1:]
			}
			if fields[0] != "cfsprobe" {
				t.Fatalf("README example is not a cfsprobe command: %q", line)
			}
			out = append(out, readmeExample{args: fields[1:]})
			cur = &out[len(out)-1]
		case cur != nil && strings.HasPrefix(line, "cfsprobe: "):
			cur.isErr = true
		case cur != nil:
			if m := summaryLine.FindStringSubmatch(line); m != nil {
				cur.labels = append(cur.labels, m[1])
			}
		}
	}
	return out
}

func TestReadmeExamples(t *testing.T) {
	needCgroups(t)
	if _, err := exec.LookPath("sysbench"); err != nil && !requireTools() {
		t.Skip("sysbench not installed")
	}
	ex := readmeExamples(t)
	if len(ex) < 5 {
		t.Fatalf("found %d examples in README.md, expected at least 5", len(ex))
	}
	dir := t.TempDir()
	// Examples run cfsprobe inside cfsprobe run (cfsprobe cpus, exec):
	// the binary under test is the cfsprobe on their PATH.
	pathDir := t.TempDir()
	if err := os.Symlink(bin, filepath.Join(pathDir, "cfsprobe")); err != nil {
		t.Fatal(err)
	}
	env := append(os.Environ(), "PATH="+pathDir+string(os.PathListSeparator)+os.Getenv("PATH"))
	for _, e := range ex {
		args := e.args
		if args[0] == "run" || args[0] == "cleanup" {
			args = append([]string{args[0], "--parent", testParent}, args[1:]...)
		}
		cmd := exec.Command(bin, args...)
		cmd.Dir, cmd.Env = dir, env
		r := cfsprobeCmd(t, cmd)
		want := 0
		if e.isErr {
			want = 2
		}
		if r.code != want {
			t.Errorf("cfsprobe %s: exit %d, README implies %d\n%s", strings.Join(e.args, " "), r.code, want, r.stderr)
			continue
		}
		for _, l := range e.labels {
			if !regexp.MustCompile(`(?m)^\s*` + regexp.QuoteMeta(l) + `\s`).MatchString(r.stdout) {
				t.Errorf("cfsprobe %s: no %q line in the output, as the README shows\n%s", strings.Join(e.args, " "), l, r.stdout)
			}
		}
	}
}
