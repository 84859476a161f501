package recommend

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/cfsprobe/cfsprobe/internal/golden"
	"github.com/cfsprobe/cfsprobe/internal/trace"
)

// rerun is a made-up rerun of s: periods periods, throttled of them, and
// the operations' p99.9 (0: no operations).
func rerun(s Setting, periods, throttled int64, p999 time.Duration) Run {
	tr := &trace.Trace{Schema: trace.Schema, Limits: trace.LimitsOf(s.Limits), Summary: trace.Summary{
		NrPeriods: periods, NrThrottled: throttled, CPURatio: 0.16}}
	if periods > 0 {
		tr.Summary.ThrottledRatio = float64(throttled) / float64(periods)
	}
	if p999 > 0 {
		tr.Summary.LatencyNs = &trace.Percentiles{P99: int64(p999) / 2, P999: int64(p999)}
	}
	return Run{Setting: s, Trace: tr}
}

// reruns are made-up reruns of every distinct setting of g: the
// recommendation's as given, every other throttled in half its periods,
// the reference's p99.9 100 ms.
func reruns(g *Group, rec Run) []Run {
	ref := Reference(g.Recommended.Setting)
	var runs []Run
	var seen []Setting
	for _, r := range g.roles() {
		if containsSetting(seen, r.setting) {
			continue
		}
		seen = append(seen, r.setting)
		switch r.setting {
		case rec.Setting:
			runs = append(runs, rec)
		case ref:
			runs = append(runs, rerun(ref, 0, 0, 100*time.Millisecond))
		default:
			runs = append(runs, rerun(r.setting, 100, 50, 900*time.Millisecond))
		}
	}
	return runs
}

// The verdict: the target met when run and the op p99.9 within 2× of
// the reference's; without operations the target alone.
func TestVerifiedVerdict(t *testing.T) {
	g := advise(t, "bursty-4-threads-40ms-per-second-unlimited", Options{})
	s := g.Recommended.Setting
	for _, c := range []struct {
		name string
		rec  Run
		met  bool
		why  string
	}{
		{"met", rerun(s, 100, 1, 190*time.Millisecond), true, "op p99.9 190ms against 100ms in the reference run (at most 2×: yes)"},
		{"throttled", rerun(s, 100, 2, 110*time.Millisecond), false, "2% of 100 periods throttled"},
		{"slow", rerun(s, 100, 0, 210*time.Millisecond), false, "(at most 2×: no)"},
		{"no operations", rerun(s, 100, 0, 0), true, "0% of 100 periods throttled"},
	} {
		runs := reruns(g, c.rec)
		if c.name == "no operations" {
			runs[len(runs)-1].Trace.Summary.LatencyNs = nil
		}
		v := verified(g, runs)
		if v.Met != c.met || !strings.Contains(v.Why, c.why) {
			t.Errorf("%s: met %v, %q; want %v and %q", c.name, v.Met, v.Why, c.met, c.why)
		}
		if n := len(v.Runs); n != len(g.roles()) {
			t.Errorf("%s: %d rows, want one a role (%d)", c.name, n, len(g.roles()))
		}
	}
}

// A group that ran unlimited: its current setting is the reference, and
// the two share one rerun.
func TestVerifiedRolesShareRuns(t *testing.T) {
	g := advise(t, "bursty-4-threads-40ms-per-second-unlimited", Options{})
	ref := Reference(g.Recommended.Setting)
	if got := g.Roles(ref); got != "current, reference" {
		t.Errorf("roles of %s: %q, want current and reference", ref, got)
	}
	if got := g.Roles(g.Recommended.Setting); got != RoleRecommended {
		t.Errorf("roles of %s: %q", g.Recommended.Setting, got)
	}
	var distinct []Setting
	for _, r := range g.roles() {
		if !containsSetting(distinct, r.setting) {
			distinct = append(distinct, r.setting)
		}
	}
	if len(distinct) != len(g.roles())-1 {
		t.Errorf("%d distinct settings for %d roles: want current and reference to share one", len(distinct), len(g.roles()))
	}
}

// Every output shows the reruns, predicted beside measured.
func TestVerifiedOutputsGolden(t *testing.T) {
	g := advise(t, "bursty-4-threads-40ms-per-second-unlimited", Options{})
	g.Verified = verified(g, reruns(g, rerun(g.Recommended.Setting, 94, 0, 153*time.Millisecond)))
	for _, f := range Formats {
		var b bytes.Buffer
		if err := Write(&b, f, []*Group{g}); err != nil {
			t.Fatal(err)
		}
		golden.Check(t, goldenFile("recommend-verified", f), b.Bytes())
	}
	var b bytes.Buffer
	if err := JSON(&b, []*Group{g}); err != nil {
		t.Fatal(err)
	}
	var doc Document
	if err := json.Unmarshal(b.Bytes(), &doc); err != nil || doc.Groups[0].Verified == nil || len(doc.Groups[0].Verified.Runs) != len(g.Verified.Runs) {
		t.Errorf("the JSON does not read back: %v", err)
	}
}
