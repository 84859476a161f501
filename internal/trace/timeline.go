package trace

import "sort"

// BuildTimeline turns the counter samples of a whole run into its
// timeline.
//
// With a quota, the periods are the Tracker's, fed every sample in turn;
// the grid of the kernel's period timer is learnt from the whole run
// first, so that the first periods are placed as precisely as the last.
// The number of throttled periods then equals the nr_throttled delta
// between the first and the last sample, unless the last count came too
// late for any period (a reading torn at the very end).
//
// Without a quota there is no enforcement period: the timeline is
// wall-clock windows of one period from the start, so that limited and
// unlimited runs can be drawn alike.
func BuildTimeline(samples []CounterSample, c TrackerConfig) []Period {
	if len(samples) < 2 || c.Period <= 0 {
		return []Period{}
	}
	if c.Quota <= 0 {
		return wallclockWindows(samples, int64(c.Period))
	}
	c.Keep = len(samples)
	t := NewTracker(c)
	for i := 1; i < len(samples); i++ {
		if a, b := samples[i-1], samples[i]; b.NrPeriods-a.NrPeriods == 1 && b.T > a.T {
			t.learn(a.T, b.T)
		}
	}
	out := []Period{}
	emit := func(p Period) { out = append(out, p) }
	for _, s := range samples {
		t.Add(s, emit)
	}
	t.Flush(emit)
	// Throttled counts that came after their periods were handed out:
	// the latest unthrottled periods take them.
	// So do stall and burst time that came after the last period was
	// handed out.
	markLatest(out, t.carryThr)
	if n := len(out); n > 0 {
		out[n-1].ThrottledNs += t.carryStall
		out[n-1].BurstNs += t.carryBurst
	}
	return out
}

// usageAt interpolates cumulative usage at time t between samples.
func usageAt(s []CounterSample, t int64) int64 {
	if t <= s[0].T {
		return s[0].UsageNs
	}
	last := s[len(s)-1]
	if t >= last.T {
		return last.UsageNs
	}
	i := sort.Search(len(s), func(i int) bool { return s[i].T >= t })
	a, b := s[i-1], s[i]
	if b.T == a.T {
		return b.UsageNs
	}
	f := float64(t-a.T) / float64(b.T-a.T)
	return a.UsageNs + int64(f*float64(b.UsageNs-a.UsageNs))
}

func wallclockWindows(s []CounterSample, periodNs int64) []Period {
	out := []Period{}
	end := s[len(s)-1].T
	for t := s[0].T; t < end; t += periodNs {
		e := min(t+periodNs, end)
		u := usageAt(s, e) - usageAt(s, t)
		p := Period{StartNs: t, EndNs: e, UsageNs: u}
		if e > t {
			p.RunningCPUs = float64(u) / float64(e-t)
		}
		out = append(out, p)
	}
	return out
}

// CountThrottled counts the timeline's throttled periods.
func CountThrottled(ps []Period) int64 {
	var n int64
	for _, p := range ps {
		if p.Throttled {
			n++
		}
	}
	return n
}
