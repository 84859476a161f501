package trace

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/cfsprobe/cfsprobe/internal/cgroup"
)

// LimitsOf and Cgroup are each other's inverse, and the JSON is the
// format's: microseconds, no quota as null.
func TestLimitsRoundTrip(t *testing.T) {
	const ms = time.Millisecond
	tests := []struct {
		l    cgroup.Limits
		json string
	}{
		{cgroup.Limits{Period: 100 * ms, Quota: 150 * ms, Burst: 50 * ms},
			`{"period_us":100000,"quota_us":150000,"burst_us":50000,"cpus":1.5}`},
		{cgroup.Limits{Period: 100 * ms},
			`{"period_us":100000,"quota_us":null,"burst_us":0,"cpus":null}`},
		{cgroup.Limits{Period: 1500 * time.Microsecond, Quota: ms, Cpuset: "0-1"},
			`{"period_us":1500,"quota_us":1000,"burst_us":0,"cpuset":"0-1","cpus":0.6666666666666666}`},
	}
	for _, tc := range tests {
		tl := LimitsOf(tc.l)
		b, err := json.Marshal(tl)
		if err != nil || string(b) != tc.json {
			t.Errorf("LimitsOf(%+v) = %s, %v; want %s", tc.l, b, err, tc.json)
		}
		var back Limits
		if err := json.Unmarshal([]byte(tc.json), &back); err != nil {
			t.Fatal(err)
		}
		if got := back.Cgroup(); got != tc.l {
			t.Errorf("%s: Cgroup() = %+v, want %+v", tc.json, got, tc.l)
		}
		if back.Unlimited() != tc.l.Unlimited() {
			t.Errorf("%s: Unlimited() = %v", tc.json, back.Unlimited())
		}
	}
}

// Traces written before: a missing quota, and hand-written files whose
// quota is 0 or negative, read as no quota.
func TestLimitsOldFiles(t *testing.T) {
	for _, s := range []string{
		`{"period_us":100000,"burst_us":0}`,
		`{"period_us":100000,"quota_us":0,"burst_us":0,"cpus":0}`,
		`{"period_us":100000,"quota_us":-1,"burst_us":0,"cpus":null}`,
	} {
		var l Limits
		if err := json.Unmarshal([]byte(s), &l); err != nil {
			t.Fatal(err)
		}
		if got := l.Cgroup(); got != (cgroup.Limits{Period: 100 * time.Millisecond}) || !l.Unlimited() {
			t.Errorf("%s: Cgroup() = %+v, Unlimited() = %v", s, got, l.Unlimited())
		}
	}
}
