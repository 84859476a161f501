package trace

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// releaseDir holds real traces of release 74e6abc, written before the
// params were typed (testdata/release-74e6abc/README.md).
const releaseDir = "testdata/release-74e6abc"

// releaseTraces lists the release's trace files.
func releaseTraces(t *testing.T) []string {
	t.Helper()
	var files []string
	err := filepath.WalkDir(releaseDir, func(path string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(path, ".json") {
			files = append(files, path)
		}
		return err
	})
	if err != nil || len(files) < 9 {
		t.Fatalf("%d traces in %s: %v", len(files), releaseDir, err)
	}
	return files
}

// Every trace of the release loads, with its params typed: each key the
// release wrote comes back, with its value, when the typed params are
// written again, and only the named workload's parameters are set.
func TestReadReleaseTraces(t *testing.T) {
	for _, file := range releaseTraces(t) {
		t.Run(file, func(t *testing.T) {
			tr, err := ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			b, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			var raw struct {
				Spec struct {
					Params map[string]any `json:"params"`
				} `json:"spec"`
			}
			if err := json.Unmarshal(b, &raw); err != nil {
				t.Fatal(err)
			}
			p := tr.Spec.Params
			if tr.Spec.Workload == "command" {
				if p != nil || raw.Spec.Params != nil {
					t.Errorf("a command has params: %+v", p)
				}
				return
			}
			if p == nil || p.Engine != EngineC {
				t.Fatalf("params %+v, want the C engine's", p)
			}
			set := map[string]bool{"periodic": p.Periodic != nil, "bursty": p.Bursty != nil, "parallel": p.Parallel != nil}
			for w, ok := range set {
				if ok != (w == tr.Spec.Workload) {
					t.Errorf("workload %s: %s params set: %v", tr.Spec.Workload, w, ok)
				}
			}
			again, err := json.Marshal(p)
			if err != nil {
				t.Fatal(err)
			}
			var back map[string]any
			if err := json.Unmarshal(again, &back); err != nil {
				t.Fatal(err)
			}
			for k, v := range raw.Spec.Params {
				if back[k] != v {
					t.Errorf("params.%s: %v written again as %v", k, v, back[k])
				}
			}
			if b := p.Bursty; b != nil && b.Seed != DefaultBurstySeed {
				t.Errorf("seed %d: a trace without one ran with the default", b.Seed)
			}
		})
	}
}

// The typed params of each workload come back from the trace's JSON.
func TestParamsRoundTrip(t *testing.T) {
	for _, s := range []Spec{
		{Workload: "periodic", Args: []string{"--burn-cpu", "2ms"}, Params: &Params{Engine: EngineGo, Periodic: &PeriodicParams{
			Burn: 5 * time.Millisecond, BurnCPU: 2 * time.Millisecond, Sleep: 100 * time.Millisecond, Iterations: 20, Threads: 2, Quiet: true}}},
		{Workload: "bursty", Params: &Params{Engine: EngineC, Bursty: &BurstyParams{
			On: 50 * time.Millisecond, Off: 50 * time.Millisecond, Jitter: 10 * time.Millisecond, Duration: time.Second, Threads: 3, Seed: 0, Pin: true}}},
		{Workload: "parallel", Params: &Params{Engine: EngineC, Parallel: &ParallelParams{
			Threads: 2, Duration: 5 * time.Second, MaxPrime: 10000, Events: 7, Pin: false}}},
		{Workload: "command", Args: []string{"sleep", "1"}, Synthetic: "made up"},
	} {
		var buf bytes.Buffer
		if err := (&Trace{Schema: Schema, Spec: s}).Write(&buf); err != nil {
			t.Fatal(err)
		}
		back, err := Read(&buf)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(back.Spec, s) {
			t.Errorf("%s: read back %+v, want %+v", s.Workload, back.Spec, s)
		}
	}
}

