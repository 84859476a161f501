package trace

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Engines: the program that ran a built-in workload's workers.
const (
	// EngineC is the small static C program embedded in cfsprobe, with no
	// threads beside the workers.
	EngineC = "c"
	// EngineGo is the Go implementation (a binary built without the C
	// engine).
	EngineGo = "go"
)

// Params are what a built-in workload ran with: the engine that ran its
// workers and the parameters of the workload Spec.Workload names; the
// other two are nil. In JSON they are one flat object, spec.params: engine
// beside the workload's own keys, durations in integer nanoseconds.
// Only Spec decodes them, since the keys alone do not name the workload.
type Params struct {
	// Engine is EngineC or EngineGo.
	Engine   string
	Periodic *PeriodicParams
	Bursty   *BurstyParams
	Parallel *ParallelParams
}

// Threads is how many worker threads the workload ran (0: none named).
func (p Params) Threads() int {
	switch {
	case p.Periodic != nil:
		return p.Periodic.Threads
	case p.Bursty != nil:
		return p.Bursty.Threads
	case p.Parallel != nil:
		return p.Parallel.Threads
	}
	return 0
}

// WallBurn is how long an operation of wall time spins: a periodic
// burn's Burn, a bursty burst's On; 0 when the workload's operations are
// of CPU time (BurnCPU, OnCPU: the workload records Burn's and On's
// defaults beside them, which it does not use) or are neither.
func (p Params) WallBurn() time.Duration {
	switch {
	case p.Periodic != nil && p.Periodic.BurnCPU <= 0:
		return p.Periodic.Burn
	case p.Bursty != nil && p.Bursty.OnCPU <= 0:
		return p.Bursty.On
	}
	return 0
}

// PeriodicParams: each of Threads threads burns CPU for Burn of wall time
// (or BurnCPU of its own CPU time, when that is set), sleeps Sleep, and
// repeats, Iterations burns in all.
type PeriodicParams struct {
	Burn       time.Duration `json:"burn_ns"`
	BurnCPU    time.Duration `json:"burn_cpu_ns"`
	Sleep      time.Duration `json:"sleep_ns"`
	Iterations int           `json:"iterations"`
	Threads    int           `json:"threads"`
	// Quiet: no line printed per burn (false in traces written before
	// it was recorded).
	Quiet bool `json:"quiet"`
}

// BurstyParams: each of Threads threads is busy for On of wall time (or
// OnCPU of its own CPU time, when that is set), idles for Off, give or take
// up to Jitter drawn from Seed, until Duration has passed; or, when Every
// is set (Off and Jitter 0), starts its k-th burst k × Every after the
// start, at once when the one before ended later (an open loop). Pin
// keeps the process on Threads CPUs when it may use more.
type BurstyParams struct {
	On       time.Duration `json:"on_ns"`
	OnCPU    time.Duration `json:"on_cpu_ns"`
	Off      time.Duration `json:"off_ns"`
	Jitter   time.Duration `json:"jitter_ns"`
	Every    time.Duration `json:"every_ns,omitempty"`
	Duration time.Duration `json:"duration_ns"`
	Threads  int           `json:"threads"`
	// Seed of the jitter. Traces written before it was recorded read as
	// DefaultBurstySeed, the default (a --seed in their args is not read).
	Seed uint64 `json:"seed"`
	Pin  bool   `json:"pin"`
}

// DefaultBurstySeed is the bursty workload's seed when none is given.
const DefaultBurstySeed = 1

// ParallelParams: Threads threads repeat a CPU event (the primality test
// of every number up to MaxPrime) until Duration has passed or, when
// Events > 0, that many events are done in all. Pin keeps the process on
// Threads CPUs when it may use more. Event, when set, is the CPU time an
// event was asked to take (--event), and MaxPrime the size timed to take
// it on the machine that ran.
type ParallelParams struct {
	Threads  int           `json:"threads"`
	Duration time.Duration `json:"duration_ns"`
	MaxPrime int           `json:"max_prime"`
	Event    time.Duration `json:"event_ns,omitempty"`
	Events   int64         `json:"events"`
	Pin      bool          `json:"pin"`
}

// MarshalJSON writes the flat object of spec.params.
func (p Params) MarshalJSON() ([]byte, error) {
	type engine struct {
		Engine string `json:"engine,omitempty"`
	}
	n := 0
	for _, set := range []bool{p.Periodic != nil, p.Bursty != nil, p.Parallel != nil} {
		if set {
			n++
		}
	}
	e := engine{p.Engine}
	switch {
	case n > 1:
		return nil, errors.New("params hold more than one workload's parameters")
	case p.Periodic != nil:
		return json.Marshal(struct {
			engine
			*PeriodicParams
		}{e, p.Periodic})
	case p.Bursty != nil:
		return json.Marshal(struct {
			engine
			*BurstyParams
		}{e, p.Bursty})
	case p.Parallel != nil:
		return json.Marshal(struct {
			engine
			*ParallelParams
		}{e, p.Parallel})
	}
	return json.Marshal(e)
}

// UnmarshalJSON reads a spec, decoding its params as the parameters of the
// workload it names. Keys a trace lacks keep their zero value, except a
// bursty workload's seed (DefaultBurstySeed); keys of a workload this
// version does not know are ignored, and so is every key but engine under
// a workload it does not know.
func (s *Spec) UnmarshalJSON(b []byte) error {
	type plain Spec // without this method
	var raw struct {
		plain
		Params json.RawMessage `json:"params"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	p, err := decodeParams(raw.Workload, raw.Params)
	if err != nil {
		return fmt.Errorf("spec.params of workload %q: %w", raw.Workload, err)
	}
	*s = Spec(raw.plain)
	s.Params = p
	return nil
}

func decodeParams(workload string, b json.RawMessage) (*Params, error) {
	if len(b) == 0 || bytes.Equal(bytes.TrimSpace(b), []byte("null")) {
		return nil, nil
	}
	var e struct {
		Engine string `json:"engine"`
	}
	if err := json.Unmarshal(b, &e); err != nil {
		return nil, err
	}
	p := &Params{Engine: e.Engine}
	var into any
	switch workload {
	case "periodic":
		p.Periodic = &PeriodicParams{}
		into = p.Periodic
	case "bursty":
		p.Bursty = &BurstyParams{Seed: DefaultBurstySeed}
		into = p.Bursty
	case "parallel":
		p.Parallel = &ParallelParams{}
		into = p.Parallel
	default:
		return p, nil
	}
	if err := json.Unmarshal(b, into); err != nil {
		return nil, err
	}
	return p, nil
}
