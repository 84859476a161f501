package recommend

import (
	"context"
	"fmt"
	"strings"

	"github.com/cfsprobe/cfsprobe/internal/report"
	"github.com/cfsprobe/cfsprobe/internal/trace"
)

// This file checks a group's advice by running it (cfsprobe recommend
// --verify): the trace's workload rerun under the recommendation, each
// peer's setting, the current setting and the unlimited reference, each
// measured beside what was predicted, and whether the recommendation met
// the target when run.

// LatencyFactor bounds the recommendation's operation latency when run:
// its p99.9 at most this many times the reference run's (Reference: the
// same workload with no limit).
const LatencyFactor = 2

// VerifyRule says when a recommendation met the target when run, for
// the output and the help.
const VerifyRule = "the rerun under the recommendation meets the target (throttled periods ≤ 1 % by default) and, when the workload has operations, its p99.9 latency is at most 2× that of the reference run (the same workload, with the recommendation's thread cap, and no limit)"

// Role names of the settings rerun.
const (
	RoleRecommended = "recommended"
	RoleCurrent     = "current"
	RoleReference   = "reference"
	rolePeer        = "peer "
)

// Verified is what the reruns of a group's workload measured.
type Verified struct {
	// Met: the recommendation met the target when run (Rule).
	Met  bool   `json:"met"`
	Rule string `json:"rule"`
	// Why says it in numbers.
	Why string `json:"why"`
	// Runs are the settings rerun, one a role: the recommendation, each
	// peer, the current setting and the reference, in that order. Roles
	// with the same setting share one rerun.
	Runs []VerifiedRun `json:"runs"`
}

// VerifiedRun is one setting rerun: what was predicted and what was
// measured.
type VerifiedRun struct {
	// Role is recommended, "peer NAME", current or reference.
	Role    string  `json:"role"`
	Setting Setting `json:"setting"`
	// Predicted is the simulator's (absent for the reference run).
	Predicted *Prediction `json:"predicted,omitempty"`
	// Measured is the rerun's trace read as a prediction is.
	Measured Prediction `json:"measured"`
	// Meets: the measured run meets the group's target.
	Meets bool `json:"meets"`
	// Warnings say what of the setting the rerun could not give exactly.
	Warnings []string `json:"warnings,omitempty"`
}

// verifiedRole is a role to rerun, before its run.
type verifiedRole struct {
	role      string
	setting   Setting
	predicted *Prediction
}

// roles are the settings a group's advice is checked with, in order.
func (g *Group) roles() []verifiedRole {
	rec := g.Recommended
	rs := []verifiedRole{{RoleRecommended, rec.Setting, rec.Prediction}}
	for _, p := range g.Peers {
		rs = append(rs, verifiedRole{rolePeer + p.Name, p.Setting, &p.Prediction})
	}
	rs = append(rs, verifiedRole{RoleCurrent, g.Current.Setting, &g.Current.Prediction},
		verifiedRole{RoleReference, Reference(rec.Setting), nil})
	return rs
}

// Roles says what s is in the group's advice ("recommended, peer VPA"),
// for progress lines.
func (g *Group) Roles(s Setting) string {
	var out []string
	for _, r := range g.roles() {
		if r.setting == s {
			out = append(out, r.role)
		}
	}
	return strings.Join(out, ", ")
}

// GroupVerify is the reruns that check one group's advice, prepared.
type GroupVerify struct {
	g      *Group
	reruns *Reruns
	// settings are the distinct settings, in the order of the roles.
	settings []Setting
}

// PrepareVerify checks that the workload of tr (the trace g was advised
// from) can be rerun under every setting of g's advice, without creating
// anything. Its errors of the trace or a setting are *lab.UserError.
func PrepareVerify(g *Group, tr *trace.Trace, opt VerifyOptions) (*GroupVerify, error) {
	v := &GroupVerify{g: g}
	for _, r := range g.roles() {
		if !containsSetting(v.settings, r.setting) {
			v.settings = append(v.settings, r.setting)
		}
	}
	var err error
	if v.reruns, err = PrepareReruns(tr, v.settings, opt); err != nil {
		return nil, err
	}
	return v, nil
}

func containsSetting(ss []Setting, s Setting) bool {
	for _, t := range ss {
		if t == s {
			return true
		}
	}
	return false
}

// Run reruns the workload under each distinct setting in turn and
// returns what was measured against what was predicted.
func (v *GroupVerify) Run(ctx context.Context) (*Verified, error) {
	runs, err := v.reruns.Run(ctx)
	if err != nil {
		return nil, err
	}
	return verified(v.g, runs), nil
}

// verified sets the runs beside the group's roles and judges the
// recommendation by VerifyRule.
func verified(g *Group, runs []Run) *Verified {
	out := &Verified{Rule: VerifyRule}
	byRole := map[string]*VerifiedRun{}
	var capNotHeld string // the recommendation's rerun's
	for _, r := range g.roles() {
		for _, run := range runs {
			if run.Setting != r.setting {
				continue
			}
			m := predictionOf(run.Trace)
			out.Runs = append(out.Runs, VerifiedRun{Role: r.role, Setting: r.setting, Predicted: r.predicted,
				Measured: m, Meets: g.Target.Met(m), Warnings: run.Warnings})
			byRole[r.role] = &out.Runs[len(out.Runs)-1]
			if r.role == RoleRecommended {
				capNotHeld = run.CapNotHeld
			}
			break
		}
	}
	rec, ref := byRole[RoleRecommended], byRole[RoleReference]
	if rec == nil || ref == nil {
		out.Why = "the recommendation or the reference was not rerun"
		return out
	}
	m := rec.Measured
	out.Met = rec.Meets
	why := fmt.Sprintf("rerun under %s: %s of %d periods throttled, p99 stall %s (target: %s; predicted %s)",
		rec.Setting, pct(m.ThrottledRatio), m.Periods, report.Dur(m.StallP99Ns), g.Target, pctOf(rec.Predicted))
	rp, fp := m.LatencyP999Ns, ref.Measured.LatencyP999Ns
	if rp != nil && fp != nil {
		ok := *rp <= LatencyFactor**fp
		out.Met = out.Met && ok
		why += fmt.Sprintf("; op p99.9 %s against %s in the reference run (at most %d×: %s)",
			report.Dur(*rp), report.Dur(*fp), LatencyFactor, yesNo(ok))
	}
	if capNotHeld != "" {
		why += "; " + capNotHeld
	}
	if out.Met {
		out.Why = "met: " + why
	} else {
		out.Why = "not met: " + why
	}
	return out
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}
