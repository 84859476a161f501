package workload

import (
	"testing"
	"time"
)

// ProcessCosts measures the C engine's start and a wake-up on this host:
// both positive, the start (exec, mappings, a thread, exit) far more than
// a wake-up, and both within what any machine of this kind takes (0.6 to
// 1.4 ms and about 25 µs here; an emulated guest takes up to 20 times
// as long).
func TestProcessCosts(t *testing.T) {
	needEngine(t)
	c, err := ProcessCosts()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("start %v, wake-up %v", c.Start, c.Wake)
	if c.Start < 100*time.Microsecond || c.Start > 100*time.Millisecond {
		t.Errorf("start %v, want 100µs to 100ms", c.Start)
	}
	if c.Wake <= 0 || c.Wake > 5*time.Millisecond {
		t.Errorf("wake-up %v, want more than nothing and at most 5ms", c.Wake)
	}
	if c.Start < 5*c.Wake {
		t.Errorf("start %v, wake-up %v: want the start far longer", c.Start, c.Wake)
	}
}
