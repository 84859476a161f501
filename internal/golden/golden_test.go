package golden

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// With rewrite, compare writes the file (and its directories); without,
// it accepts exactly those bytes and names the file otherwise.
func TestCompare(t *testing.T) {
	path := filepath.Join(t.TempDir(), "golden", "case.txt")
	if err := compare(path, []byte("a\n"), false); err == nil || !strings.Contains(err.Error(), "golden file "+path+" does not exist") {
		t.Errorf("missing file: %v", err)
	}
	if err := compare(path, []byte("a\nb\n"), true); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(path); err != nil || string(b) != "a\nb\n" {
		t.Fatalf("rewrite wrote %q, %v", b, err)
	}
	if err := compare(path, []byte("a\nb\n"), false); err != nil {
		t.Errorf("same bytes: %v", err)
	}
	err := compare(path, []byte("a\nc\n"), false)
	if err == nil || !strings.Contains(err.Error(), path) || !strings.HasSuffix(err.Error(), "@@ line 2\n- b\n+ c") {
		t.Errorf("different bytes: %v", err)
	}
}

func TestDiff(t *testing.T) {
	long := strings.Repeat("x\n", maxShown+5)
	cases := []struct{ name, want, got, diff string }{
		{"middle line", "a\nb\nc\n", "a\nB\nc\n", "@@ line 2\n- b\n+ B"},
		{"line added", "a\nc\n", "a\nb\nc\n", "@@ line 2\n+ b"},
		{"line removed", "a\nb\nc\n", "a\nc\n", "@@ line 2\n- b"},
		{"first line", "a\nb\n", "z\nb\n", "@@ line 1\n- a\n+ z"},
		{"newline at the end", "a\n", "a", "@@ line 1\n- a\n+ a (no newline at the end)"},
		{"empty output", "a\n", "", "@@ line 1\n- a"},
		{"long", "", long, "@@ line 1\n" + strings.Repeat("+ x\n", maxShown) + "+ ... (5 more lines)"},
	}
	for _, c := range cases {
		if got := Diff(c.want, c.got); got != c.diff {
			t.Errorf("%s: diff is\n%s\nwant\n%s", c.name, got, c.diff)
		}
	}
}
