package cpuview

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cfsprobe/cfsprobe/internal/cgroup"
)

func envMap(env []string) map[string]string {
	m := map[string]string{}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		if _, dup := m[k]; dup {
			panic("duplicate " + k)
		}
		m[k] = v
	}
	return m
}

// Must show 5: a value the user set (GOMAXPROCS=3) is kept; the others
// are set; JAVA_TOOL_OPTIONS is appended to; LD_PRELOAD is prepended to.
func TestMergeKeepsUserValues(t *testing.T) {
	environ := []string{
		"PATH=/usr/bin", "GOMAXPROCS=3", "OMP_NUM_THREADS=", "JAVA_TOOL_OPTIONS=-Xmx1g",
		"LD_PRELOAD=/usr/lib/libjemalloc.so", "PATH=/bin",
	}
	env, ch := Merge(environ, Settings{CPUs: 1, Library: "/cache/lib.so"})
	m := envMap(env)
	want := map[string]string{
		"PATH":                   "/bin",
		"GOMAXPROCS":             "3",
		"OMP_NUM_THREADS":        "1", // empty counts as unset
		"OPENBLAS_NUM_THREADS":   "1",
		"MKL_NUM_THREADS":        "1",
		"PYTHON_CPU_COUNT":       "1",
		"DOTNET_PROCESSOR_COUNT": "1",
		"JAVA_TOOL_OPTIONS":      "-Xmx1g -XX:ActiveProcessorCount=1",
		"LD_PRELOAD":             "/cache/lib.so:/usr/lib/libjemalloc.so",
		"CFSPROBE_CPUS":          "1",
	}
	for k, v := range want {
		if m[k] != v {
			t.Errorf("%s=%q, want %q", k, m[k], v)
		}
	}
	if _, ok := m[EnvFollow]; ok {
		t.Errorf("%s set without levels to follow", EnvFollow)
	}
	if len(m) != len(want) {
		t.Errorf("environment %v has more than %v", m, want)
	}
	var kept []string
	for _, c := range ch {
		if c.Kept {
			kept = append(kept, c.Name)
		}
	}
	if !slices.Equal(kept, []string{"GOMAXPROCS"}) {
		t.Errorf("kept %v, want [GOMAXPROCS]", kept)
	}
	if a := Assignments(ch); slices.Contains(a, "GOMAXPROCS=3") || slices.Contains(a, "GOMAXPROCS=1") {
		t.Errorf("assignments %v touch GOMAXPROCS", a)
	}
}

func TestMergeJavaAndPreloadCases(t *testing.T) {
	cases := []struct {
		environ   []string
		java, pre string
	}{
		{nil, "-XX:ActiveProcessorCount=2", "/c/lib.so"},
		{[]string{"JAVA_TOOL_OPTIONS=-XX:ActiveProcessorCount=8"}, "-XX:ActiveProcessorCount=8", "/c/lib.so"},
		{[]string{"JAVA_TOOL_OPTIONS=  "}, "-XX:ActiveProcessorCount=2", "/c/lib.so"},
		{[]string{"LD_PRELOAD=/x.so /c/lib.so"}, "-XX:ActiveProcessorCount=2", "/x.so /c/lib.so"},
	}
	for _, c := range cases {
		env, _ := Merge(c.environ, Settings{CPUs: 2, Library: "/c/lib.so"})
		m := envMap(env)
		if m["JAVA_TOOL_OPTIONS"] != c.java {
			t.Errorf("%v: JAVA_TOOL_OPTIONS=%q, want %q", c.environ, m["JAVA_TOOL_OPTIONS"], c.java)
		}
		if m["LD_PRELOAD"] != c.pre {
			t.Errorf("%v: LD_PRELOAD=%q, want %q", c.environ, m["LD_PRELOAD"], c.pre)
		}
	}
	// Without a library, LD_PRELOAD is left alone.
	env, _ := Merge([]string{"LD_PRELOAD=/x.so"}, Settings{CPUs: 2})
	if m := envMap(env); m["LD_PRELOAD"] != "/x.so" {
		t.Errorf("LD_PRELOAD=%q without a library, want /x.so", m["LD_PRELOAD"])
	}
}

