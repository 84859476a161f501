// Package suite reads scenario files (a matrix of cfsprobe runs with
// expectations), runs them through the lab and turns the numbers into
// verdicts. The built-in suites reproduce the published experiments the
// project was created from; they are the same YAML, embedded.
package suite

import (
	"bytes"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// File is a scenario file as written.
type File struct {
	Suite       string `yaml:"suite"`
	Description string `yaml:"description"`
	Source      string `yaml:"source"`
	// Vars are substituted for {name} in scenario args and limits; each
	// has a full and a quick value.
	Vars map[string]Var `yaml:"vars"`
	// Verdict words the suite's conclusion when every scenario passes
	// and when some fails.
	Verdict   VerdictText `yaml:"verdict"`
	Scenarios []Scenario  `yaml:"scenarios"`
}

// Var is a value with a full and a --quick form.
type Var struct {
	Full  string `yaml:"full"`
	Quick string `yaml:"quick"`
}

// VerdictText is what the suite concludes.
type VerdictText struct {
	Pass string `yaml:"pass"`
	Fail string `yaml:"fail"`
}

// Scenario is one cell of the matrix.
type Scenario struct {
	Name        string     `yaml:"name"`
	Description string     `yaml:"description"`
	Limits      LimitsSpec `yaml:"limits"`
	// Workload is a built-in workload with Args, or "command" with Command.
	Workload string   `yaml:"workload"`
	Args     []string `yaml:"args"`
	Command  []string `yaml:"command"`
	Repeat   int      `yaml:"repeat"`
	// Expect bounds metrics of the run (see Metrics).
	Expect map[string]Bound `yaml:"expect"`
	// Compare bounds a metric relative to another scenario's.
	Compare []Comparison `yaml:"compare"`
}

// LimitsSpec is written like cfsprobe run's flags. Strings may hold
// {var} expressions.
type LimitsSpec struct {
	CPUs   string `yaml:"cpus"`
	Quota  string `yaml:"quota"`
	Period string `yaml:"period"`
	Burst  string `yaml:"burst"`
	Cpuset string `yaml:"cpuset"`
}

// Bound is a closed interval; either end may be missing. Values are
// numbers, or durations ("7ms") for latency metrics.
type Bound struct {
	Min *Value `yaml:"min"`
	Max *Value `yaml:"max"`
}

// Comparison bounds metric(this) / metric(To).
type Comparison struct {
	To       string `yaml:"to"`
	Metric   string `yaml:"metric"`
	MinRatio *Value `yaml:"min_ratio"`
	MaxRatio *Value `yaml:"max_ratio"`
}

// Value is a number or a duration (in ns).
type Value struct {
	V    float64
	Text string
}

// UnmarshalYAML accepts 0.95, 95%, 7ms.
func (v *Value) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return fmt.Errorf("line %d: want a number or a duration, not a %s", n.Line, kindName(n.Kind))
	}
	s := strings.TrimSpace(n.Value)
	v.Text = s
	if p, ok := strings.CutSuffix(s, "%"); ok {
		f, err := strconv.ParseFloat(p, 64)
		if err != nil {
			return fmt.Errorf("line %d: %q is not a percentage", n.Line, s)
		}
		v.V = f / 100
		return nil
	}
	if f, err := strconv.ParseFloat(s, 64); err == nil {
		v.V = f
		return nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("line %d: %q is neither a number nor a duration like 7ms", n.Line, s)
	}
	v.V = float64(d)
	return nil
}

func kindName(k yaml.Kind) string {
	switch k {
	case yaml.MappingNode:
		return "mapping"
	case yaml.SequenceNode:
		return "list"
	}
	return "value"
}

// Suite is a parsed, checked scenario file.
type Suite struct {
	File
	// Path is where it came from ("builtin:NAME" for embedded suites).
	Path  string
	lines map[string]int
}

// Error is a problem in a scenario file, with its place.
type Error struct {
	Path  string
	Line  int
	Field string // "scenarios[2].limits.cpus"
	Msg   string
}

func (e *Error) Error() string {
	loc := e.Path
	if e.Line > 0 {
		loc = fmt.Sprintf("%s:%d", e.Path, e.Line)
	}
	if e.Field != "" {
		return fmt.Sprintf("%s: %s: %s", loc, e.Field, e.Msg)
	}
	return fmt.Sprintf("%s: %s", loc, e.Msg)
}

var yamlLineRE = regexp.MustCompile(`^(?:yaml: )?line (\d+): (.*)$`)

