package workload

import "golang.org/x/sys/unix"

// Pinned is a workload that keeps its threads on fewer CPUs than the
// process may use (parallel and bursty with --pin, the default).
type Pinned interface {
	// PinCPUs is how many CPUs the workload keeps to; 0: it does not pin.
	PinCPUs() int
}

// PinCPUs: parallel keeps its workers on as many CPUs as it has threads.
func (p *parallel) PinCPUs() int {
	if p.Pin {
		return p.Threads
	}
	return 0
}

// PinCPUs: bursty keeps its workers on as many CPUs as it has threads.
func (b *bursty) PinCPUs() int {
	if b.Pin {
		return b.Threads
	}
	return 0
}

// PinSet is where a workload pinned to n CPUs runs: the last n CPUs of
// the calling thread's affinity mask (CPU 0 usually takes most device
// interrupts). ok is false when the mask has n CPUs or fewer: nothing to
// pin. The C engine's pin_last makes the same choice.
func PinSet(n int) (set unix.CPUSet, ok bool) {
	var have unix.CPUSet
	if n < 1 || unix.SchedGetaffinity(0, &have) != nil || have.Count() <= n {
		return set, false
	}
	for c, k := len(have)*64-1, 0; k < n && c >= 0; c-- {
		if have.IsSet(c) {
			set.Set(c)
			k++
		}
	}
	return set, true
}
