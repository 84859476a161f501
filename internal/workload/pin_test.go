package workload

import (
	"testing"

	"golang.org/x/sys/unix"
)

func TestPinSet(t *testing.T) {
	var have unix.CPUSet
	if err := unix.SchedGetaffinity(0, &have); err != nil {
		t.Fatal(err)
	}
	n := have.Count()
	for _, k := range []int{0, -1, n, n + 1} {
		if _, ok := PinSet(k); ok {
			t.Errorf("PinSet(%d) with %d CPUs: pins", k, n)
		}
	}
	if n < 2 {
		t.Skip("one CPU")
	}
	set, ok := PinSet(n - 1)
	if !ok || set.Count() != n-1 {
		t.Fatalf("PinSet(%d) = %d CPUs, %v", n-1, set.Count(), ok)
	}
	// The last n-1 of the mask: its first CPU is left out.
	first := 0
	for !have.IsSet(first) {
		first++
	}
	if set.IsSet(first) {
		t.Errorf("PinSet(%d) keeps CPU %d, the mask's first", n-1, first)
	}
	for c := first + 1; c < len(have)*64; c++ {
		if have.IsSet(c) != set.IsSet(c) {
			t.Errorf("CPU %d: in mask %v, pinned %v", c, have.IsSet(c), set.IsSet(c))
		}
	}
}
