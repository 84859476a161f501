package cpuview

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cfsprobe/cfsprobe/internal/testenv"
)

// buildC compiles a one-line C program with extra gcc flags.
func buildC(t *testing.T, name string, flags ...string) string {
	t.Helper()
	if _, err := exec.LookPath("gcc"); err != nil {
		if testenv.Required() {
			t.Fatal("gcc not installed (make deps installs it)")
		}
		t.Skip("gcc not installed")
	}
	dir := t.TempDir()
	src := filepath.Join(dir, "p.c")
	if err := os.WriteFile(src, []byte("int main(void){return 0;}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, name)
	args := append([]string{"-o", out, src}, flags...)
	if b, err := exec.Command("gcc", args...).CombinedOutput(); err != nil {
		t.Fatalf("gcc %v: %v\n%s", args, err, b)
	}
	return out
}

func TestProgramLoader(t *testing.T) {
	script := filepath.Join(t.TempDir(), "s.sh")
	if err := os.WriteFile(script, []byte("#!/bin/sh\nexit 0\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, path string
		want       Loader
		interp     string
	}{
		{"glibc", buildC(t, "glibc"), LoaderGlibc, "ld-linux"},
		{"static", buildC(t, "static", "-static"), LoaderStatic, ""},
		{"musl", buildC(t, "musl", "-Wl,--dynamic-linker=/lib/ld-musl-x86_64.so.1"), LoaderMusl, "/lib/ld-musl-x86_64.so.1"},
		{"script", script, LoaderOther, ""},
	} {
		got, interp, err := ProgramLoader(tc.path)
		if err != nil || got != tc.want || !strings.Contains(interp, tc.interp) {
			t.Errorf("%s: %s %q %v, want %s with interpreter %q", tc.name, got, interp, err, tc.want, tc.interp)
		}
	}
	if _, _, err := ProgramLoader(filepath.Join(t.TempDir(), "missing")); err == nil {
		t.Error("a missing program: no error")
	}
}

// A musl program would not start with the glibc library preloaded: the
// plan leaves LD_PRELOAD as the user had it and says why.
func TestForProgram(t *testing.T) {
	plan := func() *ExecPlan {
		p := PrepareExec(ExecOptions{CPUs: 1, Environ: []string{"LD_PRELOAD=/mine.so", "PATH=/bin"}, Library: []byte("lib"), CacheDirs: []string{t.TempDir()}})
		if p.Library == "" {
			t.Fatalf("no library written: %v", p.Warnings)
		}
		return p
	}
	env := func(p *ExecPlan) string {
		for _, kv := range p.Env {
			if v, ok := strings.CutPrefix(kv, "LD_PRELOAD="); ok {
				return v
			}
		}
		return ""
	}
	p := plan()
	if w := p.ForProgram(buildC(t, "musl", "-Wl,--dynamic-linker=/lib/ld-musl-x86_64.so.1")); len(w) != 1 || !strings.Contains(w[0], "musl") {
		t.Errorf("musl: warnings %q", w)
	}
	if got := env(p); got != "/mine.so" || p.Library != "" {
		t.Errorf("musl: LD_PRELOAD=%q library %q, want the user's /mine.so alone", got, p.Library)
	}
	if !strings.Contains(strings.Join(p.Env, " "), "GOMAXPROCS=1") {
		t.Errorf("musl: the variables are gone: %v", p.Env)
	}

	p = plan()
	if w := p.ForProgram(buildC(t, "glibc")); len(w) != 0 {
		t.Errorf("glibc: warnings %q", w)
	}
	if got := env(p); !strings.HasPrefix(got, p.Library+":") || !strings.HasSuffix(got, ":/mine.so") {
		t.Errorf("glibc: LD_PRELOAD=%q, want the library in front of /mine.so", got)
	}

	p = plan()
	if w := p.ForProgram(buildC(t, "static", "-static")); len(w) != 1 || !strings.Contains(w[0], "statically linked") {
		t.Errorf("static: warnings %q", w)
	}
	if got := env(p); !strings.HasPrefix(got, p.Library) {
		t.Errorf("static: LD_PRELOAD=%q: programs it starts should still get the library", got)
	}
}
