package check

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/cfsprobe/cfsprobe/internal/trace"
)

// ResultFile is the name under which Save writes the Result.
const ResultFile = "check.json"

// InputError is a problem with the traces given to LoadTraces: one
// sentence saying what is wrong and how to fix it.
type InputError struct{ Err error }

func (e *InputError) Error() string { return e.Err.Error() }
func (e *InputError) Unwrap() error { return e.Err }

// LoadTraces reads traces from files, and from the *.json files of
// directories (a check's --out directory: its check.json is skipped). It
// returns each trace's file. Its errors are *InputError.
func LoadTraces(paths []string) ([]*trace.Trace, []string, error) {
	var traces []*trace.Trace
	var sources []string
	for _, p := range paths {
		fi, err := os.Stat(p)
		if err != nil {
			var pe *fs.PathError
			if errors.As(err, &pe) {
				err = pe.Err
			}
			return nil, nil, &InputError{fmt.Errorf("cannot read %s: %w: give trace files or directories that exist", p, err)}
		}
		if !fi.IsDir() {
			t, err := readTrace(p)
			if err != nil {
				return nil, nil, err
			}
			traces, sources = append(traces, t), append(sources, p)
			continue
		}
		files, _ := filepath.Glob(filepath.Join(p, "*.json"))
		sort.Strings(files)
		n := len(traces)
		for _, f := range files {
			t, err := readTrace(f)
			if err != nil {
				if isResult(f) {
					continue
				}
				return nil, nil, err
			}
			traces, sources = append(traces, t), append(sources, f)
		}
		if len(traces) == n {
			return nil, nil, &InputError{fmt.Errorf("directory %s holds no trace (*.json): give trace files or the --out directory of a check", p)}
		}
	}
	if len(traces) == 0 {
		return nil, nil, &InputError{errors.New("no trace given: name trace files or directories")}
	}
	return traces, sources, nil
}

// readTrace reads a trace that check can judge. A simulated trace
// (cfsprobe simulate) is refused, not skipped: its throttling is the
// model's of the era it was asked for, not evidence about any kernel, and
// a verdict on a host must not rest on it, nor quietly on the rest of a
// directory that held it.
func readTrace(path string) (*trace.Trace, error) {
	t, err := trace.ReadFile(path)
	if err != nil {
		return nil, &InputError{fmt.Errorf("%w: give traces saved by cfsprobe run --out or cfsprobe check --out", err)}
	}
	if sim := t.Spec.Simulated; sim != nil {
		return nil, &InputError{fmt.Errorf("%s is a simulated trace (cfsprobe simulate, kernel era %s), not evidence about a kernel: give traces of real runs (cfsprobe check --out, cfsprobe run --out)", path, sim.Era)}
	}
	return t, nil
}

// isResult tells a saved Result (check.json) from a trace. It is asked
// only of a file that is not a trace, so that a trace is read once.
func isResult(path string) bool {
	b, err := os.ReadFile(path)
	if err != nil {
		return false
	}
	var head struct {
		Schema string `json:"schema"`
	}
	return json.Unmarshal(b, &head) == nil && head.Schema == Schema
}

// HostOf returns the host the traces were recorded on. Traces from
// several hosts or kernels are an *InputError: a verdict is about one
// kernel on one machine.
func HostOf(traces []*trace.Trace, sources []string) (trace.Host, error) {
	if len(traces) == 0 {
		return trace.Host{}, &InputError{errors.New("no trace given")}
	}
	h := traces[0].Host
	for i, t := range traces[1:] {
		if t.Host.Hostname != h.Hostname || t.Host.Kernel != h.Kernel {
			a, b := "the first trace", "another"
			if len(sources) == len(traces) {
				a, b = sources[0], sources[i+1]
			}
			return h, &InputError{fmt.Errorf("%s is from %s (Linux %s) but %s is from %s (Linux %s): check one host at a time",
				a, h.Hostname, h.Kernel, b, t.Host.Hostname, t.Host.Kernel)}
		}
	}
	return h, nil
}

// AnalyzeFiles re-judges saved traces: LoadTraces, HostOf, Analyze, with
// each run's Source set. It returns the traces too.
func AnalyzeFiles(paths []string) (Result, []*trace.Trace, error) {
	traces, sources, err := LoadTraces(paths)
	if err != nil {
		return Result{}, nil, err
	}
	host, err := HostOf(traces, sources)
	if err != nil {
		return Result{}, nil, err
	}
	r := Analyze(traces, host)
	for i := range r.Runs {
		r.Runs[i].Source = sources[i]
		if traces[i].Scenario == nil || traces[i].Scenario.Name == "" {
			// A trace from cfsprobe run: its file says best what it is.
			r.Runs[i].Name = strings.TrimSuffix(filepath.Base(sources[i]), ".json")
		}
	}
	return r, traces, nil
}

// CheckOutDir tells whether Save could write into dir, without creating
// anything: a check that fails or is interrupted leaves nothing behind.
// Its errors are *InputError.
func CheckOutDir(dir string) error {
	fi, err := os.Stat(dir)
	switch {
	case err == nil && !fi.IsDir():
		return &InputError{fmt.Errorf("--out %s is a file: give a directory (it is created if missing)", dir)}
	case err == nil:
		if err := unix.Access(dir, unix.W_OK|unix.X_OK); err != nil {
			return &InputError{fmt.Errorf("--out %s is not writable (%v): choose another directory", dir, err)}
		}
		return nil
	case !errors.Is(err, fs.ErrNotExist):
		return &InputError{fmt.Errorf("--out %s: %v: choose another directory", dir, err)}
	}
	parent := filepath.Dir(filepath.Clean(dir))
	for {
		if _, err := os.Stat(parent); err == nil {
			break
		}
		next := filepath.Dir(parent)
		if next == parent {
			break
		}
		parent = next
	}
	if err := unix.Access(parent, unix.W_OK|unix.X_OK); err != nil {
		return &InputError{fmt.Errorf("cannot create --out %s: %s is not writable (%v): choose another directory", dir, parent, err)}
	}
	return nil
}

// Save writes the traces (as NAME.json, NAME being the run's name) and
// the Result (check.json) into dir, creating it.
func Save(dir string, r *Result, traces []*trace.Trace) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	used := map[string]int{}
	for i, t := range traces {
		name := safeName(RunName(t))
		used[name]++
		if used[name] > 1 {
			name = fmt.Sprintf("%s-%d", name, used[name])
		}
		path := filepath.Join(dir, name+".json")
		if err := t.WriteFile(path); err != nil {
			return err
		}
		if i < len(r.Runs) {
			r.Runs[i].Source = path
		}
	}
	f, err := os.Create(filepath.Join(dir, ResultFile))
	if err != nil {
		return err
	}
	if err := r.Write(f); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", f.Name(), err)
	}
	return f.Close()
}

// Write encodes the Result as indented JSON.
func (r *Result) Write(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

func safeName(s string) string {
	s = strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '_', r == '.':
			return r
		}
		return '-'
	}, s)
	if s == "" || s == "check" { // check.json is the Result
		s = "run-" + s
	}
	return s
}
