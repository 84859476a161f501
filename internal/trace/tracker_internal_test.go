package trace

import "testing"

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
