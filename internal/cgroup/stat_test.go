package cgroup

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"
)

func TestParseCPUStat(t *testing.T) {
	const maxI = math.MaxInt64
	tests := []struct {
		name    string
		version int
		in      string
		want    Stat
		err     bool
	}{
		{
			name:    "v1 with burst counters (5.14+)",
			version: 1,
			in:      "nr_periods 1234\nnr_throttled 567\nthrottled_time 8901234567\nnr_bursts 12\nburst_time 3400000\n",
			want:    Stat{NrPeriods: 1234, NrThrottled: 567, ThrottledNs: 8901234567, NrBursts: 12, BurstNs: 3400000},
		},
		{
			name:    "v1 without burst counters",
			version: 1,
			in:      "nr_periods 10\nnr_throttled 2\nthrottled_time 300\n",
			want:    Stat{NrPeriods: 10, NrThrottled: 2, ThrottledNs: 300},
		},
		{
			name:    "v1 with schedstats wait_sum and v2-only keys ignored",
			version: 1,
			in:      "nr_periods 10\nnr_throttled 2\nthrottled_time 300\nwait_sum 999\nusage_usec 5\nthrottled_usec 7\n",
			want:    Stat{NrPeriods: 10, NrThrottled: 2, ThrottledNs: 300},
		},
		{
			name:    "v2 with every key of 6.x",
			version: 2,
			in: "usage_usec 182736455\nuser_usec 150042311\nsystem_usec 32694144\nnice_usec 0\n" +
				"core_sched.force_idle_usec 0\nnr_periods 52311\nnr_throttled 8812\nthrottled_usec 401223344\n" +
				"nr_bursts 3\nburst_usec 45000\n",
			want: Stat{UsageNs: 182736455000, NrPeriods: 52311, NrThrottled: 8812, ThrottledNs: 401223344000, NrBursts: 3, BurstNs: 45000000},
		},
		{
			name:    "v2 without the cpu controller enabled",
			version: 2,
			in:      "usage_usec 343469360\nuser_usec 274819440\nsystem_usec 68649920\n",
			want:    Stat{UsageNs: 343469360000},
		},
		{
			name:    "v2 ignores v1 keys",
			version: 2,
			in:      "usage_usec 1\nthrottled_time 99\nburst_time 99\n",
			want:    Stat{UsageNs: 1000},
		},
		{name: "v1 empty", version: 1, in: "", want: Stat{}},
		{name: "v2 empty", version: 2, in: "", want: Stat{}},
		{
			name:    "blank lines, tabs and extra spaces",
			version: 2,
			in:      "\n  usage_usec\t 7 \n\n nr_periods   3\n",
			want:    Stat{UsageNs: 7000, NrPeriods: 3},
		},
		{
			name:    "negative values clamp to zero",
			version: 1,
			in:      "nr_periods -5\nnr_throttled -1\nthrottled_time -9223372036854775808\nburst_time -99999999999999999999\n",
			want:    Stat{},
		},
		{
			name:    "v1 u64 values beyond int64 saturate",
			version: 1,
			in:      "nr_periods 18446744073709551615\nthrottled_time 9223372036854775808\n",
			want:    Stat{NrPeriods: maxI, ThrottledNs: maxI},
		},
		{
			name:    "v2 us to ns saturates",
			version: 2,
			in:      "usage_usec 9223372036854776\nthrottled_usec 9223372036854775\nburst_usec 18446744073709551615\n",
			want:    Stat{UsageNs: maxI, ThrottledNs: 9223372036854775000, BurstNs: maxI},
		},
		{
			name:    "v2 largest value that fits",
			version: 2,
			in:      "usage_usec 9223372036854775807\n",
			want:    Stat{UsageNs: maxI},
		},
		{name: "key without value", version: 1, in: "nr_periods\n", err: true},
		{name: "three fields", version: 1, in: "nr_periods 1 2\n", err: true},
		{name: "non-numeric value", version: 1, in: "nr_periods x\n", err: true},
		{name: "fraction", version: 2, in: "usage_usec 1.5\n", err: true},
		{name: "hex", version: 2, in: "usage_usec 0x10\n", err: true},
		{name: "bad line after good ones", version: 2, in: "usage_usec 1\nnr_periods 2\nnr_throttled 3x\n", err: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseCPUStat(strings.NewReader(tc.in), tc.version)
			if tc.err {
				if err == nil {
					t.Fatalf("parseCPUStat: no error, got %+v", got)
				}
				if !errors.Is(err, errSyntax) {
					t.Errorf("err = %v, want errSyntax", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("parseCPUStat: %v", err)
			}
			if got != tc.want {
				t.Errorf("parseCPUStat =\n%+v\nwant\n%+v", got, tc.want)
			}
		})
	}
}

func TestParseCPUStatErrorNamesLine(t *testing.T) {
	_, err := parseCPUStat(strings.NewReader("nr_periods 1\nnr_throttled x\n"), 1)
	if err == nil || !strings.Contains(err.Error(), `"nr_throttled x"`) {
		t.Errorf("err = %v, want it to quote the line", err)
	}
}

func TestStatSub(t *testing.T) {
	a := Stat{UsageNs: 10, NrPeriods: 20, NrThrottled: 30, ThrottledNs: 40, NrBursts: 50, BurstNs: 60}
	b := Stat{UsageNs: 1, NrPeriods: 2, NrThrottled: 3, ThrottledNs: 4, NrBursts: 5, BurstNs: 6}
	want := Stat{UsageNs: 9, NrPeriods: 18, NrThrottled: 27, ThrottledNs: 36, NrBursts: 45, BurstNs: 54}
	if got := a.Sub(b); got != want {
		t.Errorf("Sub = %+v, want %+v", got, want)
	}
}

func TestParseUsage(t *testing.T) {
	tests := []struct {
		in   string
		want int64
		err  bool
	}{
		{in: "347763830968\n", want: 347763830968},
		{in: "0\n", want: 0},
		{in: "  42  \n", want: 42},
		{in: "-5\n", want: 0},
		{in: "18446744073709551615\n", want: math.MaxInt64},
		{in: "", err: true},
		{in: "\n", err: true},
		{in: "12 34\n", err: true},
		{in: "abc\n", err: true},
	}
	for _, tc := range tests {
		got, err := parseUsage(strings.NewReader(tc.in))
		if tc.err {
			if err == nil {
				t.Errorf("parseUsage(%q) = %d, want an error", tc.in, got)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("parseUsage(%q) = %d, %v; want %d", tc.in, got, err, tc.want)
		}
	}
}

func TestParseCPUMax(t *testing.T) {
	const ms = time.Millisecond
	tests := []struct {
		in   string
		want Limits
		err  bool
	}{
		{in: "max 100000\n", want: Limits{Period: 100 * ms}},
		{in: "20000 100000\n", want: Limits{Quota: 20 * ms, Period: 100 * ms}},
		{in: "150000 100000\n", want: Limits{Quota: 150 * ms, Period: 100 * ms}},
		{in: "1000 1000\n", want: Limits{Quota: ms, Period: ms}},
		{in: "max 1000000", want: Limits{Period: time.Second}},
		// A missing period is the kernel's default.
		{in: "max\n", want: Limits{Period: 100 * ms}},
		{in: "50000\n", want: Limits{Quota: 50 * ms, Period: 100 * ms}},
		{in: "  20000\t100000  \n", want: Limits{Quota: 20 * ms, Period: 100 * ms}},
		// The kernel never shows more than 2^44-1 us; the largest value
		// that still fits a time.Duration is accepted.
		{in: "9223372036854775 100000\n", want: Limits{Quota: 9223372036854775 * time.Microsecond, Period: 100 * ms}},
		{in: "", err: true},
		{in: "\n", err: true},
		{in: "garbage\n", err: true},
		{in: "max 100000 1\n", err: true},
		{in: "max abc\n", err: true},
		{in: "max 0\n", err: true},
		{in: "max -100000\n", err: true},
		{in: "0 100000\n", err: true},
		{in: "-1 100000\n", err: true},
		{in: "1.5 100000\n", err: true},
		{in: "MAX 100000\n", err: true},
		// Values whose nanoseconds overflow int64 are not durations.
		{in: "9223372036854776 100000\n", err: true},
		{in: "9223372036854775807 100000\n", err: true},
		{in: "max 9223372036854775807\n", err: true},
	}
	for _, tc := range tests {
		got, err := parseCPUMax(strings.NewReader(tc.in))
		if tc.err {
			if err == nil {
				t.Errorf("parseCPUMax(%q) = %+v, want an error", tc.in, got)
			} else if !errors.Is(err, errSyntax) {
				t.Errorf("parseCPUMax(%q): err = %v, want errSyntax", tc.in, err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("parseCPUMax(%q) = %+v, %v; want %+v", tc.in, got, err, tc.want)
		}
		if got.Unlimited() != (tc.want.Quota == 0) {
			t.Errorf("parseCPUMax(%q).Unlimited() = %v", tc.in, got.Unlimited())
		}
	}
}

func TestParseV1Max(t *testing.T) {
	const ms = time.Millisecond
	tests := []struct {
		quota, period string
		want          Limits
		err           bool
	}{
		{quota: "-1\n", period: "100000\n", want: Limits{Period: 100 * ms}},
		// Not positive is no quota too (a fixture's 0, a kernel bug's -2).
		{quota: "0\n", period: "100000\n", want: Limits{Period: 100 * ms}},
		{quota: "-2\n", period: "50000\n", want: Limits{Period: 50 * ms}},
		{quota: "20000\n", period: "100000\n", want: Limits{Quota: 20 * ms, Period: 100 * ms}},
		{quota: "250000", period: "50000", want: Limits{Quota: 250 * ms, Period: 50 * ms}},
		{quota: "1000\n", period: "1000000\n", want: Limits{Quota: ms, Period: time.Second}},
		{quota: " 20000 ", period: " 100000 ", want: Limits{Quota: 20 * ms, Period: 100 * ms}},
		{quota: "abc\n", period: "100000\n", err: true},
		{quota: "\n", period: "100000\n", err: true},
		{quota: "20000\n", period: "\n", err: true},
		{quota: "20000\n", period: "0\n", err: true},
		{quota: "20000\n", period: "-100000\n", err: true},
		{quota: "20000\n", period: "1e5\n", err: true},
		// Values whose nanoseconds overflow int64 are not durations.
		{quota: "9223372036854775807\n", period: "100000\n", err: true},
		{quota: "20000\n", period: "9223372036854775807\n", err: true},
	}
	for _, tc := range tests {
		got, err := parseV1Max(strings.NewReader(tc.quota), strings.NewReader(tc.period))
		if tc.err {
			if err == nil {
				t.Errorf("parseV1Max(%q, %q) = %+v, want an error", tc.quota, tc.period, got)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("parseV1Max(%q, %q) = %+v, %v; want %+v", tc.quota, tc.period, got, err, tc.want)
		}
	}
}