func TestMergeFollow(t *testing.T) {
	env, _ := Merge(nil, Settings{CPUs: 1, Round: Ceil, Debug: true, Follow: []FollowDir{
		{1, "/sys/fs/cgroup/cpu,cpuacct/a/b"}, {1, "/sys/fs/cgroup/cpu,cpuacct/a"},
	}})
	m := envMap(env)
	if got, want := m[EnvFollow], "v1,/sys/fs/cgroup/cpu,cpuacct/a/b:v1,/sys/fs/cgroup/cpu,cpuacct/a"; got != want {
		t.Errorf("%s=%q, want %q", EnvFollow, got, want)
	}
	if m[EnvRound] != "ceil" || m[EnvDebug] != "1" {
		t.Errorf("round %q debug %q", m[EnvRound], m[EnvDebug])
	}
	// A fixed view under a followed one empties the list (the library
	// ignores an empty one).
	env, _ = Merge(env, Settings{CPUs: 3})
	if m := envMap(env); m[EnvFollow] != "" || m[EnvCPUs] != "3" {
		t.Errorf("fixed view inside a followed one: %s=%q %s=%q", EnvFollow, m[EnvFollow], EnvCPUs, m[EnvCPUs])
	}
	if _, err := FollowValue([]FollowDir{{2, "/sys/fs/cgroup/a:b"}}); err == nil {
		t.Error("a ':' in a directory: want an error")
	}
}

// Must show 7: with no quota (and with an unreadable quota file), exec's
// view is the real CPU count, with a warning; nothing fails.
func TestPrepareExecFallsBack(t *testing.T) {
	for _, name := range []string{"v1-no-quota", "v1-unreadable", "v2-no-cpu-controller"} {
		fs := fixture(name)
		p := PrepareExec(ExecOptions{FS: fs, Environ: []string{"GOMAXPROCS=3"}})
		if p.CPUs != 2 {
			t.Errorf("%s: view %d CPUs, want the real count 2", name, p.CPUs)
		}
		if !containsSub(p.Warnings, "the view is the CPU count (2)") {
			t.Errorf("%s: warnings %q do not say the view is the CPU count", name, p.Warnings)
		}
		if !containsSub(p.Warnings, "built without the cpuview library") {
			t.Errorf("%s: no warning about the missing library: %q", name, p.Warnings)
		}
		m := envMap(p.Env)
		if m["GOMAXPROCS"] != "3" || m["OMP_NUM_THREADS"] != "2" || m[EnvCPUs] != "2" {
			t.Errorf("%s: env %v", name, m)
		}
		if _, ok := m["LD_PRELOAD"]; ok {
			t.Errorf("%s: LD_PRELOAD set without a library", name)
		}
	}
}

func TestPrepareExecAuto(t *testing.T) {
	lib := []byte("\x7fELF not really a library")
	cache := t.TempDir()
	cases := []struct {
		fixture string
		round   Rounding
		want    int
		follow  string
	}{
		{"v1-comounted-one-and-half", Floor, 1, "v1,testdata/v1-comounted-one-and-half/sys/fs/cgroup/cpu,cpuacct/system.slice/app.service:" +
			"v1,testdata/v1-comounted-one-and-half/sys/fs/cgroup/cpu,cpuacct/system.slice:v1,testdata/v1-comounted-one-and-half/sys/fs/cgroup/cpu,cpuacct"},
		{"v1-comounted-one-and-half", Ceil, 2, ""},
		{"v1-comounted-one-and-half", Nearest, 2, ""},
		// The v2 root has no cpu.max: it is not followed.
		{"v2-parent-tighter", Floor, 1, "v2,testdata/v2-parent-tighter/sys/fs/cgroup/a/b/c:v2,testdata/v2-parent-tighter/sys/fs/cgroup/a/b:v2,testdata/v2-parent-tighter/sys/fs/cgroup/a"},
	}
	for _, c := range cases {
		fs := fixture(c.fixture)
		p := PrepareExec(ExecOptions{FS: fs, Round: c.round, Library: lib, CacheDirs: []string{filepath.Join(cache, "cfsprobe")}})
		if p.CPUs != c.want {
			t.Errorf("%s %s: %d CPUs, want %d", c.fixture, c.round, p.CPUs, c.want)
		}
		if len(p.Warnings) != 0 {
			t.Errorf("%s: warnings %q", c.fixture, p.Warnings)
		}
		m := envMap(p.Env)
		if c.follow != "" && m[EnvFollow] != c.follow {
			t.Errorf("%s: %s=%q, want %q", c.fixture, EnvFollow, m[EnvFollow], c.follow)
		}
		if m[EnvRound] != string(c.round) {
			t.Errorf("%s: %s=%q, want %q", c.fixture, EnvRound, m[EnvRound], c.round)
		}
		if p.Library == "" || m["LD_PRELOAD"] != p.Library {
			t.Errorf("%s: library %q, LD_PRELOAD %q", c.fixture, p.Library, m["LD_PRELOAD"])
		}
	}
}

// A given count is used as it is (no following), but not above the CPUs
// the process may use.
func TestPrepareExecFixed(t *testing.T) {
	fs := fixture("v1-apart-one")
	p := PrepareExec(ExecOptions{CPUs: 2, FS: fs})
	if m := envMap(p.Env); p.CPUs != 2 || m[EnvCPUs] != "2" || m[EnvFollow] != "" || m[EnvRound] != "" {
		t.Errorf("fixed 2: CPUs %d env %v", p.CPUs, m)
	}
	p = PrepareExec(ExecOptions{CPUs: 8, FS: fs})
	if p.CPUs != 2 || !containsSub(p.Warnings, "--cpus 8 is more than the 2 CPUs") {
		t.Errorf("fixed 8 on 2 CPUs: %d, %q", p.CPUs, p.Warnings)
	}
}

