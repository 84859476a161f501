package trace

import (
	"testing"
	"time"
)

// Stretches counts a stretch when the period after it is not throttled,
// and a catch-up when that period came right after and used a tenth of
// the quota or more; one still going at the end is not counted.
func TestStretches(t *testing.T) {
	const ms = int64(time.Millisecond)
	quota := 20 * time.Millisecond
	var at int64
	p := func(throttled bool, usageMs float64, gap int64) Period {
		at += gap * 100 * ms
		per := Period{StartNs: at, EndNs: at + 100*ms, UsageNs: int64(usageMs * float64(ms)), Throttled: throttled}
		at += 100 * ms
		return per
	}
	var s Stretches
	for _, per := range []Period{
		p(false, 1, 0),
		p(true, 20, 0), p(true, 20, 0), p(false, 5, 0), // caught up (5 ms ≥ 2)
		p(true, 20, 0), p(false, 1, 0), // hardly ran after: not caught up
		p(true, 20, 0), p(false, 10, 3), // idle for 3 periods first: not caught up
		p(true, 20, 0), p(false, 2, 0), // exactly a tenth: caught up
		p(true, 20, 0), // still going
	} {
		s.Add(per, quota)
	}
	if s.Ended != 4 || s.CaughtUp != 2 {
		t.Errorf("%d ended, %d caught up; want 4 and 2", s.Ended, s.CaughtUp)
	}
	if s.Closed() {
		t.Errorf("2 of 4 caught up reads as closed")
	}
	if (Stretches{Ended: 10, CaughtUp: 9}).Closed() != true || (Stretches{Ended: 10, CaughtUp: 8}).Closed() || (Stretches{}).Closed() {
		t.Errorf("Closed: 9 of 10 is, 8 of 10 and none are not")
	}
	// Throttled in nearly every period: not closed, however its stretches
	// ended; unknown (an older exporter): the stretches decide.
	for _, tc := range []struct {
		st         Stretches
		unrelieved bool
	}{
		{Stretches{Ended: 15, CaughtUp: 15, Periods: 1500, Throttled: 1485}, true},
		{Stretches{Ended: 15, CaughtUp: 15, Periods: 1500, Throttled: 1425}, false},
		{Stretches{Ended: 15, CaughtUp: 15}, false},
	} {
		if got := tc.st.Unrelieved(); got != tc.unrelieved || tc.st.Closed() == got {
			t.Errorf("%+v: unrelieved %v, closed %v; want unrelieved %v, closed %v", tc.st, got, tc.st.Closed(), tc.unrelieved, !tc.unrelieved)
		}
	}
	var none Stretches
	none.Add(p(true, 20, 0), 0)
	none.Add(p(false, 20, 0), 0)
	if none.Ended != 1 || none.CaughtUp != 0 {
		t.Errorf("without a quota: %+v, want 1 ended and none caught up", none)
	}
}
