package workload

import (
	"testing"

	"golang.org/x/sys/unix"
)

// ClockMono is CLOCK_MONOTONIC as the kernel gives it: between two
// readings of the system call.
func TestClockMonoIsTheKernelsMonotonicClock(t *testing.T) {
	for range 100 {
		var a, b unix.Timespec
		_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &a)
		m := ClockMono()
		_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &b)
		if m < a.Nano() || m > b.Nano() {
			t.Fatalf("ClockMono %d is not between two readings of the kernel's clock, %d and %d", m, a.Nano(), b.Nano())
		}
	}
}
