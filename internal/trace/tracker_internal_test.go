package trace

import (
	"cmp"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

func TestUsageAt(t *testing.T) {
	s := []CounterSample{{T: 10, UsageNs: 100}, {T: 20, UsageNs: 200}, {T: 20, UsageNs: 300}, {T: 40, UsageNs: 500}}
	tests := []struct{ t, want int64 }{
		{0, 100}, {10, 100}, {15, 150}, {20, 200}, {30, 400}, {40, 500}, {99, 500},
	}
	for _, tc := range tests {
		if got := usageAt(s, tc.t); got != tc.want {
			t.Errorf("usageAt(%d) = %d, want %d", tc.t, got, tc.want)
		}
	}
}

// The vote's edges are kept sorted as intervals come and go (learn), so
// that the vote needs no sort: they are always those of the arcs voting,
// in order, also when the grid moves and the vote starts afresh.
func TestVoteEdgesKept(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	tr := NewTracker(TrackerConfig{Period: 100 * time.Millisecond})
	period := int64(100 * time.Millisecond)
	phase := int64(37 * time.Millisecond)
	resets := 0
	for i := range 2000 {
		if i%300 == 299 {
			phase = r.Int64N(period) // the period timer restarted elsewhere
		}
		// An interval of up to 30 ms around a boundary, now and then one
		// that disagrees (a reading stamped late).
		k := int64(i) * period
		lo := k + phase - r.Int64N(int64(30*time.Millisecond))
		hi := k + phase + r.Int64N(int64(30*time.Millisecond))
		if r.IntN(10) == 0 {
			lo, hi = lo+int64(40*time.Millisecond), hi+int64(40*time.Millisecond)
		}
		before := len(tr.arcs)
		tr.learn(lo, hi)
		if len(tr.arcs) < before {
			resets++
		}
		var want []edge
		for _, a := range tr.arcs {
			e := a.edges(period)
			want = append(want, e[0], e[1])
		}
		slices.SortFunc(want, func(x, y edge) int { return cmp.Or(cmp.Compare(x.x, y.x), cmp.Compare(x.d, y.d)) })
		got := slices.Clone(tr.edges)
		slices.SortStableFunc(got, func(x, y edge) int { return cmp.Compare(x.d, y.d) }) // order within a position is free
		slices.SortStableFunc(got, func(x, y edge) int { return cmp.Compare(x.x, y.x) })
		if !slices.IsSortedFunc(tr.edges, func(x, y edge) int { return cmp.Compare(x.x, y.x) }) || !slices.Equal(got, want) {
			t.Fatalf("after interval %d the vote's edges are %v, want %v", i, tr.edges, want)
		}
	}
	if resets == 0 {
		t.Fatal("the grid never moved: the test did not reach the vote's fresh start")
	}
}
