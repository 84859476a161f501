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

// PinSet is where a workload pinned to n CPUs runs: PinLast of the
// calling thread's affinity mask. ok is false when the mask has n CPUs or
// fewer: nothing to pin.
func PinSet(n int) (set unix.CPUSet, ok bool) {
	var have unix.CPUSet
	if unix.SchedGetaffinity(0, &have) != nil {
		return set, false
	}
	pin, ok := PinLast(CPUsOf(have), n)
	for _, c := range pin {
		set.Set(c)
	}
	return set, ok
}

// CPUsOf lists the CPUs of an affinity mask, in increasing order.
func CPUsOf(set unix.CPUSet) []int {
	var cpus []int
	for c := 0; c < len(set)*64; c++ {
		if set.IsSet(c) {
			cpus = append(cpus, c)
		}
	}
	return cpus
}

// PinLast is the pinning rule of a workload pinned to n CPUs, given the
// CPUs the process may use in increasing order: the last n of them (CPU 0
// usually takes most device interrupts). ok is false when there are n
// usable CPUs or fewer: nothing to pin. The C engine's pin_last makes the
// same choice; the simulator places its threads by it.
func PinLast(usable []int, n int) (pin []int, ok bool) {
	if n < 1 || len(usable) <= n {
		return nil, false
	}
	return append([]int{}, usable[len(usable)-n:]...), true
}
