package main

// Every command's --help teaches by example, and so do the README and
// docs/; this test keeps the examples true to the command line: each one,
// with --help added, names a command, flags and a workload that exist (an
// unknown one exits 2).

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// helpExample is one example of a command's help: its words after
// "cfsprobe", and the command whose help shows it.
type helpExample struct {
	from string
	args []string
}

// helpExamples are the examples of c's help and its subcommands': every
// line of Example, and every indented line of Long, that begins with
// cfsprobe (after sudo), cut at a comment and at a shell redirection or
// pipe.
func helpExamples(t *testing.T, c *cobra.Command) []helpExample {
	t.Helper()
	var out []helpExample
	var lines []string
	for _, l := range strings.Split(c.Long, "\n") {
		if strings.HasPrefix(l, "  ") {
			lines = append(lines, l)
		}
	}
	lines = append(lines, strings.Split(c.Example, "\n")...)
	for _, l := range lines {
		l = strings.TrimSpace(l)
		l = strings.TrimPrefix(l, "sudo ")
		if !strings.HasPrefix(l, "cfsprobe ") {
			continue
		}
		words, err := shellWords(strings.TrimPrefix(l, "cfsprobe "))
		if err != "" {
			t.Errorf("%s --help: example %q: %s", c.CommandPath(), l, err)
			continue
		}
		out = append(out, helpExample{from: c.CommandPath() + " --help", args: words})
	}
	for _, sub := range c.Commands() {
		out = append(out, helpExamples(t, sub)...)
	}
	return out
}

// shellWords splits an example as a shell would, as far as the examples
// go: words, single and double quotes, and the end at #, >, < or |.
func shellWords(s string) ([]string, string) {
	var words []string
	var cur strings.Builder
	inWord := false
	var quote rune
	for _, r := range s {
		switch {
		case quote != 0 && r == quote:
			quote = 0
		case quote != 0:
			cur.WriteRune(r)
		case r == '\'' || r == '"':
			quote, inWord = r, true
		case r == ' ' || r == '\t':
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		case !inWord && strings.ContainsRune("#><|", r):
			return words, ""
		default:
			cur.WriteRune(r)
			inWord = true
		}
	}
	if quote != 0 {
		return nil, "unterminated quote"
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words, ""
}

// placeholder is a word of a synopsis rather than an example: TRACE,
// [flags], <node>, NS/NAME|UID.
var placeholder = regexp.MustCompile(`^[A-Z][A-Z_/|.]*$|[\[\]<]|\.\.\.`)

// docExamples are the examples of the README and docs/: every line of a
// fenced block that begins with cfsprobe (after "$ " and sudo), but the
// synopses (a line with a placeholder word) and the examples of an error
// (the line after them begins "cfsprobe: ").
func docExamples(t *testing.T) []helpExample {
	t.Helper()
	files, err := filepath.Glob("../../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	var out []helpExample
	for _, name := range append([]string{"../../README.md", "../../deploy/README.md"}, files...) {
		f, err := os.Open(name)
		if err != nil {
			t.Fatal(err)
		}
		fenced, last := false, -1 // last: the example the line before gave
		sc := bufio.NewScanner(f)
	lines:
		for n := 1; sc.Scan(); n++ {
			l := strings.TrimSpace(sc.Text())
			if last >= 0 && strings.HasPrefix(l, "cfsprobe: ") {
				out = out[:last]
			}
			last = -1
			if strings.HasPrefix(l, "```") {
				fenced = !fenced
				continue
			}
			l = strings.TrimPrefix(strings.TrimPrefix(l, "$ "), "sudo ")
			if !fenced || !strings.HasPrefix(l, "cfsprobe ") {
				continue
			}
			words, bad := shellWords(strings.TrimPrefix(l, "cfsprobe "))
			if bad != "" {
				t.Errorf("%s:%d: example %q: %s", name, n, l, bad)
				continue
			}
			for _, w := range words {
				if placeholder.MatchString(w) {
					continue lines
				}
			}
			last = len(out)
			out = append(out, helpExample{from: fmt.Sprintf("%s:%d", strings.TrimPrefix(name, "../../"), n), args: words})
		}
		f.Close()
		if err := sc.Err(); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

func TestShellWords(t *testing.T) {
	got, _ := shellWords(`recommend --selector 'cgroup=~"/kubepods.*"' a.json > x.yaml # then`)
	want := []string{"recommend", "--selector", `cgroup=~"/kubepods.*"`, "a.json"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("shellWords: %q, want %q", got, want)
	}
	if _, err := shellWords(`run 'a`); err == "" {
		t.Error("shellWords: an unterminated quote is not an error")
	}
}

// TestHelpExamples runs every example of every command's help, the
// README and docs/ with
// --help (before a command's "--", which ends cfsprobe's own words): the
// binary parses the command line, flags and workload as it would to run
// it, and prints the help of what it found instead; an unknown command,
// flag or workload exits 2.
func TestHelpExamples(t *testing.T) {
	ex := helpExamples(t, newRoot())
	if len(ex) < 40 {
		t.Fatalf("found %d examples in the commands' help, expected at least 40", len(ex))
	}
	docs := docExamples(t)
	if len(docs) < 20 {
		t.Fatalf("found %d examples in the README and docs/, expected at least 20", len(docs))
	}
	t.Logf("%d examples in the commands' help, %d in the README and docs/", len(ex), len(docs))
	commands := map[string]bool{}
	for _, e := range append(ex, docs...) {
		args := append([]string(nil), e.args...)
		at := len(args)
		for i, a := range args {
			if a == "--" {
				at = i
				break
			}
		}
		args = append(args[:at:at], append([]string{"--help"}, args[at:]...)...)
		r := cfsprobe(t, args...)
		if r.code != 0 || r.stdout == "" {
			t.Errorf("%s shows `cfsprobe %s`, which cfsprobe does not take: exit %d\n%s", e.from, strings.Join(e.args, " "), r.code, r.stderr)
		}
		if strings.HasPrefix(e.from, "cfsprobe") {
			commands[e.args[0]] = true
		}
	}
	// Every command but the completion script's and help teaches by
	// example somewhere.
	for _, c := range newRoot().Commands() {
		if name := c.Name(); name != "completion" && name != "help" && !commands[name] {
			t.Errorf("no command's help shows an example of cfsprobe %s", name)
		}
	}
}
