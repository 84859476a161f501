package cgroup

import (
	"errors"
	"math"
	"slices"
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
	const ms = time.Millisecond
	tests := []struct {
		name string
		l    Limits
		// fix is a part of the message that says what to do; "" means valid.
		fix string
	}{
		{name: "zero value: unlimited, default period", l: Limits{}},
		{name: "quota and default period", l: Limits{Quota: 20 * ms}},
		{name: "least period and quota", l: Limits{Period: ms, Quota: ms}},
		{name: "largest period", l: Limits{Period: time.Second, Quota: 500 * ms}},
		{name: "more than one CPU", l: Limits{Period: 100 * ms, Quota: 250 * ms}},
		{name: "burst equal to quota", l: Limits{Quota: 20 * ms, Burst: 20 * ms}},
		{name: "cpuset", l: Limits{Cpuset: "0-1,3"}},
		{name: "period whole microseconds", l: Limits{Period: 1500 * time.Microsecond, Quota: ms}},

		{name: "period below 1ms", l: Limits{Period: 999 * time.Microsecond, Quota: ms}, fix: "--period 1ms or more"},
		{name: "negative period", l: Limits{Period: -ms}, fix: "--period 1ms or more"},
		{name: "period above 1s", l: Limits{Period: time.Second + time.Microsecond, Quota: ms}, fix: "--period 1s or less"},
		{name: "period not whole microseconds", l: Limits{Period: 100*ms + 500, Quota: 20 * ms}, fix: "--period"},
		{name: "negative quota", l: Limits{Quota: -ms}, fix: "leave it out"},
		{name: "quota below 1ms", l: Limits{Quota: 999 * time.Microsecond}, fix: "raise --quota or --cpus"},
		{name: "quota below 1ms names the least --cpus", l: Limits{Period: 10 * ms, Quota: 500 * time.Microsecond}, fix: "--cpus 0.1 is the least"},
		{name: "negative burst", l: Limits{Quota: 20 * ms, Burst: -ms}, fix: "--burst"},
		{name: "burst without quota", l: Limits{Burst: ms}, fix: "add --quota or --cpus"},
		{name: "burst above quota", l: Limits{Quota: 20 * ms, Burst: 21 * ms}, fix: "lower --burst"},
		{name: "bad cpuset", l: Limits{Cpuset: "0-"}, fix: "like 0-1 or 0,2"},
		{name: "cpuset range reversed", l: Limits{Cpuset: "3-1"}, fix: "like 0-1 or 0,2"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.l.Validate()
			if tc.fix == "" {
				if err != nil {
					t.Fatalf("Validate(%+v) = %v, want nil", tc.l, err)
				}
				return
			}
			var le *LimitError
			if !errors.As(err, &le) {
				t.Fatalf("Validate(%+v) = %v, want a *LimitError", tc.l, err)
			}
			msg := err.Error()
			if !strings.Contains(msg, tc.fix) {
				t.Errorf("message %q does not say %q", msg, tc.fix)
			}
			// One sentence, no final full stop (it is wrapped and printed).
			if strings.Contains(msg, ". ") || strings.HasSuffix(msg, ".") {
				t.Errorf("message %q is not one sentence saying what to do", msg)
			}
		})
	}
}

func TestLimitsDerived(t *testing.T) {
	const ms = time.Millisecond
	tests := []struct {
		l         Limits
		unlimited bool
		period    time.Duration
		cpus      float64
	}{
		{Limits{}, true, 100 * ms, 0},
		{Limits{Period: 10 * ms}, true, 10 * ms, 0},
		{Limits{Quota: 50 * ms}, false, 100 * ms, 0.5},
		{Limits{Period: 20 * ms, Quota: 50 * ms}, false, 20 * ms, 2.5},
	}
	for _, tc := range tests {
		if got := tc.l.Unlimited(); got != tc.unlimited {
			t.Errorf("%+v.Unlimited() = %v", tc.l, got)
		}
		if got := tc.l.EffectivePeriod(); got != tc.period {
			t.Errorf("%+v.EffectivePeriod() = %v, want %v", tc.l, got, tc.period)
		}
		if got := tc.l.CPUs(); math.Abs(got-tc.cpus) > 1e-12 {
			t.Errorf("%+v.CPUs() = %v, want %v", tc.l, got, tc.cpus)
		}
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
