package trace

import "fmt"

// Finish computes the timeline, the summary and the checks of a trace
// from its counter samples (the first at the start of the run, the last
// at its end), wallNs long. fresh says the group ran nothing before the
// first sample (the lab or the simulator made it). The lab, record and
// the simulator all finish their traces here, so that a period, the
// summary's figures and the checks mean the same in each.
func Finish(tr *Trace, samples []CounterSample, wallNs int64, fresh bool) {
	first, last := samples[0], samples[len(samples)-1]
	lim := tr.Limits.Cgroup()
	tr.Periods = BuildTimeline(samples, TrackerConfig{
		Period: lim.Period, Quota: lim.Quota, CPUs: tr.Host.CPUs, FromStart: fresh,
	})
	s := &tr.Summary
	s.WallNs = wallNs
	s.UsageNs = last.UsageNs - first.UsageNs
	s.NrPeriods = last.NrPeriods - first.NrPeriods
	s.NrThrottled = last.NrThrottled - first.NrThrottled
	s.ThrottledNs = last.ThrottledNs - first.ThrottledNs
	s.NrBursts = last.NrBursts - first.NrBursts
	s.BurstNs = last.BurstNs - first.BurstNs
	if s.NrPeriods > 0 {
		s.ThrottledRatio = float64(s.NrThrottled) / float64(s.NrPeriods)
	}
	if wallNs > 0 {
		s.CPURatio = float64(s.UsageNs) / float64(wallNs)
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
