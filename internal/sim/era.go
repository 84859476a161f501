package sim

import (
	"fmt"
	"strings"

	"github.com/cfsprobe/cfsprobe/internal/cgroup"
)

// Era names a kernel model of CFS bandwidth control: the behaviour of
// kernel/sched/fair.c from one mainline release up to the next era's.
// Each era is defined by the commit that began it:
//
//   - 3.16: 51f2176d74ac ("sched/fair: Fix unlocked reads of some
//     cfs_b->quota/period", v3.16-rc1) made expire_cfs_rq_runtime extend a
//     CPU's deadline by a tick whenever it differed from the group's
//     (runtime_expires != ...), which it does after every refill: local
//     slices effectively never expire. They do expire while the two
//     deadlines are equal and past, which is what happens after the
//     period timer went idle and was re-armed without moving the group's
//     deadline: until the next refill every runtime update on any CPU
//     throws its slice away and takes a new one, so a group waking from
//     idle drains its pool in a few ticks and is throttled for the rest
//     of the period (seed 000, "overly aggressive CFS", measured on 4.14).
//     From c06f04c70489 (v3.17-rc1) a throttled CPU joins the head of
//     the throttled list, so refills serve the last throttled first.
//   - 4.18: 512ac999d275 ("sched/fair: Fix bandwidth timer clock drift
//     condition", v4.18-rc) compares expiry sequence numbers and moves the
//     group's deadline when the timer is re-armed: local runtime now
//     really expires at the end of the period it was handed out in, so
//     the min_cfs_rq_runtime kept by every CPU a group touched is lost
//     each period (fibtest: a fast thread starved by slow threads on
//     other CPUs). baa9be4ffb55 (v4.19) made the throttled list FIFO,
//     as this model has it.
//   - 5.4: de53fd7aedb1 ("sched/fair: Fix low cpu usage with high
//     throttling by removing expiration of cpu-local slices", v5.4-rc1)
//     removed expiry: local runtime lives until used or returned.
//   - 5.14: f4183717b370 ("sched/fair: Introduce the burstable CFS
//     controller", v5.14-rc1): the pool is refilled by adding the quota,
//     up to quota + burst, and also while the group is idle;
//     bcb1704a1ed2 ("sched/fair: Add cfs bandwidth burst statistics")
//     added nr_bursts and burst_time, which this era counts. It counts
//     the throttled time of a run queue throttled with no thread on it,
//     as kernels did until 79462e8c879a ("sched: don't account throttle
//     time for empty groups", v6.6); 6.6 to 6.17 are given this era all
//     the same.
//   - 6.18: the task-based throttling series (v6.18-rc1; e1fad12dcb66
//     "sched/fair: Switch to task based throttle model", eb962f251fbb
//     "sched/fair: Task based throttle time accounting"): a throttled
//     task stops when it next returns to user space (a CPU-bound thread:
//     at once), the runtime is checked when a thread is picked rather
//     than when the last one leaves, and a CPU's throttled time is
//     counted from the first thread stopped there.
type Era string

// The eras, oldest first.
const (
	Era3_16 Era = "3.16" // local slices effectively never expire
	Era4_18 Era = "4.18" // per-period expiry of local runtime (stranded runtime)
	Era5_4  Era = "5.4"  // expiry removed
	Era5_14 Era = "5.14" // burst
	Era6_18 Era = "6.18" // task-based throttling
)

var eras = []Era{Era3_16, Era4_18, Era5_4, Era5_14, Era6_18}

// Eras lists the eras, oldest first.
func Eras() []Era { return append([]Era(nil), eras...) }

// EraNames lists the eras' names for people: "3.16, 4.18, ...".
func EraNames() string {
	s := make([]string, len(eras))
	for i, e := range eras {
		s[i] = string(e)
	}
	return strings.Join(s, ", ")
}

// ParseEra takes an era's exact name.
func ParseEra(s string) (Era, error) {
	for _, e := range eras {
		if string(e) == s {
			return e, nil
		}
	}
	return "", fmt.Errorf("unknown kernel era %q: use one of %s", s, EraNames())
}

// EraOfRelease is the era of a kernel release string (uname -r):
// "6.1.0-13-amd64" is 5.14, "6.18.44-x" 6.18. It goes by the mainline
// version: a distribution or stable kernel that took a later era's fix
// (de53fd7aedb1 reached 4.14.154 and 4.19.84) is given the era of its
// version. Releases before 3.16 are an error.
func EraOfRelease(release string) (Era, error) {
	major, minor, ok := cgroup.ParseKernelRelease(release)
	if !ok {
		return "", fmt.Errorf("kernel release %q is not of the form MAJOR.MINOR[...]", release)
	}
	v := major*1000 + minor
	switch {
	case v < 3016:
		return "", fmt.Errorf("kernel release %q is older than 3.16, the oldest era modelled (%s)", release, EraNames())
	case v < 4018:
		return Era3_16, nil
	case v < 5004:
		return Era4_18, nil
	case v < 5014:
		return Era5_4, nil
	case v < 6018:
		return Era5_14, nil
	}
	return Era6_18, nil
}

// expiry is how a CPU's local runtime expires.
type expiry int

const (
	// expireStale: the 3.16 condition (deadlines compared with !=; the
	// group's deadline moves only at a refill).
	expireStale expiry = iota
	// expireSeq: the 4.18 condition (sequence numbers; re-arming the
	// timer moves the deadline).
	expireSeq
	// expireNever: 5.4 and later.
	expireNever
)

// model is what an era changes in the engine.
type model struct {
	expiry expiry
	// lifo: a throttled CPU joins the head of the throttled list.
	lifo bool
	// burst: the 5.14 refill (add the quota up to quota + burst, refill
	// before the idle check) and the burst counters.
	burst bool
	// taskThrottle: 6.18's throttled time, counted only while a thread
	// is stopped by the throttle.
	taskThrottle bool
	// eevdf: the timeslice is EEVDF's base slice (6.6 and later) rather
	// than CFS's latency split among the runnable threads.
	eevdf bool
}

// HasBurst reports whether the era has CPU burst (cpu.cfs_burst_us,
// cpu.max.burst): 5.14 and later.
func (e Era) HasBurst() bool { return modelOf(e).burst }

func modelOf(e Era) model {
	switch e {
	case Era3_16:
		return model{expiry: expireStale, lifo: true}
	case Era4_18:
		return model{expiry: expireSeq}
	case Era5_4:
		return model{expiry: expireNever}
	case Era5_14:
		return model{expiry: expireNever, burst: true}
	}
	return model{expiry: expireNever, burst: true, taskThrottle: true, eevdf: true}
}
