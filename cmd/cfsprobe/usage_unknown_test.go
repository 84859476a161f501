package main

// No throttled group is invisible: a group made in the cgroup v1 cpu
// hierarchy alone, while cpuacct (which keeps usage on v1) is mounted
// apart, as on the test machine. top --once --json and the exporter's
// /metrics list it with the throttling its cpu.stat counts, its usage
// unknown and why.

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cfsprobe/cfsprobe/internal/cgroup"
	"github.com/cfsprobe/cfsprobe/internal/monitor"
	"github.com/cfsprobe/cfsprobe/internal/testenv"
	"github.com/cfsprobe/cfsprobe/internal/top"
)

// Must show: a busy shell loop in a group made with mkdir under the cpu
// hierarchy only, 5 ms per 100 ms, throttled in every period. top lists
// it with its usage null and the reason, and its throttled periods over
// its interval are those cpu.stat counts over the run less at most the
// periods outside top's interval; /metrics has its throttled periods
// between cpu.stat read just before and just after the scrape,
// cfsprobe_cpu_usage_unknown with the reason and no usage series.
func TestCPUOnlyGroupRealCgroups(t *testing.T) {
	l := needCgroups(t)
	if l.CPU.Version != 1 || l.CPUAcct == nil || l.CPUAcct.Dir == l.CPU.Dir {
		// cgroup v2 has one hierarchy, and co-mounted v1 hierarchies one
		// directory per group: a group is never in cpu alone there.
		t.Skipf("cpu (%s) is not a cgroup v1 hierarchy mounted apart from cpuacct: no group can exist in it alone", l.CPU.Dir)
	}
	name := fmt.Sprintf("cfsprobe-cpuonly-%d", os.Getpid())
	dir, rel := filepath.Join(l.CPU.Dir, name), "/"+name
	const quotaUs, periodUs = 5000, 100000
	// Registered before anything is made, so that a failure at any step
	// still removes the group (after busyLoop's cleanup killed the loop).
	t.Cleanup(func() {
		rmCgroup(t, dir)
		testenv.NoLeftovers(t, l, name)
	})
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatalf("create cgroup: %v", err)
	}
	if _, err := os.Stat(filepath.Join(l.CPUAcct.Dir, name)); err == nil {
		t.Fatalf("%s exists in cpuacct too: not the case under test", name)
	}
	setQuota(t, 1, dir, quotaUs, periodUs)
	busyLoop(t, dir)
	// The group's own counters: cpu.stat, no cpuacct.usage.
	stat := func() cgroup.Stat {
		t.Helper()
		s, err := cgroup.ReadStat(dir, "", 1)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	if !waitFor(5*time.Second, func() bool { return stat().NrThrottled >= 3 }) {
		t.Fatalf("the busy loop under %dus per %dus was not throttled: %+v", quotaUs, periodUs, stat())
	}

	t.Run("top", func(t *testing.T) {
		before := stat()
		start := time.Now()
		r := cfsprobe(t, "top", "--once", "--json", "--interval", "1s", "--cgroup-root", "/sys/fs/cgroup")
		wall := time.Since(start)
		after := stat()
		if r.code != 0 {
			t.Fatalf("cfsprobe top: exit %d\n%s", r.code, r.stderr)
		}
		var rows []top.Row
		if err := json.Unmarshal([]byte(r.stdout), &rows); err != nil {
			t.Fatalf("decode: %v\n%s", err, r.stdout)
		}
		var row *top.Row
		for i := range rows {
			if rows[i].Cgroup == rel {
				row = &rows[i]
			}
		}
		if row == nil {
			t.Fatalf("top does not list %s, made in the cpu hierarchy only:\n%s", rel, r.stdout)
		}
		if !row.Ready() {
			t.Fatalf("%s has no figures: %+v", rel, *row)
		}
		if u := row.UsageUnknown; u == nil || u.Reason != monitor.UsageNoCpuacctGroup || !strings.Contains(u.Detail, "cpuacct") {
			t.Errorf("usage_unknown %+v, want reason %s and why", u, monitor.UsageNoCpuacctGroup)
		}
		if row.UsageCPUs != nil || row.Interval.UsageNs != nil {
			t.Errorf("usage %v, interval usage %v: want null", row.UsageCPUs, row.Interval.UsageNs)
		}
		if q := row.Limits.QuotaUs; q == nil || *q != quotaUs || row.Limits.PeriodUs != periodUs {
			t.Errorf("limits %+v, want %dus per %dus", row.Limits, quotaUs, periodUs)
		}
		d := after.Sub(before)
		iv := row.Interval
		t.Logf("cpu.stat over %v: periods %d throttled %d (%v); top over %v: periods %d throttled %d (%v), ratio %.2f",
			wall.Round(time.Millisecond), d.NrPeriods, d.NrThrottled, time.Duration(d.ThrottledNs),
			time.Duration(iv.WallNs).Round(time.Millisecond), iv.NrPeriods, iv.NrThrottled, time.Duration(iv.ThrottledNs), *row.ThrottledRatio)
		// top's two readings lie between the test's: it counts at most
		// what cpu.stat counted over the run, and misses at most the
		// periods that ended outside its interval (one more at each end
		// for a boundary between a reading and the next).
		slack := int64((wall-time.Duration(iv.WallNs))/(periodUs*time.Microsecond)) + 2
		if iv.NrThrottled > d.NrThrottled || iv.NrThrottled < d.NrThrottled-slack {
			t.Errorf("top counted %d throttled periods; cpu.stat %d over the run: want %d-%d to %d", iv.NrThrottled, d.NrThrottled, d.NrThrottled, slack, d.NrThrottled)
		}
		if iv.NrPeriods > d.NrPeriods || iv.NrPeriods < d.NrPeriods-slack {
			t.Errorf("top counted %d periods; cpu.stat %d over the run: want %d-%d to %d", iv.NrPeriods, d.NrPeriods, d.NrPeriods, slack, d.NrPeriods)
		}
		if iv.ThrottledNs > d.ThrottledNs || iv.ThrottledNs <= 0 {
			t.Errorf("top's throttled time %d, cpu.stat's over the run %d", iv.ThrottledNs, d.ThrottledNs)
		}
		// A busy loop under 0.05 CPUs is throttled in (nearly) every period.
		if iv.NrThrottled < 5 || *row.ThrottledRatio < 0.8 {
			t.Errorf("throttled in %d periods (%.0f%%) over 1s; want about every period", iv.NrThrottled, 100*(*row.ThrottledRatio))
		}
	})

	t.Run("exporter", func(t *testing.T) {
		exp, addr := testenv.StartExporter(t, bin, "--cgroup-root", "/sys/fs/cgroup")
		ours := func() (map[string]float64, error) { return scrapeSeries(addr, `cgroup="`+rel+`"`) }
		throttledSeries := `cfsprobe_cpu_throttled_periods_total{cgroup="` + rel + `"}`
		if !waitFor(10*time.Second, func() bool { m, err := ours(); return err == nil && m[throttledSeries] > 0 }) {
			t.Fatalf("/metrics has no %s; exporter said:\n%s", throttledSeries, exp.Output())
		}
		before := stat()
		m, err := ours()
		after := stat()
		if err != nil {
			t.Fatalf("scrape: %v", err)
		}
		t.Logf("cpu.stat before the scrape: periods %d throttled %d (%v); after: %d %d (%v); /metrics: %v",
			before.NrPeriods, before.NrThrottled, time.Duration(before.ThrottledNs), after.NrPeriods, after.NrThrottled, time.Duration(after.ThrottledNs), m)
		for _, c := range []struct {
			series    string
			lo, hi, v float64
		}{
			{throttledSeries, float64(before.NrThrottled), float64(after.NrThrottled), m[throttledSeries]},
			{`cfsprobe_cpu_periods_total{cgroup="` + rel + `"}`, float64(before.NrPeriods), float64(after.NrPeriods), m[`cfsprobe_cpu_periods_total{cgroup="`+rel+`"}`]},
			// ns to seconds rounds: a ns either way.
			{`cfsprobe_cpu_throttled_seconds_total{cgroup="` + rel + `"}`, float64(before.ThrottledNs-1) / 1e9, float64(after.ThrottledNs+1) / 1e9, m[`cfsprobe_cpu_throttled_seconds_total{cgroup="`+rel+`"}`]},
		} {
			if c.v < c.lo || c.v > c.hi {
				t.Errorf("%s = %v; cpu.stat read just before and after the scrape: %v and %v", c.series, c.v, c.lo, c.hi)
			}
		}
		if v, ok := m[`cfsprobe_cpu_usage_unknown{cgroup="`+rel+`",reason="`+string(monitor.UsageNoCpuacctGroup)+`"}`]; !ok || v != 1 {
			t.Errorf("no cfsprobe_cpu_usage_unknown 1 with reason %s for %s", monitor.UsageNoCpuacctGroup, rel)
		}
		if v, ok := m[`cfsprobe_cpu_quota_cpus{cgroup="`+rel+`"}`]; !ok || v != 0.05 {
			t.Errorf("cfsprobe_cpu_quota_cpus %v (%v), want 0.05", v, ok)
		}
		for s := range m {
			if strings.HasPrefix(s, "cfsprobe_cpu_usage_seconds_total{") || strings.HasPrefix(s, "cfsprobe_period_usage_ratio") || strings.HasPrefix(s, "cfsprobe_stall_seconds") {
				t.Errorf("%s exposed for a group whose usage is unknown", s)
			}
		}
		if err := exp.Stop(); err != nil {
			t.Errorf("stop the exporter: %v", err)
		}
		if log := exp.Output(); !strings.Contains(log, "reason="+string(monitor.UsageNoCpuacctGroup)) {
			t.Errorf("the exporter did not log the groups without usage:\n%s", log)
		}
	})
}