// spec.params in JSON: the engine beside the workload's keys, durations in
// integer ns, the keys of docs/trace.md.
func TestParamsJSON(t *testing.T) {
	for _, c := range []struct {
		p    Params
		want string
	}{
		{Params{Engine: EngineC, Periodic: &PeriodicParams{Burn: 5e6, Sleep: 1e8, Iterations: 3, Threads: 1}},
			`{"engine":"c","burn_ns":5000000,"burn_cpu_ns":0,"sleep_ns":100000000,"iterations":3,"threads":1,"quiet":false}`},
		{Params{Engine: EngineGo, Bursty: &BurstyParams{On: 5e7, OnCPU: 1, Off: 5e7, Jitter: 2, Duration: 1e9, Threads: 1, Seed: 9, Pin: true}},
			`{"engine":"go","on_ns":50000000,"on_cpu_ns":1,"off_ns":50000000,"jitter_ns":2,"duration_ns":1000000000,"threads":1,"seed":9,"pin":true}`},
		{Params{Parallel: &ParallelParams{Threads: 2, Duration: 1e9, MaxPrime: 10000, Events: 0, Pin: true}},
			`{"threads":2,"duration_ns":1000000000,"max_prime":10000,"events":0,"pin":true}`},
		{Params{Engine: EngineC}, `{"engine":"c"}`},
	} {
		got, err := json.Marshal(c.p)
		if err != nil || string(got) != c.want {
			t.Errorf("%+v: %s %v, want %s", c.p, got, err, c.want)
		}
	}
	if _, err := json.Marshal(Params{Periodic: &PeriodicParams{}, Bursty: &BurstyParams{}}); err == nil {
		t.Error("params of two workloads were written")
	}
}

// What the decoder does with keys and workloads it does not expect.
func TestSpecDecode(t *testing.T) {
	read := func(spec string) (Spec, error) {
		var s Spec
		err := json.Unmarshal([]byte(spec), &s)
		return s, err
	}
	// A release's bursty params: no seed (the default), an unknown key.
	s, err := read(`{"workload":"bursty","args":[],"params":{"on_ns":5,"off_ns":6,"duration_ns":7,"threads":1,"pin":true,"engine":"c","synthetic":"x"},"view":{"cpus":1,"auto":false,"library":true,"env":[]}}`)
	want := Spec{Workload: "bursty", Args: []string{}, Params: &Params{Engine: EngineC, Bursty: &BurstyParams{On: 5, Off: 6, Duration: 7, Threads: 1, Seed: DefaultBurstySeed, Pin: true}},
		View: &View{CPUs: 1, Library: true, Env: []string{}}}
	if err != nil || !reflect.DeepEqual(s, want) {
		t.Errorf("bursty: %+v %v, want %+v", s, err, want)
	}
	// A workload this version does not know keeps its engine only.
	if s, err := read(`{"workload":"spin","params":{"engine":"go","speed_ns":1}}`); err != nil || !reflect.DeepEqual(s.Params, &Params{Engine: EngineGo}) {
		t.Errorf("unknown workload: %+v %v", s.Params, err)
	}
	for _, spec := range []string{`{"workload":"command","args":["true"]}`, `{"workload":"periodic","params":null}`} {
		if s, err := read(spec); err != nil || s.Params != nil {
			t.Errorf("%s: params %+v %v, want none", spec, s.Params, err)
		}
	}
	for _, spec := range []string{
		`{"workload":"periodic","params":{"burn_ns":"5ms"}}`,
		`{"workload":"parallel","params":[1]}`,
		`{"workload":"bursty","params":{"engine":3}}`,
	} {
		if _, err := read(spec); err == nil || !strings.Contains(err.Error(), "spec.params") {
			t.Errorf("%s: %v, want an error naming spec.params", spec, err)
		}
	}
}

// An operation of wall time spins for --burn or --on; one of CPU time
// (--burn-cpu, --on-cpu) is not one, though the workload records the
// default --burn or --on beside it.
func TestWallBurn(t *testing.T) {
	ms := time.Millisecond
	for _, c := range []struct {
		p    Params
		want time.Duration
	}{
		{Params{Periodic: &PeriodicParams{Burn: 5 * ms}}, 5 * ms},
		{Params{Periodic: &PeriodicParams{Burn: 5 * ms, BurnCPU: 2 * ms}}, 0},
		{Params{Bursty: &BurstyParams{On: 50 * ms}}, 50 * ms},
		{Params{Bursty: &BurstyParams{On: 50 * ms, OnCPU: 30 * ms}}, 0},
		{Params{Parallel: &ParallelParams{Threads: 2}}, 0},
		{Params{}, 0},
	} {
		if got := c.p.WallBurn(); got != c.want {
			t.Errorf("%+v: %v, want %v", c.p, got, c.want)
		}
	}
}
