package suite

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cfsprobe/cfsprobe/internal/lab"
)

// Every invalid scenario file gives an error naming the file, the line and
// what to change, before anything runs (Steps validates with the lab but
// creates nothing; the errors below come before any cgroup is touched).
func TestInvalidFiles(t *testing.T) {
	cases := []struct {
		file string
		line int
		want []string
	}{
		{"bad-yaml.yaml", 4, []string{"did not find expected"}},
		{"unknown-field.yaml", 5, []string{`unknown field "limts"`}},
		{"impossible-limits.yaml", 8, []string{"scenarios[1].limits.burst: 30ms is above the quota 20ms: use 0 to 20ms"}},
		{"quota-too-small.yaml", 4, []string{"scenarios[0].limits.cpus: 0.002 (a quota of 200µs per 100ms period) is below the kernel's minimum of 1ms: use 0.01 or more"}},
		{"period-zero.yaml", 7, []string{"scenarios[0].limits.period: 0s is below the kernel's minimum of 1ms: use 1ms to 1s"}},
		{"cpus-too-many.yaml", 6, []string{"scenarios[0].limits.cpus: 1e9 is more CPU time per 100ms period than the kernel's maximum quota", "use 175000000 or less"}},
		{"quota-zero.yaml", 6, []string{"scenarios[0].limits.quota", "0 is no quota: leave quota: out for no limit"}},
		{"burst-negative.yaml", 7, []string{"scenarios[0].limits.burst: -5ms is negative: use 0 to 50ms"}},
		{"unknown-workload.yaml", 6, []string{"scenarios[1].workload", `unknown workload "spinny"`}},
		{"bad-workload-flag.yaml", 5, []string{"scenarios[0].args", "--burn"}},
		{"unknown-metric.yaml", 6, []string{"scenarios[0].expect.throttle_ratio", `unknown metric "throttle_ratio"`, "throttled_ratio"}},
		{"unknown-var.yaml", 5, []string{"scenarios[0].args[1]", "unknown variable {duraton}"}},
		{"compare-unknown.yaml", 6, []string{"scenarios[0].compare[0].to", `"b" is not another scenario`}},
		{"empty.yaml", 0, []string{"empty"}},
	}
	for _, c := range cases {
		t.Run(c.file, func(t *testing.T) {
			path := filepath.Join("testdata", "invalid", c.file)
			s, err := LoadFile(path)
			if err == nil {
				_, err = s.Steps(Env{CPUs: 2}, lab.Config{})
			}
			if err == nil {
				t.Fatal("no error")
			}
			var fe *Error
			if !errors.As(err, &fe) {
				t.Fatalf("error %q is not a *suite.Error", err)
			}
			if fe.Path != path || fe.Line != c.line {
				t.Errorf("error at %s:%d, want %s:%d (%v)", fe.Path, fe.Line, path, c.line, err)
			}
			prefix := path + ":"
			if c.line > 0 && !strings.HasPrefix(err.Error(), prefix) {
				t.Errorf("%q does not start with %q", err, prefix)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%q does not mention %q", err, w)
				}
			}
		})
	}
}

// The built-in suites parse, and --show's YAML is what -f reads.
func TestBuiltinSuites(t *testing.T) {
	all, err := Builtin()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range all {
		names = append(names, s.Suite)
		src, err := BuiltinSource(s.Suite)
		if err != nil {
			t.Fatalf("no source for %s: %v", s.Suite, err)
		}
		p := filepath.Join(t.TempDir(), s.Suite+".yaml")
		if err := os.WriteFile(p, src, 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := LoadFile(p); err != nil {
			t.Errorf("%s as a file: %v", s.Suite, err)
		}
		for _, quick := range []bool{false, true} {
			for i := range s.Scenarios {
				sc := &s.Scenarios[i]
				if _, _, err := s.limits(sc, Env{CPUs: 2, Quick: quick}); err != nil {
					t.Errorf("%s/%s limits: %v", s.Suite, sc.Name, err)
				}
				for _, a := range sc.Args {
					if _, err := s.expand(a, Env{CPUs: 16, Quick: quick}); err != nil {
						t.Errorf("%s/%s: %v", s.Suite, sc.Name, err)
					}
				}
			}
		}
	}
	if got := strings.Join(names, " "); got != "aggressive-cfs burst bursty-limits threads-vs-quota" {
		t.Errorf("built-in suites: %s", got)
	}
}

// {cpus} expressions scale a suite to the host.
func TestExpand(t *testing.T) {
	s := &Suite{File: File{Vars: map[string]Var{"duration": {Full: "30s", Quick: "5s"}, "n": {Full: "100", Quick: "20"}}}}
	cases := []struct {
		in   string
		env  Env
		want string
	}{
		{"{cpus}", Env{CPUs: 16}, "16"},
		{"{cpus/2}", Env{CPUs: 16}, "8"},
		{"{cpus/2}", Env{CPUs: 2}, "1"},
		{"{cpus*2}", Env{CPUs: 2}, "4"},
		{"{cpus/4}", Env{CPUs: 2}, "0.5"},
		{"{duration}", Env{}, "30s"},
		{"{duration}", Env{Quick: true}, "5s"},
		{"{duration*2}", Env{Quick: true}, "10s"},
		{"{n}", Env{Quick: true}, "20"},
		{"--x={ cpus }", Env{CPUs: 3}, "--x=3"},
	}
	for _, c := range cases {
		got, err := s.expand(c.in, c.env)
		if err != nil || got != c.want {
			t.Errorf("expand(%q, %+v) = %q, %v; want %q", c.in, c.env, got, err, c.want)
		}
	}
	for _, bad := range []string{"{nope}", "{cpus", "{cpus/0}"} {
		if _, err := s.expand(bad, Env{CPUs: 2}); err == nil {
			t.Errorf("expand(%q): no error", bad)
		}
	}
}

// Select keeps the scenarios named and those they compare to, drops a
// suite left with none, and names the scenarios there are when a name
// is not one of them.
func TestSelect(t *testing.T) {
	burst, err := Load("burst")
	if err != nil {
		t.Fatal(err)
	}
	bl, err := Load("bursty-limits")
	if err != nil {
		t.Fatal(err)
	}
	names := func(ss []*Suite) (out []string) {
		for _, s := range ss {
			for _, sc := range s.Scenarios {
				out = append(out, s.Suite+"/"+sc.Name)
			}
		}
		return out
	}
	for _, tc := range []struct {
		pick []string
		want []string
	}{
		{[]string{"burst-20ms"}, []string{"burst/no-burst", "burst/burst-20ms"}},
		{[]string{"no-burst"}, []string{"burst/no-burst"}},
		{[]string{"C-aggressive", "B-moderate"}, []string{"bursty-limits/B-moderate", "bursty-limits/C-aggressive"}},
	} {
		got, err := Select([]*Suite{burst, bl}, tc.pick)
		if err != nil || !slices.Equal(names(got), tc.want) {
			t.Errorf("Select(%v) = %v, %v; want %v", tc.pick, names(got), err, tc.want)
		}
	}
	if len(burst.Scenarios) != 2 || len(bl.Scenarios) != 4 {
		t.Errorf("Select changed the suites it was given: %d and %d scenarios", len(burst.Scenarios), len(bl.Scenarios))
	}
	if _, err := Select([]*Suite{burst}, []string{"no-burst", "A-unlimited"}); err == nil || !strings.Contains(err.Error(), `"A-unlimited"`) || !strings.Contains(err.Error(), "no-burst, burst-20ms") {
		t.Errorf("an unknown scenario: %v", err)
	}
}