// run --view auto rounds the run's own limits.
func TestPrepareExecForLimits(t *testing.T) {
	fs := fixture("v1-apart-one") // 2 CPUs
	for _, c := range []struct {
		lim   cgroup.Limits
		round Rounding
		want  int
	}{
		{cgroup.Limits{Period: 100 * time.Millisecond, Quota: 150 * time.Millisecond}, Floor, 1},
		{cgroup.Limits{Period: 100 * time.Millisecond, Quota: 150 * time.Millisecond}, Ceil, 2},
		{cgroup.Limits{Period: 100 * time.Millisecond, Quota: 50 * time.Millisecond}, Floor, 1},
		{cgroup.Limits{Quota: 30 * time.Millisecond, Period: 10 * time.Millisecond}, Floor, 2}, // 3 CPUs on 2
		{cgroup.Limits{Period: 100 * time.Millisecond}, Floor, 2},
		{cgroup.Limits{Period: 100 * time.Millisecond, Cpuset: "1"}, Floor, 1},
	} {
		lim := c.lim
		p := PrepareExec(ExecOptions{Limits: &lim, Round: c.round, FS: fs})
		if p.CPUs != c.want {
			t.Errorf("%+v %s: %d CPUs, want %d", c.lim, c.round, p.CPUs, c.want)
		}
		if m := envMap(p.Env); m[EnvFollow] != "" {
			t.Errorf("%+v: follows %q: the run's group is not known yet", c.lim, m[EnvFollow])
		}
		tv := p.TraceView()
		if tv.CPUs != c.want || !tv.Auto || tv.Round != string(c.round) || tv.Library {
			t.Errorf("trace view %+v", tv)
		}
	}
}

func containsSub(list []string, sub string) bool {
	for _, s := range list {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}

func TestExtractLibrary(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "cache", "cfsprobe")
	lib := []byte("library one")
	p1, err := ExtractLibrary(lib, []string{dir})
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(p1); !bytes.Equal(b, lib) {
		t.Errorf("%s holds %q", p1, b)
	}
	fi, err := os.Stat(dir)
	if err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("cache dir mode %v (%v), want 0700", fi.Mode().Perm(), err)
	}
	st1, _ := os.Stat(p1)
	p2, err := ExtractLibrary(lib, []string{dir})
	if err != nil || p2 != p1 {
		t.Fatalf("second extraction: %s, %v", p2, err)
	}
	if st2, _ := os.Stat(p2); !os.SameFile(st1, st2) {
		t.Error("an identical library was written again instead of reused")
	}
	p3, err := ExtractLibrary([]byte("library two"), []string{dir})
	if err != nil || p3 == p1 {
		t.Errorf("another library got %s (%v), want a new name", p3, err)
	}
	// A damaged file under the right name is replaced.
	if err := os.WriteFile(p1, []byte("damaged"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ExtractLibrary(lib, []string{dir}); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(p1); !bytes.Equal(b, lib) {
		t.Errorf("damaged library not replaced: %q", b)
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".tmp") {
			t.Errorf("temporary file %s left", e.Name())
		}
	}
	// A directory others may write to is refused, and the next one used.
	open := filepath.Join(t.TempDir(), "open")
	if err := os.Mkdir(open, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(open, 0o777); err != nil {
		t.Fatal(err)
	}
	p4, err := ExtractLibrary(lib, []string{open, dir})
	if err != nil || filepath.Dir(p4) != dir {
		t.Errorf("got %s (%v), want the library in %s, not in the world-writable %s", p4, err, dir, open)
	}
	if _, err := ExtractLibrary(nil, []string{dir}); err != ErrNoLibrary {
		t.Errorf("no library: %v", err)
	}
}

func TestCacheDirs(t *testing.T) {
	env := map[string]string{"XDG_CACHE_HOME": "/x/cache", "HOME": "/home/u"}
	got := CacheDirs(func(k string) string { return env[k] })
	if got[0] != "/x/cache/cfsprobe" || !strings.HasPrefix(filepath.Base(got[1]), "cfsprobe-") {
		t.Errorf("%v", got)
	}
	delete(env, "XDG_CACHE_HOME")
	if got := CacheDirs(func(k string) string { return env[k] }); got[0] != "/home/u/.cache/cfsprobe" {
		t.Errorf("%v", got)
	}
	if got := CacheDirs(func(string) string { return "" }); len(got) != 1 {
		t.Errorf("without HOME: %v, want only the temporary directory", got)
	}
}
