package trace

import (
	"math"
	"time"
)

// A period's demand: what the group wanted of the CPU in it, which its
// usage shows only when it was not throttled. docs/trace.md ("Demand")
// defines it; the simulator's replay (open demand) and the exporter's
// cfsprobe_period_demand_cpus read it here.

// Stopped is the number of CPUs the kernel stopped in the period: at
// least one when it was throttled (a trace written before stopped_cpus
// was recorded says 0), 0 when it was not.
func (p Period) Stopped() int {
	if !p.Throttled {
		return 0
	}
	return max(p.StoppedCPUs, 1)
}

// Stall is the wall time the group stood still in the period: StallNs,
// or in a trace written before it was recorded ThrottledNs over the
// stopped CPUs; at most 99 % of the period, so that the group keeps a
// moment of running and its running CPUs stay finite; 0 when it was not
// throttled.
func (p Period) Stall() time.Duration {
	if !p.Throttled {
		return 0
	}
	s := time.Duration(p.StallNs)
	if s == 0 && p.ThrottledNs > 0 {
		s = time.Duration(p.ThrottledNs / int64(p.Stopped()))
	}
	length := p.Length()
	return max(min(s, length-length/100), 0)
}

// Length is the period's length (EndNs − StartNs).
func (p Period) Length() time.Duration { return time.Duration(p.EndNs - p.StartNs) }

// Running is the CPUs the group kept busy on average while it was not
// stopped: its usage over the period less its stall (0 for a period
// without length).
func (p Period) Running() float64 {
	run := p.Length() - p.Stall()
	if run <= 0 {
		return 0
	}
	return float64(max(p.UsageNs, 0)) / float64(run)
}

// boundaryError is how far a period's running time, its length less its
// stall, may be off in a trace: each of its two boundaries placed to
// within endFine, the usage that ran beside them counted in the wrong
// period. A throttled period that stands still for most of its length
// runs for a few milliseconds, and its running CPUs are read from those:
// a one-thread group that ran 2.7 ms of a 50 ms period and used 5 ms of
// CPU (a boundary's usage in the wrong period) read as 1.85 CPUs, and
// wanted nearly twice the CPU it could use (the fleet test's
// b1-period50: demand p99 2.0 CPUs from Prometheus, 1.0 from its
// recording).
const boundaryError = 2 * time.Duration(endFine)

// RunningAtLeast is the fewest CPUs the period can have run on, its
// running time read boundaryError long: a throttled period ran on more
// CPUs than were stopped only when even these are more.
func (p Period) RunningAtLeast() float64 {
	return float64(max(p.UsageNs, 0)) / float64(p.Length()-p.Stall()+boundaryError)
}

// Missed is the work a throttled period missed while it did not run: on
// cpus CPUs for notRun. It ran from the period's start until it was
// stopped, on the CPUs the kernel stopped (or ran on, when more: when its
// usage says so with its boundaries read off, RunningAtLeast), and those
// had runnable threads for the stall: it missed their work for the
// stall. A period in which it kept at least BusyShare of those CPUs busy
// while not stopped was busy all along: the time it did not run on them
// is the throttling's, not a pause, whatever part of it the kernel
// counted as stall. The CPUs are taken as WholeCPUs does, at most
// maxCPUs (0 or less: no bound; the CPUs the group could use). A period
// not throttled missed nothing: its Running CPUs for no time.
func (p Period) Missed(maxCPUs float64) (cpus float64, notRun time.Duration) {
	bound := func(c float64) float64 {
		c = WholeCPUs(c)
		if maxCPUs > 0 {
			c = min(c, maxCPUs)
		}
		return c
	}
	running := p.Running()
	s := p.Stall()
	if s == 0 {
		return bound(running), 0
	}
	cpus = bound(max(p.RunningAtLeast(), float64(p.Stopped())))
	if cpus > 0 && running >= cpus*BusyShare {
		return cpus, max(p.Length()-time.Duration(float64(max(p.UsageNs, 0))/cpus), 0)
	}
	return cpus, s
}

// BusyShare is the share of the CPUs a throttled period stopped (or ran
// on) that a group must have kept busy, while it was not stopped, to be
// taken for busy all along. A busy group does not show all of them: the
// kernel unthrottles it a moment after the refill, and the stall is
// counted from when it was stopped; on the reference host (6.18) one
// thread burning without a pause ran 0.78 to 0.99 CPUs under 0.3 CPU,
// and one that slept 50 ms in the period 0.35.
const BusyShare = 0.5

// Demand is the CPU time the group wanted in the period: its usage, and
// in a throttled period also the work it missed while it did not run
// (Missed). A throttled period's usage is a lower bound of what the group
// wanted; this is the estimate that assumes its work kept coming while it
// stood still.
func (p Period) Demand(maxCPUs float64) time.Duration {
	cpus, notRun := p.Missed(maxCPUs)
	return time.Duration(max(p.UsageNs, 0)) + time.Duration(cpus*float64(notRun))
}

// DemandCPUs is Demand in CPUs: divided by the period's length (0 for a
// period without length).
func (p Period) DemandCPUs(maxCPUs float64) float64 {
	if p.Length() <= 0 {
		return 0
	}
	return float64(p.Demand(maxCPUs)) / float64(p.Length())
}

// CPUSlack is how far above a whole number of CPUs a figure of running
// CPUs is still taken for that number: a reading a little late is not
// one more CPU.
const CPUSlack = 0.1

// WholeCPUs takes running CPUs within CPUSlack above a whole number (at
// least 1) for that number.
func WholeCPUs(cpus float64) float64 {
	if w := math.Floor(cpus); w >= 1 && cpus-w < CPUSlack {
		return w
	}
	return cpus
}
