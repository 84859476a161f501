package cpuview

import (
	"fmt"
	"strconv"
	"strings"
)

// The variables the library (native/cpuview) reads.
const (
	// EnvCPUs is the view: a whole number of CPUs, at least 1. Unset, the
	// library passes every call through.
	EnvCPUs = "CFSPROBE_CPUS"
	// EnvFollow lists the cpu-controller directories of the group and its
	// ancestors ("v1,DIR:v2,DIR"); the library then re-reads their quotas
	// (at most once a second) and follows the tightest.
	EnvFollow = "CFSPROBE_CPUS_FOLLOW"
	// EnvRound is the rounding the library applies when it follows.
	EnvRound = "CFSPROBE_CPUS_ROUND"
	// EnvDebug=1 makes the library say what it does on stderr.
	EnvDebug = "CFSPROBE_CPUS_DEBUG"
)

// RuntimeVars are read by runtimes and libraries that size their thread
// pools without asking libc (or before it), each set to the view's count
// unless the user set it already.
var RuntimeVars = []string{
	"GOMAXPROCS",             // Go
	"OMP_NUM_THREADS",        // OpenMP; coreutils nproc also honours it
	"OPENBLAS_NUM_THREADS",   // OpenBLAS (NumPy)
	"MKL_NUM_THREADS",        // Intel MKL
	"PYTHON_CPU_COUNT",       // Python 3.13+: os.cpu_count, os.process_cpu_count
	"DOTNET_PROCESSOR_COUNT", // .NET 6+: Environment.ProcessorCount
}

// JavaOptions is where -XX:ActiveProcessorCount goes: every JVM reads
// JAVA_TOOL_OPTIONS, and the option is appended to what is there.
const JavaOptions = "JAVA_TOOL_OPTIONS"

// FollowDir is one level the library re-reads.
type FollowDir struct {
	Version int
	Dir     string
}

// Settings are what a program is given to see CPUs CPUs.
type Settings struct {
	CPUs int
	// Follow, when set, lets the library follow changes of these groups'
	// quotas, rounded by Round.
	Follow []FollowDir
	Round  Rounding
	// Library is the path of the LD_PRELOAD library ("": none).
	Library string
	Debug   bool
}

// Change is one variable Merge set, or found set and kept.
type Change struct {
	Name  string `json:"name"`
	Value string `json:"value"`
	// Kept: the user had set it and the value is theirs.
	Kept bool `json:"kept,omitempty"`
}

// FollowValue encodes dirs for CFSPROBE_CPUS_FOLLOW. A directory with a
// ':' in its name cannot be listed: that is an error.
func FollowValue(dirs []FollowDir) (string, error) {
	parts := make([]string, 0, len(dirs))
	for _, d := range dirs {
		if strings.ContainsAny(d.Dir, ":\n") {
			return "", fmt.Errorf("directory %q has a ':' in its name, which %s cannot hold", d.Dir, EnvFollow)
		}
		parts = append(parts, fmt.Sprintf("v%d,%s", d.Version, d.Dir))
	}
	return strings.Join(parts, ":"), nil
}

// Merge applies the settings to environ ("K=V" entries, as os.Environ
// returns them). cfsprobe's own variables are set as given; the runtime
// variables only where the user has not set them (a non-empty value is
// kept); JAVA_TOOL_OPTIONS gets -XX:ActiveProcessorCount appended unless
// it has one; the library is put in front of LD_PRELOAD. It returns the
// new environment and every variable it set or kept, in a fixed order.
func Merge(environ []string, s Settings) ([]string, []Change) {
	env := newEnvList(environ)
	var ch []Change
	set := func(k, v string) {
		env.set(k, v)
		ch = append(ch, Change{Name: k, Value: v})
	}
	n := strconv.Itoa(s.CPUs)
	if s.Library != "" {
		cur := env.get(EnvPreload)
		switch {
		case cur == "":
			set(EnvPreload, s.Library)
		case containsField(cur, s.Library):
			ch = append(ch, Change{Name: EnvPreload, Value: cur, Kept: true})
		default:
			set(EnvPreload, s.Library+":"+cur)
		}
	}
	set(EnvCPUs, n)
	follow, err := FollowValue(s.Follow)
	switch {
	case len(s.Follow) > 0 && err == nil:
		set(EnvFollow, follow)
		r := s.Round
		if r == "" {
			r = Floor
		}
		set(EnvRound, string(r))
	case env.get(EnvFollow) != "":
		// A fixed view inside a followed one (exec --cpus N under exec
		// auto): the outer list would override N.
		set(EnvFollow, "")
	}
	if s.Debug {
		set(EnvDebug, "1")
	}
	for _, k := range RuntimeVars {
		if cur := env.get(k); cur != "" {
			ch = append(ch, Change{Name: k, Value: cur, Kept: true})
			continue
		}
		set(k, n)
	}
	opt := "-XX:ActiveProcessorCount=" + n
	switch cur := env.get(JavaOptions); {
	case strings.Contains(cur, "ActiveProcessorCount"):
		ch = append(ch, Change{Name: JavaOptions, Value: cur, Kept: true})
	case strings.TrimSpace(cur) == "":
		set(JavaOptions, opt)
	default:
		set(JavaOptions, cur+" "+opt)
	}
	return env.list(), ch
}

// EnvPreload is the dynamic loader's variable.
const EnvPreload = "LD_PRELOAD"

// containsField reports whether a LD_PRELOAD value (entries separated by
// ':' or spaces) already names lib.
func containsField(v, lib string) bool {
	for _, f := range strings.FieldsFunc(v, func(r rune) bool { return r == ':' || r == ' ' }) {
		if f == lib {
			return true
		}
	}
	return false
}

// Assignments turns the changes that were set (not kept) into "K=V"
// entries, to append to an environment (a later entry wins).
func Assignments(ch []Change) []string {
	var out []string
	for _, c := range ch {
		if !c.Kept {
			out = append(out, c.Name+"="+c.Value)
		}
	}
	return out
}

// envList is an environment in which the last entry of a name wins, as
// os/exec does with duplicates; list gives each name once.
type envList struct {
	keys []string
	vals map[string]string
}

func newEnvList(environ []string) *envList {
	e := &envList{vals: map[string]string{}}
	for _, kv := range environ {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			continue
		}
		if _, seen := e.vals[k]; !seen {
			e.keys = append(e.keys, k)
		}
		e.vals[k] = v
	}
	return e
}

func (e *envList) get(k string) string { return e.vals[k] }

func (e *envList) set(k, v string) {
	if _, seen := e.vals[k]; !seen {
		e.keys = append(e.keys, k)
	}
	e.vals[k] = v
}

func (e *envList) list() []string {
	out := make([]string, 0, len(e.keys))
	for _, k := range e.keys {
		out = append(out, k+"="+e.vals[k])
	}
	return out
}
