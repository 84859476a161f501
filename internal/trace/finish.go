package trace

import "fmt"

// CounterSummary is the summary's counters of a run (its counter
// samples, the first at its start, the last at its end, wallNs long):
// what the kernel counted, the throttled ratio and the CPU used.
func CounterSummary(samples []CounterSample, wallNs int64) Summary {
	first, last := samples[0], samples[len(samples)-1]
	s := Summary{WallNs: wallNs, UsageNs: last.UsageNs - first.UsageNs, NrPeriods: last.NrPeriods - first.NrPeriods,
		NrThrottled: last.NrThrottled - first.NrThrottled, ThrottledNs: last.ThrottledNs - first.ThrottledNs,
		NrBursts: last.NrBursts - first.NrBursts, BurstNs: last.BurstNs - first.BurstNs}
	if s.NrPeriods > 0 {
		s.ThrottledRatio = float64(s.NrThrottled) / float64(s.NrPeriods)
	}
	if wallNs > 0 {
		s.CPURatio = float64(s.UsageNs) / float64(wallNs)
	}
	return s
}

// Finish computes the timeline, the summary and the checks of a trace
// from its counter samples (the first at the start of the run, the last
// at its end), wallNs long. fresh says the group ran nothing before the
// first sample (the lab or the simulator made it). The lab, record and
// the simulator all finish their traces here, so that a period, the
// summary's figures and the checks mean the same in each.
func Finish(tr *Trace, samples []CounterSample, wallNs int64, fresh bool) {
	lim := tr.Limits.Cgroup()
	tr.Periods = BuildTimeline(samples, TrackerConfig{
		Period: lim.Period, Quota: lim.Quota, CPUs: tr.Host.CPUs, FromStart: fresh,
	})
	s := &tr.Summary
	c := CounterSummary(samples, wallNs)
	s.WallNs, s.UsageNs, s.NrPeriods, s.NrThrottled, s.ThrottledNs, s.NrBursts, s.BurstNs = c.WallNs, c.UsageNs, c.NrPeriods, c.NrThrottled, c.ThrottledNs, c.NrBursts, c.BurstNs
	if c.NrPeriods > 0 {
		s.ThrottledRatio = c.ThrottledRatio
	}
	if wallNs > 0 {
		s.CPURatio = c.CPURatio
	}
	s.TimelineThrottled = CountThrottled(tr.Periods)
	if tr.Latency != nil {
		s.Ops = tr.Latency.Count
		s.LatencyNs, _ = tr.Latency.Percentiles()
	}
	tr.Checks = append(tr.Checks, Check{
		Name:   "timeline_matches_nr_throttled",
		OK:     s.TimelineThrottled == s.NrThrottled,
		Detail: fmt.Sprintf("timeline has %d throttled periods, the kernel counted %d", s.TimelineThrottled, s.NrThrottled),
	})
	if tr.Process.RusageNs > 0 && tr.Spec.Workload != "command" {
		d := float64(s.UsageNs-tr.Process.RusageNs) / float64(tr.Process.RusageNs)
		tr.Checks = append(tr.Checks, Check{
			Name:   "usage_matches_rusage",
			OK:     d < 0.02 && d > -0.02,
			Detail: fmt.Sprintf("group usage %.1fms, process getrusage %.1fms (%+.2f%%)", float64(s.UsageNs)/1e6, float64(tr.Process.RusageNs)/1e6, 100*d),
		})
	}
}
