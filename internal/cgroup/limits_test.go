package cgroup

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestParseCPUList(t *testing.T) {
	tests := []struct {
		in   string
		want []int
		err  bool
	}{
		{in: "", want: nil},
		{in: "\n", want: nil},
		{in: "0", want: []int{0}},
		{in: "0-1\n", want: []int{0, 1}},
		{in: " 0-3 ", want: []int{0, 1, 2, 3}},
		{in: "0-3,5,7-8", want: []int{0, 1, 2, 3, 5, 7, 8}},
		{in: "5,1,3", want: []int{1, 3, 5}},
		{in: "0-2,1-3,2", want: []int{0, 1, 2, 3}},
		{in: "4-4", want: []int{4}},
		{in: "8191", want: []int{8191}},
		{in: "a", err: true},
		{in: "-1", err: true},
		{in: "1-", err: true},
		{in: "-", err: true},
		{in: "3-1", err: true},
		{in: "0,,1", err: true},
		{in: ",", err: true},
		{in: "0,", err: true},
		{in: "0-1-2", err: true},
		{in: "0 - 1", err: true},
		{in: "0, 1", err: true},
		{in: "0x1", err: true},
		{in: "0-100000", err: true},
		// CPU numbers far beyond any NR_CPUS: an error, promptly (the
		// largest int once made the range loop wrap around forever).
		{in: "9223372036854775807", err: true},
		{in: "9223372036854775806-9223372036854775807", err: true},
		{in: "99999999999999999999", err: true},
	}
	for _, tc := range tests {
		got, err := ParseCPUList(tc.in)
		if tc.err {
			if err == nil {
				t.Errorf("ParseCPUList(%q) = %v, want an error", tc.in, got)
			}
			continue
		}
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("ParseCPUList(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
}

func TestLimitsValidate(t *testing.T) {
	const ms, us = time.Millisecond, time.Microsecond
	tests := []struct {
		name string
		l    Limits
		// field is the field at fault ("" means valid); reason a part of
		// what is wrong, want what Want says would do.
		field        Field
		reason, want string
	}{
		{name: "unlimited", l: Limits{Period: 100 * ms}},
		{name: "quota", l: Limits{Period: 100 * ms, Quota: 20 * ms}},
		{name: "least period and quota", l: Limits{Period: ms, Quota: ms}},
		{name: "largest period", l: Limits{Period: time.Second, Quota: 500 * ms}},
		{name: "more than one CPU", l: Limits{Period: 100 * ms, Quota: 250 * ms}},
		{name: "largest quota", l: Limits{Period: 100 * ms, Quota: MaxQuota}},
		{name: "burst equal to quota", l: Limits{Period: 100 * ms, Quota: 20 * ms, Burst: 20 * ms}},
		{name: "largest quota and burst", l: Limits{Period: time.Second, Quota: 1 << 43 * us, Burst: (1<<43 - 1) * us}},
		{name: "cpuset", l: Limits{Period: 100 * ms, Cpuset: "0-1,3"}},
		{name: "period whole microseconds", l: Limits{Period: 1500 * us, Quota: ms}},

		{name: "period zero is no default", l: Limits{Quota: 20 * ms}, field: FieldPeriod, reason: "0s is below the kernel's minimum of 1ms", want: "1ms to 1s"},
		{name: "period below 1ms", l: Limits{Period: 999 * us, Quota: ms}, field: FieldPeriod, reason: "999µs is below", want: "1ms to 1s"},
		{name: "negative period", l: Limits{Period: -ms}, field: FieldPeriod, reason: "-1ms is below", want: "1ms to 1s"},
		{name: "period above 1s", l: Limits{Period: time.Second + us, Quota: ms}, field: FieldPeriod, reason: "1.000001s is above the kernel's maximum of 1s", want: "1ms to 1s"},
		{name: "period not whole microseconds", l: Limits{Period: 100*ms + 500, Quota: 20 * ms}, field: FieldPeriod, reason: "not a whole number of microseconds", want: "100.001ms"},
		{name: "negative quota", l: Limits{Period: 100 * ms, Quota: -ms}, field: FieldQuota, reason: "-1ms is negative", want: "1ms or more"},
		{name: "quota below 1ms", l: Limits{Period: 100 * ms, Quota: 999 * us}, field: FieldQuota, reason: "999µs is below the kernel's minimum of 1ms", want: "1ms or more"},
		{name: "quota above the kernel's maximum", l: Limits{Period: 100 * ms, Quota: MaxQuota + us}, field: FieldQuota, reason: "above the kernel's maximum of 4886h43m6.044415s", want: "4886h43m6.044415s or less"},
		{name: "quota not whole microseconds", l: Limits{Period: 100 * ms, Quota: 20*ms + 1}, field: FieldQuota, reason: "not a whole number of microseconds", want: "20ms"},
		{name: "negative burst", l: Limits{Period: 100 * ms, Quota: 20 * ms, Burst: -ms}, field: FieldBurst, reason: "-1ms is negative", want: "0 to 20ms"},
		{name: "burst without quota", l: Limits{Period: 100 * ms, Burst: ms}, field: FieldBurst, reason: "1ms needs a quota"},
		{name: "burst above quota", l: Limits{Period: 100 * ms, Quota: 20 * ms, Burst: 21 * ms}, field: FieldBurst, reason: "21ms is above the quota 20ms", want: "0 to 20ms"},
		{name: "burst and quota above the kernel's maximum", l: Limits{Period: time.Second, Quota: MaxQuota - 10*time.Second, Burst: 11 * time.Second},
			field: FieldBurst, reason: "add up to more than the kernel's maximum", want: "0 to 10s"},
		{name: "burst not whole microseconds", l: Limits{Period: 100 * ms, Quota: 20 * ms, Burst: 5*ms + 499}, field: FieldBurst, reason: "not a whole number", want: "5ms"},
		{name: "bad cpuset", l: Limits{Period: 100 * ms, Cpuset: "0-"}, field: FieldCpuset, reason: `"0-" is not a CPU list like 0-1 or 0,2`},
		{name: "cpuset range reversed", l: Limits{Period: 100 * ms, Cpuset: "3-1"}, field: FieldCpuset, reason: "like 0-1 or 0,2"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.l.Validate()
			if tc.field == "" {
				if err != nil {
					t.Fatalf("Validate(%+v) = %v, want nil", tc.l, err)
				}
				return
			}
			var le *LimitError
			if !errors.As(err, &le) {
				t.Fatalf("Validate(%+v) = %v, want a *LimitError", tc.l, err)
			}
			if le.Field != tc.field {
				t.Errorf("field %q, want %q (%v)", le.Field, tc.field, err)
			}
			msg := err.Error()
			if !strings.HasPrefix(msg, string(tc.field)+" ") || !strings.Contains(msg, tc.reason) {
				t.Errorf("message %q does not start with %q and say %q", msg, tc.field, tc.reason)
			}
			if got := le.Want(); got != tc.want {
				t.Errorf("Want() = %q, want %q", got, tc.want)
			}
			// No flag or file field: the front ends name those.
			if strings.Contains(msg, "--") || strings.Contains(msg, ":") {
				t.Errorf("message %q names a flag or gives advice", msg)
			}
		})
	}
}

func TestLimitsDerived(t *testing.T) {
	const ms = time.Millisecond
	tests := []struct {
		l         Limits
		unlimited bool
		cpus      float64
	}{
		{Limits{}, true, 0},
		{Limits{Period: 10 * ms}, true, 0},
		{Limits{Period: 100 * ms, Quota: 50 * ms}, false, 0.5},
		{Limits{Period: 20 * ms, Quota: 50 * ms}, false, 2.5},
		{Limits{Quota: 50 * ms}, false, 0}, // no period: no count rather than +Inf
	}
	for _, tc := range tests {
		if got := tc.l.Unlimited(); got != tc.unlimited {
			t.Errorf("%+v.Unlimited() = %v", tc.l, got)
		}
		if got := tc.l.CPUs(); math.Abs(got-tc.cpus) > 1e-12 {
			t.Errorf("%+v.CPUs() = %v, want %v", tc.l, got, tc.cpus)
		}
	}
}

func TestCPULimits(t *testing.T) {
	const ms, us = time.Millisecond, time.Microsecond
	tests := []struct {
		cpus   float64
		period time.Duration
		quota  time.Duration
		// reason is a part of the *LimitError for FieldCPUs ("": none);
		// want what its Want says.
		reason, want string
	}{
		{cpus: 0.2, period: 100 * ms, quota: 20 * ms},
		{cpus: 1.5, period: 100 * ms, quota: 150 * ms},
		{cpus: 64, period: time.Second, quota: 64 * time.Second},
		// Whole microseconds, rounded to the nearest.
		{cpus: 1.0 / 3, period: 100 * ms, quota: 33333 * us},
		{cpus: 2.0 / 3, period: 100 * ms, quota: 66667 * us},
		{cpus: 0.6667, period: 1500 * us, quota: 1000 * us},
		// A positive count is never "unlimited": its quota is at least
		// 1µs (for Validate to refuse).
		{cpus: 1e-9, period: 100 * ms, quota: us},
		// The largest quota the kernel takes, and one more CPU.
		{cpus: 175921860.44415, period: 100 * ms, quota: MaxQuota},
		{cpus: 175921861, period: 100 * ms, reason: "is more CPU time per 100ms period than the kernel's maximum quota of 4886h43m6.044415s", want: "175000000 or less"},
		{cpus: 1e9, period: 100 * ms, reason: "maximum quota", want: "175000000 or less"},
		{cpus: 1e300, period: 100 * ms, reason: "maximum quota"},
		{cpus: 0, period: 100 * ms, reason: "0 is not a positive number of CPUs"},
		{cpus: -1, period: 100 * ms, reason: "-1 is not a positive number"},
		{cpus: math.NaN(), period: 100 * ms, reason: "NaN is not a positive number"},
		{cpus: math.Inf(1), period: 100 * ms, reason: "+Inf is not a positive number"},
		{cpus: math.Inf(-1), period: 100 * ms, reason: "-Inf is not a positive number"},
	}
	for _, tc := range tests {
		l, err := CPULimits(tc.cpus, tc.period)
		if tc.reason == "" {
			if err != nil || l != (Limits{Period: tc.period, Quota: tc.quota}) {
				t.Errorf("CPULimits(%v, %v) = %+v, %v; want quota %v", tc.cpus, tc.period, l, err, tc.quota)
			}
			continue
		}
		var le *LimitError
		if !errors.As(err, &le) || le.Field != FieldCPUs || !strings.HasPrefix(err.Error(), "cpus ") || !strings.Contains(err.Error(), tc.reason) {
			t.Errorf("CPULimits(%v, %v) = %v, want a *LimitError for cpus saying %q", tc.cpus, tc.period, err, tc.reason)
			continue
		}
		if tc.want != "" && le.Want() != tc.want {
			t.Errorf("CPULimits(%v, %v): Want() = %q, want %q", tc.cpus, tc.period, le.Want(), tc.want)
		}
	}
}

// Want gives quota bounds in CPUs rounded inwards: a count it names makes
// a quota within the bounds.
func TestWantCPUs(t *testing.T) {
	const ms, us = time.Millisecond, time.Microsecond
	for _, period := range []time.Duration{ms, 1500 * us, 7 * ms, 33333 * us, 100 * ms, 999999 * us, time.Second} {
		l := Limits{Period: period, Quota: 500 * us}
		var le *LimitError
		if !errors.As(l.Validate(), &le) {
			t.Fatalf("%+v: no *LimitError", l)
		}
		want := le.OfCPUs("x").Want()
		least, err := strconv.ParseFloat(strings.TrimSuffix(want, " or more"), 64)
		if err != nil {
			t.Fatalf("period %v: Want() = %q", period, want)
		}
		got, err := CPULimits(least, period)
		if err != nil || got.Validate() != nil {
			t.Errorf("period %v: --cpus %v, the least Want names, gives %+v: %v", period, least, got, err)
		}
	}
	le := &LimitError{Field: FieldQuota, Value: "20.001ms", Reason: "is wrong", Period: 100 * ms, Max: 20 * ms, HasMax: true, Min: 1500 * us, HasMin: true}
	if got := le.Want(); got != "1.5ms to 20ms" {
		t.Errorf("Want() = %q", got)
	}
	c := le.OfCPUs("0.20001")
	if got := c.Want(); got != "0.015 to 0.2" {
		t.Errorf("OfCPUs: Want() = %q", got)
	}
	if got := c.Error(); got != "cpus 0.20001 (a quota of 20.001ms per 100ms period) is wrong" {
		t.Errorf("OfCPUs: %q", got)
	}
	if le.Field != FieldQuota || le.OfCPUs("1") == le || (&LimitError{Field: FieldBurst}).OfCPUs("1").Field != FieldBurst {
		t.Errorf("OfCPUs changed the error, or restated a burst")
	}
}

// On cgroup v1 a quota per period above the nearest limited ancestor's
// is refused, compared as the kernel does; unlimited ancestors are passed
// over and the parent may not exist yet.
func TestCheckAncestorQuota(t *testing.T) {
	const ms, us = time.Millisecond, time.Microsecond
	root := t.TempDir()
	write := func(dir, quota, period string) {
		t.Helper()
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for name, v := range map[string]string{"cpu.cfs_quota_us": quota, "cpu.cfs_period_us": period} {
			if err := os.WriteFile(filepath.Join(dir, name), []byte(v+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	write(root, "-1", "100000")
	write(filepath.Join(root, "pod"), "150000", "100000") // 1.5 CPUs
	write(filepath.Join(root, "pod", "mid"), "-1", "100000")
	write(filepath.Join(root, "free"), "-1", "100000")
	tests := []struct {
		parent string
		l      Limits
		max    time.Duration // 0: allowed
	}{
		{"pod/mid/cfsprobe", Limits{Period: 100 * ms, Quota: 150 * ms}, 0},
		{"pod/mid/cfsprobe", Limits{Period: 100 * ms, Quota: 150*ms + us}, 150 * ms},
		{"pod/mid/cfsprobe", Limits{Period: 10 * ms, Quota: 15 * ms}, 0},
		{"pod/mid/cfsprobe", Limits{Period: 10 * ms, Quota: 16 * ms}, 15 * ms},
		// 1.5 CPUs of 333333us is 499999.5us: the kernel's ratio allows
		// 499999us, its truncation to 20 fractional bits no more.
		{"pod/mid/cfsprobe", Limits{Period: 333333 * us, Quota: 499999 * us}, 0},
		{"pod/mid/cfsprobe", Limits{Period: 333333 * us, Quota: 500000 * us}, 499999 * us},
		{"pod", Limits{Period: 100 * ms, Quota: 200 * ms}, 150 * ms},
		{"pod/mid/cfsprobe", Limits{Period: 100 * ms}, 0}, // unlimited inherits
		{"free/cfsprobe", Limits{Period: 100 * ms, Quota: MaxQuota}, 0},
	}
	for _, tc := range tests {
		m := NewManager(&Layout{CPU: &Hierarchy{Version: 1, Dir: root, Root: "/"}}, tc.parent)
		err := m.Check(tc.l)
		if tc.max == 0 {
			if err != nil {
				t.Errorf("%s, %+v: %v, want nil", tc.parent, tc.l, err)
			}
			continue
		}
		var le *LimitError
		if !errors.As(err, &le) || le.Field != FieldQuota || !le.HasMax || le.Max != tc.max || !strings.Contains(err.Error(), "ancestor group /pod ") {
			t.Errorf("%s, %+v: %v (%+v), want a quota error with Max %v naming /pod", tc.parent, tc.l, err, le, tc.max)
		}
	}
}

// maxQuotaUnder is the largest quota whose ratio does not exceed the
// given one: one microsecond more exceeds it.
func TestMaxQuotaUnder(t *testing.T) {
	const us = time.Microsecond
	for _, parent := range []Limits{{Period: 100000 * us, Quota: 150000 * us}, {Period: 333333 * us, Quota: 1000 * us}, {Period: 1000 * us, Quota: 1000 * us}, {Period: time.Second, Quota: 7777777 * us}} {
		r := bwRatio(parent.Quota, parent.Period)
		for _, p := range []time.Duration{1000 * us, 1001 * us, 33333 * us, 100000 * us, 999999 * us, time.Second} {
			q := maxQuotaUnder(r, p)
			if bwRatio(q, p) > r || bwRatio(q+us, p) <= r {
				t.Errorf("parent %+v, period %v: maxQuotaUnder = %v, ratios %d %d vs %d", parent, p, q, bwRatio(q, p), bwRatio(q+us, p), r)
			}
		}
	}
	if got := maxQuotaUnder(bwRatio(MaxQuota, time.Millisecond), time.Second); got != MaxQuota {
		t.Errorf("maxQuotaUnder beyond the kernel's maximum = %v", got)
	}
}

func TestParseKernelRelease(t *testing.T) {
	tests := []struct {
		in           string
		major, minor int
		ok           bool
	}{
		{"6.18.44-fc-v669", 6, 18, true},
		{"5.15.0-91-generic", 5, 15, true},
		{"4.18.0-513.5.1.el8_9.x86_64", 4, 18, true},
		{"3.10.0-1160.el7.x86_64", 3, 10, true},
		{"6.1.0-18-amd64", 6, 1, true},
		{"6.8-rc3", 6, 8, true},
		{"6.10", 6, 10, true},
		{"6.9+", 6, 9, true},
		{"10.0.0", 10, 0, true},
		{"", 0, 0, false},
		{"6", 0, 0, false},
		{"6.", 0, 0, false},
		{"6.x", 0, 0, false},
		{"a.b.c", 0, 0, false},
		{"v6.1", 0, 0, false},
	}
	for _, tc := range tests {
		ma, mi, ok := ParseKernelRelease(tc.in)
		if ma != tc.major || mi != tc.minor || ok != tc.ok {
			t.Errorf("ParseKernelRelease(%q) = %d, %d, %v; want %d, %d, %v", tc.in, ma, mi, ok, tc.major, tc.minor, tc.ok)
		}
	}
}
