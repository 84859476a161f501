package recommend

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// TargetKind names what a target bounds.
type TargetKind string

// The targets.
const (
	// TargetThrottled bounds the share of periods throttled.
	TargetThrottled TargetKind = "throttled"
	// TargetStall bounds the 99th percentile of the periods' stall.
	TargetStall TargetKind = "stall"
	// TargetDemand asks for no throttling at a percentile of the
	// per-period demand: periods throttled ≤ 100 − P %.
	TargetDemand TargetKind = "demand"
)

// Target is what a recommended setting must meet, judged on the
// simulator's prediction.
type Target struct {
	Kind TargetKind `json:"kind"`
	// MaxThrottledRatio bounds throttled periods / periods (throttled,
	// demand).
	MaxThrottledRatio float64 `json:"max_throttled_ratio,omitempty"`
	// MaxStallP99Ns bounds the p99 stall (stall).
	MaxStallP99Ns int64 `json:"max_stall_p99_ns,omitempty"`
	// Percentile is the demand percentile that must not be throttled
	// (demand).
	Percentile float64 `json:"percentile,omitempty"`
}

// DefaultTarget is throttled periods ≤ 1 %.
var DefaultTarget = Target{Kind: TargetThrottled, MaxThrottledRatio: 0.01}

// TargetSyntax says how a target is written, for errors and help.
const TargetSyntax = "throttled:PCT (throttled periods at most PCT %, e.g. throttled:1%), stall:DURATION (p99 stall at most that, e.g. stall:5ms) or demand:pN (no throttling at the N-th percentile of demand, e.g. demand:p99)"

// ParseTarget reads a target: "throttled:1%", "stall:5ms", "demand:p99".
func ParseTarget(s string) (Target, error) {
	kind, val, ok := strings.Cut(strings.TrimSpace(s), ":")
	if !ok {
		return Target{}, fmt.Errorf("target %q is not KIND:VALUE: use %s", s, TargetSyntax)
	}
	switch TargetKind(kind) {
	case TargetThrottled:
		pct, err := strconv.ParseFloat(strings.TrimSuffix(val, "%"), 64)
		if err != nil || math.IsNaN(pct) || pct < 0 || pct >= 100 {
			return Target{}, fmt.Errorf("target %q: %q is not a percentage from 0 to below 100, such as 1%%", s, val)
		}
		return Target{Kind: TargetThrottled, MaxThrottledRatio: pct / 100}, nil
	case TargetStall:
		d, err := time.ParseDuration(val)
		if err != nil || d < 0 {
			return Target{}, fmt.Errorf("target %q: %q is not a duration of 0 or more, such as 5ms", s, val)
		}
		return Target{Kind: TargetStall, MaxStallP99Ns: int64(d)}, nil
	case TargetDemand:
		p, err := strconv.ParseFloat(strings.TrimPrefix(val, "p"), 64)
		if err != nil || math.IsNaN(p) || p <= 0 || p > 100 {
			return Target{}, fmt.Errorf("target %q: %q is not a percentile above 0 and at most 100, such as p99", s, val)
		}
		return Target{Kind: TargetDemand, Percentile: p, MaxThrottledRatio: 1 - p/100}, nil
	}
	return Target{}, fmt.Errorf("target %q: unknown kind %q: use %s", s, kind, TargetSyntax)
}

// ParseHeadroom reads a headroom as a percentage, "10%" or "10", from 0
// to 100 %, as Options.Headroom takes it (0 % is NoHeadroom).
func ParseHeadroom(s string) (float64, error) {
	v, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(s), "%"), 64)
	if err != nil || !(v >= 0 && v <= 100*MaxHeadroom) {
		return 0, fmt.Errorf("%q is not a percentage from 0 to %v, such as 10%%", s, 100*MaxHeadroom)
	}
	if v == 0 {
		return NoHeadroom, nil
	}
	return v / 100, nil
}

// String is the target as people read it: "throttled periods ≤ 1%".
func (t Target) String() string {
	switch t.Kind {
	case TargetStall:
		return "p99 stall ≤ " + time.Duration(t.MaxStallP99Ns).String()
	case TargetDemand:
		return fmt.Sprintf("no throttling at p%s of demand (throttled periods ≤ %s)", strconv.FormatFloat(t.Percentile, 'f', -1, 64), pct(t.MaxThrottledRatio))
	}
	return "throttled periods ≤ " + pct(t.MaxThrottledRatio)
}

// Met reports whether a prediction meets the target.
func (t Target) Met(p Prediction) bool {
	if t.Kind == TargetStall {
		return p.StallP99Ns <= t.MaxStallP99Ns
	}
	return p.ThrottledRatio <= t.MaxThrottledRatio+1e-12
}

// pct is a ratio as a percentage for people: "1%", "0.5%", "42%".
func pct(r float64) string {
	v := 100 * r
	switch {
	case v == 0:
		return "0%"
	case v < 10:
		return strconv.FormatFloat(math.Round(v*10)/10, 'f', -1, 64) + "%"
	}
	return strconv.FormatFloat(math.Round(v), 'f', -1, 64) + "%"
}