// Parse reads a scenario file. Unknown fields, bad syntax and missing
// required fields are errors naming the file, line and field.
func Parse(path string, data []byte) (*Suite, error) {
	var f File
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil {
		return nil, yamlError(path, err)
	}
	var root yaml.Node
	_ = yaml.Unmarshal(data, &root)
	s := &Suite{File: f, Path: path, lines: map[string]int{}}
	collectLines(&root, "", s.lines)
	if err := s.check(); err != nil {
		return nil, err
	}
	return s, nil
}

// yamlError turns yaml/v3's messages into file:line errors.
func yamlError(path string, err error) error {
	var te *yaml.TypeError
	if errors.As(err, &te) && len(te.Errors) > 0 {
		err = errors.New(te.Errors[0])
	}
	msg := err.Error()
	if m := yamlLineRE.FindStringSubmatch(msg); m != nil {
		line, _ := strconv.Atoi(m[1])
		inner := m[2]
		inner = strings.Replace(inner, "not found in type suite.", "is not known in ", 1)
		if fm := regexp.MustCompile(`^field (\S+) is not known in (\w+)$`).FindStringSubmatch(inner); fm != nil {
			inner = fmt.Sprintf("unknown field %q in %s (see docs/suites.md)", fm[1], strings.ToLower(fm[2]))
		}
		return &Error{Path: path, Line: line, Msg: inner}
	}
	if errors.Is(err, errEOF) || msg == "EOF" {
		return &Error{Path: path, Msg: "the file is empty"}
	}
	return &Error{Path: path, Msg: msg}
}

var errEOF = errors.New("EOF")

// collectLines maps dotted paths ("scenarios.2.limits.cpus") to lines.
func collectLines(n *yaml.Node, prefix string, out map[string]int) {
	switch n.Kind {
	case yaml.DocumentNode:
		for _, c := range n.Content {
			collectLines(c, prefix, out)
		}
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := n.Content[i]
			p := join(prefix, k.Value)
			out[p] = k.Line
			collectLines(n.Content[i+1], p, out)
		}
	case yaml.SequenceNode:
		for i, c := range n.Content {
			p := join(prefix, strconv.Itoa(i))
			out[p] = c.Line
			collectLines(c, p, out)
		}
	}
}

func join(a, b string) string {
	if a == "" {
		return b
	}
	return a + "." + b
}

// errAt builds an Error for a dotted field path, finding its line (or the
// nearest enclosing one).
func (s *Suite) errAt(path, msg string, a ...any) *Error {
	line := 0
	for p := path; p != ""; {
		if l, ok := s.lines[p]; ok {
			line = l
			break
		}
		i := strings.LastIndexByte(p, '.')
		if i < 0 {
			break
		}
		p = p[:i]
	}
	return &Error{Path: s.Path, Line: line, Field: prettyPath(path), Msg: fmt.Sprintf(msg, a...)}
}

// prettyPath writes scenarios.2.limits as scenarios[2].limits.
func prettyPath(p string) string {
	parts := strings.Split(p, ".")
	var b strings.Builder
	for i, x := range parts {
		if _, err := strconv.Atoi(x); err == nil {
			fmt.Fprintf(&b, "[%s]", x)
			continue
		}
		if i > 0 {
			b.WriteByte('.')
		}
		b.WriteString(x)
	}
	return b.String()
}

var nameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*$`)

// check validates what does not depend on the host.
func (s *Suite) check() error {
	if s.Suite == "" {
		return s.errAt("suite", "missing: give the suite a name (suite: my-suite)")
	}
	if !nameRE.MatchString(s.Suite) {
		return s.errAt("suite", "%q: use letters, digits, '.', '_' and '-'", s.Suite)
	}
	if len(s.Scenarios) == 0 {
		return s.errAt("scenarios", "no scenarios: add at least one under scenarios:")
	}
	for name, v := range s.Vars {
		if v.Full == "" || v.Quick == "" {
			return s.errAt("vars."+name, "give both full: and quick: values")
		}
	}
	seen := map[string]bool{}
	for i, sc := range s.Scenarios {
		at := func(f string) string { return fmt.Sprintf("scenarios.%d%s", i, f) }
		if sc.Name == "" {
			return s.errAt(at(""), "missing name:")
		}
		if !nameRE.MatchString(sc.Name) {
			return s.errAt(at(".name"), "%q: use letters, digits, '.', '_' and '-'", sc.Name)
		}
		if seen[sc.Name] {
			return s.errAt(at(".name"), "%q is used twice: scenario names must be unique", sc.Name)
		}
		seen[sc.Name] = true
		switch {
		case sc.Workload == "":
			return s.errAt(at(""), "missing workload: (periodic, bursty, parallel, or command)")
		case sc.Workload == "command" && len(sc.Command) == 0:
			return s.errAt(at(".workload"), "workload: command needs command: [program, args...]")
		case sc.Workload != "command" && len(sc.Command) > 0:
			return s.errAt(at(".command"), "command: is only for workload: command")
		}
		if sc.Repeat < 0 || sc.Repeat > 100 {
			return s.errAt(at(".repeat"), "repeat %d: use 1 to 100", sc.Repeat)
		}
		keys := make([]string, 0, len(sc.Expect))
		for k := range sc.Expect {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			b := sc.Expect[k]
			if _, ok := Metrics[k]; !ok {
				return s.errAt(at(".expect."+k), "unknown metric %q: use one of %s", k, strings.Join(MetricNames(), ", "))
			}
			if b.Min == nil && b.Max == nil {
				return s.errAt(at(".expect."+k), "give min:, max: or both")
			}
			if b.Min != nil && b.Max != nil && b.Min.V > b.Max.V {
				return s.errAt(at(".expect."+k), "min %s is above max %s", b.Min.Text, b.Max.Text)
			}
		}
		for j, c := range sc.Compare {
			cat := fmt.Sprintf(".compare.%d", j)
			if _, ok := Metrics[c.Metric]; !ok {
				return s.errAt(at(cat+".metric"), "unknown metric %q: use one of %s", c.Metric, strings.Join(MetricNames(), ", "))
			}
			if c.MinRatio == nil && c.MaxRatio == nil {
				return s.errAt(at(cat), "give min_ratio:, max_ratio: or both")
			}
			found := false
			for _, o := range s.Scenarios {
				found = found || (o.Name == c.To && o.Name != sc.Name)
			}
			if !found {
				return s.errAt(at(cat+".to"), "%q is not another scenario of this suite", c.To)
			}
		}
	}
	return nil
}

//go:embed suites/*.yaml
var builtin embed.FS

// Builtin returns the embedded suites, sorted by name.
func Builtin() ([]*Suite, error) {
	entries, err := fs.ReadDir(builtin, "suites")
	if err != nil {
		return nil, err
	}
	var out []*Suite
	for _, e := range entries {
		b, err := builtin.ReadFile("suites/" + e.Name())
		if err != nil {
			return nil, err
		}
		s, err := Parse("builtin:"+strings.TrimSuffix(e.Name(), ".yaml"), b)
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Suite < out[j].Suite })
	return out, nil
}

// BuiltinSource returns the YAML of a built-in suite, as shipped; for a
// name that is none, an error naming those there are.
func BuiltinSource(name string) ([]byte, error) {
	b, err := builtin.ReadFile("suites/" + name + ".yaml")
	if err != nil {
		all, _ := Builtin()
		var names []string
		for _, s := range all {
			names = append(names, s.Suite)
		}
		return nil, fmt.Errorf("no built-in suite %q: use one of %s, or -f FILE", name, strings.Join(names, ", "))
	}
	return b, nil
}

// Load finds a built-in suite by name.
func Load(name string) (*Suite, error) {
	b, err := BuiltinSource(name)
	if err != nil {
		return nil, err
	}
	return Parse("builtin:"+name, b)
}

// LoadFile reads a scenario file from disk.
func LoadFile(path string) (*Suite, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return Parse(path, b)
}

// Select keeps, of each suite, the scenarios named and those their
// comparisons are relative to (burst's burst-20ms brings no-burst): a
// part of a suite run again, without the rest. A name that no suite has
// is an error that lists the scenarios they have; a suite left with
// none is dropped.
func Select(suites []*Suite, names []string) ([]*Suite, error) {
	want := map[string]bool{}
	for _, n := range names {
		want[n] = true
	}
	found := map[string]bool{}
	var out []*Suite
	for _, s := range suites {
		keep := map[string]bool{}
		for _, sc := range s.Scenarios {
			if want[sc.Name] {
				found[sc.Name] = true
				keep[sc.Name] = true
				for _, c := range sc.Compare {
					keep[c.To] = true
				}
			}
		}
		if len(keep) == 0 {
			continue
		}
		part := *s
		part.Scenarios = nil
		for _, sc := range s.Scenarios {
			if keep[sc.Name] {
				part.Scenarios = append(part.Scenarios, sc)
			}
		}
		out = append(out, &part)
	}
	for _, n := range names {
		if !found[n] {
			var have []string
			for _, s := range suites {
				for _, sc := range s.Scenarios {
					have = append(have, sc.Name)
				}
			}
			return nil, fmt.Errorf("no scenario %q in the suite(s) given: their scenarios are %s", n, strings.Join(have, ", "))
		}
	}
	return out, nil
}
