package cache

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestWrite(t *testing.T) {
	base := t.TempDir()
	dir := filepath.Join(base, "c")
	p, err := Write([]byte("one"), []string{dir}, "x-", ".bin", 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(filepath.Base(p), "x-") || !strings.HasSuffix(p, ".bin") || filepath.Dir(p) != dir {
		t.Errorf("path %s", p)
	}
	if fi, err := os.Stat(p); err != nil || fi.Mode().Perm() != 0o755 {
		t.Errorf("mode: %v %v", fi, err)
	}
	if fi, err := os.Stat(dir); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("directory mode: %v %v", fi, err)
	}
	// Same content: the same file, untouched.
	st1, _ := os.Stat(p)
	p2, err := Write([]byte("one"), []string{dir}, "x-", ".bin", 0o755)
	st2, _ := os.Stat(p2)
	if err != nil || p2 != p || !os.SameFile(st1, st2) {
		t.Errorf("rewrite of the same content: %s %v", p2, err)
	}
	// A damaged file is replaced.
	if err := os.WriteFile(p, []byte("on"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := Write([]byte("one"), []string{dir}, "x-", ".bin", 0o755); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(p); string(b) != "one" {
		t.Errorf("damaged file not replaced: %q", b)
	}
	// Other content: another name.
	if p3, err := Write([]byte("two"), []string{dir}, "x-", ".bin", 0o755); err != nil || p3 == p {
		t.Errorf("other content: %s %v", p3, err)
	}
	// No temporary files left.
	if m, _ := filepath.Glob(filepath.Join(dir, ".tmp-*")); len(m) > 0 {
		t.Errorf("left behind: %v", m)
	}
}

func TestWriteRefusesSharedDirs(t *testing.T) {
	base := t.TempDir()
	open := filepath.Join(base, "open")
	if err := os.Mkdir(open, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(open, 0o777); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(base, "link")
	if err := os.Symlink(t.TempDir(), link); err != nil {
		t.Fatal(err)
	}
	if _, err := Write([]byte("x"), []string{open, link}, "x-", "", 0o644); err == nil ||
		!strings.Contains(err.Error(), "written by others") || !strings.Contains(err.Error(), "not a directory") {
		t.Errorf("world-writable and symlinked directories: %v", err)
	}
	// The next usable directory is taken.
	good := filepath.Join(base, "good")
	if p, err := Write([]byte("x"), []string{open, good}, "x-", "", 0o644); err != nil || filepath.Dir(p) != good {
		t.Errorf("fallback: %s %v", p, err)
	}
}

func TestDirs(t *testing.T) {
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	d := Dirs(env(map[string]string{"XDG_CACHE_HOME": "/x", "HOME": "/h"}))
	if d[0] != "/x/cfsprobe" || !strings.Contains(d[len(d)-1], "cfsprobe-") {
		t.Errorf("%v", d)
	}
	if d := Dirs(env(map[string]string{"XDG_CACHE_HOME": "rel", "HOME": "/h"})); d[0] != "/h/.cache/cfsprobe" {
		t.Errorf("relative XDG_CACHE_HOME: %v", d)
	}
	if d := Dirs(env(nil)); len(d) != 1 {
		t.Errorf("no HOME: %v", d)
	}
}
