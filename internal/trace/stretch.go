package trace

import "time"

// Stretches counts a group's throttled stretches (runs of consecutive
// throttled periods) that ended, and those of them after which the group
// caught up (CaughtUp): the signal that tells a closed loop, whose work
// the stalls only delayed, from a loop that runs for a time, whose work
// of the stalls was lost (docs/recommend.md, "Demand and censoring").
// The recommender reads a trace's periods through it; the exporter counts
// the periods its sampler sees with it (cfsprobe_throttled_stretches_total,
// docs/metrics.md), so that a group read from Prometheus is judged as its
// recording would be.
//
// Periods and Throttled are the periods over which they were counted and
// how many of those were throttled, which their reader sets (Add does
// not count them: the exporter's counters have them): a recording's
// periods, or cfsprobe_cpu_periods_total and
// cfsprobe_cpu_throttled_periods_total over the window (0: not known, as
// from an exporter before them).
type Stretches struct {
	Ended     int64 `json:"ended"`
	CaughtUp  int64 `json:"caught_up"`
	Periods   int64 `json:"periods,omitempty"`
	Throttled int64 `json:"throttled,omitempty"`
	last      Period
	seen      bool
}

// Add counts the group's next period under the given quota: the period
// that ends a stretch (unthrottled, after a throttled one), and whether the
// group caught up in it. A gap between periods (the group idle since a
// whole period) is no catching up.
func (s *Stretches) Add(p Period, quota time.Duration) {
	if s.seen && s.last.Throttled && !p.Throttled {
		s.Ended++
		if CaughtUp(s.last, p, quota) {
			s.CaughtUp++
		}
	}
	s.last, s.seen = p, true
}

// Closed says whether the stretches show a closed loop: some ended, the
// group caught up after at least ClosedShare of them, and it was not
// throttled nearly always (Unrelieved).
func (s Stretches) Closed() bool {
	return s.Ended > 0 && float64(s.CaughtUp) >= ClosedShare*float64(s.Ended) && !s.Unrelieved()
}

// Unrelieved says whether the group was throttled in more than
// UnrelievedShare of its periods (false when that is not known). Such a
// group never had room to show that its work was done: its few
// unthrottled periods are ones that other work kept from its quota, and
// the stretches they end "catch up" by using most of it. The fleet
// test's busy groups (1 to 4 threads that never sleep, under 0.03 to 0.1
// CPU, 20 groups on 2 CPUs) had 1 and 15 unthrottled periods of 1,500 in
// one run of 2026-12-03, each after a stretch, and read as closed loops
// that had caught up every time: 4 busy threads were advised 0.87 CPUs +
// burst, as if their work were their usage, where their recordings in
// other runs (all 1,500 periods throttled) and Prometheus (1 of 2
// stretches caught up) gave them a thread cap at 1.1 CPUs. The closed
// loops measured were throttled in 17 to 79 % of their periods.
func (s Stretches) Unrelieved() bool {
	return s.Periods > 0 && float64(s.Throttled) > UnrelievedShare*float64(s.Periods)
}

// UnrelievedShare is the share of its periods throttled above which a
// group is taken to have been throttled nearly always (Unrelieved).
const UnrelievedShare = 0.95

// CaughtUp says whether the period after a throttled stretch's last
// shows the group doing the work the stretch delayed: it came right after
// (the group did not go idle, which shows as a gap) and, let go at the
// refill, the group ran for at least CatchUpShare of the quota. A loop
// whose deadline passed while it stood still runs for a moment (it reads
// the clock and sleeps); a closed loop runs on until its work is done, and
// delayed work is rarely much less than its share of a period.
func CaughtUp(last, after Period, quota time.Duration) bool {
	return quota > 0 && after.StartNs-last.EndNs < int64(last.Length()/2) && float64(after.UsageNs) >= CatchUpShare*float64(quota)
}

// ClosedShare is the share of the throttled stretches that must have
// caught up for a group to be taken for a closed loop: a closed loop
// catches up after every one (a few readings may be off), a loop that
// runs for a time only when its deadline falls after the refill.
const ClosedShare = 0.9

// CatchUpShare is the share of the quota a group must use in the period
// after a throttled stretch to be taken for catching up with the work the
// stretch delayed.
const CatchUpShare = 0.1
