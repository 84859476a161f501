package lab

import (
	"errors"
	"fmt"
	"os"
	"strconv"

	"github.com/cfsprobe/cfsprobe/internal/workload"
	"golang.org/x/sys/unix"
)

// The lab's reader runs in the real-time class while it reads a run.
//
// On a CPU that runs one of the group's threads, a reader in the fair
// class that wakes does not always run at once: the running thread may
// keep the CPU until the next tick (EEVDF runs a task to parity with the
// woken one; CFS lets it finish its wake-up granularity), and in that
// wait the reader is one more task on that CPU's run queue. A CPU that
// balances at that tick sees the queue one task longer and pulls one of
// the group's threads across, where the reader was the imbalance. Four
// spinning threads under a 1-CPU limit on 2 CPUs, 8 s each time
// (2026-11-28, kernel 6.18): with no reader the kernel moved a thread 2
// to 4 times and left them split 3 and 1 for 3 to 4 % of the run; with a
// reader waking every 10 ms in the fair class, 6 to 26 times and 7 to 51
// %, every split made by a periodic balance at a tick while the reader
// waited on the other CPU (perf: sched_migrate_task from
// sched_balance_rq in the timer's softirq); with the same reader in
// SCHED_FIFO, 0 to 4 times and 0 to 4 %. In the real-time class the
// reader preempts the thread at once, reads, and is gone before the tick
// (about 12 µs), which is what the simulator models of it
// (sim.Config.Wakeups).
//
// realtime puts every thread of cfsprobe's process in SCHED_FIFO at the
// lowest priority, with SCHED_RESET_ON_FORK: a process or thread started
// from one of them (the workload, a thread the Go runtime adds) is in
// the fair class. The reader's work is a read of two small files per
// reading, well under the kernel's real-time limit (95 % of each
// second). restore puts each thread back as it was. Without the
// privilege (CAP_SYS_NICE), realtime reports why and changes nothing.
func realtime() (restore func(), err error) {
	tids, err := threads()
	if err != nil {
		return func() {}, err
	}
	type saved struct {
		tid  int
		attr *unix.SchedAttr
	}
	var done []saved
	restore = func() {
		for _, s := range done {
			_ = unix.SchedSetAttr(s.tid, s.attr, 0) // a thread gone is no matter
		}
	}
	rt := &unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: unix.SCHED_FIFO, Priority: 1, Flags: unix.SCHED_FLAG_RESET_ON_FORK}
	for _, tid := range tids {
		old, gerr := unix.SchedGetAttr(tid, 0)
		if gerr != nil {
			continue // gone
		}
		if serr := unix.SchedSetAttr(tid, rt, 0); serr != nil {
			if errors.Is(serr, unix.ESRCH) {
				continue
			}
			restore()
			return func() {}, fmt.Errorf("put the reader in the real-time class (SCHED_FIFO): %w", serr)
		}
		done = append(done, saved{tid, old})
	}
	return restore, nil
}

// The reader apart from a pinned workload (docs/design.md, "The lab's
// reader", has the measurements).
//
// A real-time task that wakes stays on the CPU it last ran on whatever
// runs there (select_task_rq_rt looks elsewhere only when a real-time
// task holds that CPU): a real-time reader that had last run on a pinned
// workload's CPU preempted it at every reading, and a reading just
// before a boundary charged the workload then (update_curr) and
// throttled it until the refill, where the next tick, after the refill,
// would have charged the new period. So, while it reads a workload
// pinned to some of its CPUs, cfsprobe keeps its threads on the others,
// in the fair class: off the workload's CPUs a wake-up has no thread of
// the group to wait beside, which is why the reader is otherwise
// real-time; and a Go process's threads in SCHED_FIFO confined to one
// CPU do not take turns. The simulator's reader wakes on a CPU the
// group's threads leave idle (sim.Config.Wakeups), as this one does.

// apart puts every thread of cfsprobe's process on set; restore puts
// every thread, also one the runtime started meanwhile (it inherits its
// creator's CPUs), back on all.
func apart(set, all unix.CPUSet) (restore func(), err error) {
	put := func(s *unix.CPUSet) error {
		tids, err := threads()
		if err != nil {
			return err
		}
		for _, tid := range tids {
			if err := unix.SchedSetaffinity(tid, s); err != nil && !errors.Is(err, unix.ESRCH) {
				return err
			}
		}
		return nil
	}
	restore = func() { _ = put(&all) }
	if err := put(&set); err != nil {
		restore()
		return func() {}, fmt.Errorf("keep the reader off the workload's CPUs: %w", err)
	}
	return restore, nil
}

// offCPUs are the process's CPUs but those in avoid (set), and all of
// them (all); ok is false with no avoid or no CPU outside it.
func offCPUs(avoid *unix.CPUSet) (set, all unix.CPUSet, ok bool) {
	if avoid == nil || unix.SchedGetaffinity(0, &all) != nil {
		return set, all, false
	}
	set = all
	for _, cpu := range workload.CPUsOf(*avoid) {
		set.Clear(cpu)
	}
	return set, all, set.Count() > 0
}

// threads lists the process's threads.
func threads() ([]int, error) {
	ents, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return nil, err
	}
	tids := make([]int, 0, len(ents))
	for _, e := range ents {
		if tid, err := strconv.Atoi(e.Name()); err == nil {
			tids = append(tids, tid)
		}
	}
	return tids, nil
}
