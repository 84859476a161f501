package sim

import (
	"time"

	"github.com/cfsprobe/cfsprobe/internal/trace"
)

// Threads and CPUs. Only the group's threads are modelled (the host is
// otherwise idle). Each CPU runs its threads as CFS does, simplified to
// one level of equal weights: the thread with the smallest vruntime runs;
// at a tick it yields when it has had its timeslice (CFS: sched_latency
// split among the runnable threads, at least min_granularity; 6.18's
// EEVDF: the base slice) and another is waiting; a woken thread gets
// CFS's sleeper credit and preempts one that is more than
// wakeup_granularity ahead of it. This keeps what bandwidth control
// sees (which CPUs run, when threads block, tick-granular charging)
// without the full CFS tree, and a tick-granular timeslice is what the
// kernel does for CPU-bound threads (preemption is checked at the tick).
//
// Free threads are shared over the group's CPUs as the kernel's wake-up
// path and load balancer do it, in a simpler form: a woken thread goes
// back to its last CPU if that is idle, else to an idle allowed CPU
// (scanned from a random one, so that threads spread as
// select_idle_sibling spreads them), else to the allowed CPU with the
// fewest threads; a CPU that goes idle pulls a waiting free thread from
// the CPU with the most (newidle balance); and at every tick the busiest
// CPU gives one to the least busy when they differ by two or more.
// Throttled run queues are never balanced from or to (throttled_lb_pair).
// A CPU whose group run queue is throttled counts as idle when threads
// wake, as it does for select_idle_sibling.

// maxSameInstant bounds the steps a thread may take at one instant (a
// program of zero-length steps would never let time move).
const maxSameInstant = 1 << 20

// startThread hands thread i its first step at the start.
func (e *engine) startThread(i int32) {
	e.resume(i, e.advance(i))
}

// resume acts on a step handed to a thread that is on no CPU.
func (e *engine) resume(i int32, s tstate) {
	if s == tSleeping {
		e.h.set(i, e.threads[i].until)
		return
	}
	if s == tQueued {
		e.enqueue(i, e.selectCPU(i), true)
		if e.threads[i].state != tRunning { // else re-armed for its step's end
			e.h.clear(i)
		}
	} else {
		e.h.clear(i)
		e.exited(i)
	}
}

// wake is thread i's sleep ending.
func (e *engine) wake(i int32) { e.resume(i, e.advance(i)) }

func (e *engine) exited(i int32) {
	e.threads[i].state = tExited
	e.alive--
	switch {
	case e.alive > 0, e.cfg.Duration > 0: // with a Duration, the timers run on to it
	case e.toClose: // and to the close of the period (reading)
		e.exitAt = e.now
	default:
		e.h.set(e.fixed+slotEnd, e.now)
	}
}

// advance hands thread i its next steps once its last one completed at
// now, until one takes time: it reports tQueued (Burn, Spin: it needs a
// CPU), tSleeping or tExited.
func (e *engine) advance(i int32) tstate {
	t := &e.threads[i]
	for {
		if t.opEnd {
			e.opDone(i)
		}
		if t.stepAt == e.now {
			t.same++
			if t.same > maxSameInstant {
				e.failf("sim: thread %d took %d steps at %v without time passing", i, t.same, time.Duration(e.now))
				return tExited
			}
		} else {
			t.stepAt, t.same = e.now, 0
		}
		st := t.beh.Next(time.Duration(e.now), t.rng)
		if st.OpStart {
			t.inOp, t.opStart, t.opCPU = true, e.now, t.ran
		}
		t.opEnd = st.OpEnd
		switch st.Kind {
		case Burn:
			if st.CPU > 0 {
				t.kind, t.need, t.polls = Burn, int64(st.CPU), st.Polls
				return tQueued
			}
		case Spin:
			if int64(st.Until) > e.now {
				t.kind, t.until, t.chargeEnd = Spin, int64(st.Until), st.ChargedAtEnd
				return tQueued
			}
		case Sleep:
			if int64(st.Until) > e.now {
				t.kind, t.until = Sleep, int64(st.Until)
				return tSleeping
			}
		case Exit:
			if t.opEnd {
				e.opDone(i)
			}
			return tExited
		default:
			e.failf("sim: thread %d: step kind %d is not Burn, Spin, Sleep or Exit", i, st.Kind)
			return tExited
		}
	}
}

// opDone ends thread i's operation at now.
func (e *engine) opDone(i int32) {
	t := &e.threads[i]
	t.opEnd = false
	if !t.inOp {
		return
	}
	t.inOp = false
	if len(e.ops) == cap(e.ops) { // double: append's growth copies too often for long runs
		e.ops = append(make([]trace.Sample, 0, max(1024, 2*cap(e.ops))), e.ops...)
	}
	e.ops = append(e.ops, trace.Sample{StartNs: t.opStart, WallNs: e.now - t.opStart, CPUNs: t.ran - t.opCPU, Thread: int(i)})
}

// ranSince is how long CPU c's thread has run since *mark (0 when none
// runs), and moves the mark to now. A CPU keeps two marks: how far its
// thread's step has come (runStart) and how far it has been charged
// (lastCharge), which moves only at the tick and at scheduling events.
func (e *engine) ranSince(c *cpu, mark *int64) int64 {
	if c.cur < 0 || e.now <= *mark {
		return 0
	}
	d := e.now - *mark
	*mark = e.now
	return d
}

// progress brings the running thread's CPU time up to now.
func (e *engine) progress(ci int32) {
	c := &e.cpus[ci]
	d := e.ranSince(c, &c.runStart)
	if d == 0 {
		return
	}
	t := &e.threads[c.cur]
	t.ran += d
	if t.kind == Burn {
		t.need -= d
	}
}

// armCompletion arms the timer of CPU ci's thread for when its step
// ends, or, for a Burn that polls its CPU clock, for when its run
// queue's local runtime runs out first (the charge it makes then asks
// the pool for more, or throttles).
func (e *engine) armCompletion(ci int32) {
	c := &e.cpus[ci]
	i := c.cur
	t := &e.threads[i]
	start := max(e.now, c.runStart) // after another task's wake-up (otherWakeup)
	at := start + t.need
	if t.kind == Spin {
		at = max(t.until, start)
	}
	if t.kind == Burn && t.polls {
		// Its next read of its CPU clock charges what it ran uncharged:
		// at once when that is all its local runtime (a wake-up's cost
		// burnt before the burn), so that the charge asks the pool.
		uncharged := e.now - c.lastCharge
		for l := 0; l < e.levels; l++ {
			rq := &c.rq[l]
			if e.bw[l].quota == 0 || rq.throttled {
				continue
			}
			if left := rq.remaining - uncharged; left > 0 {
				at = min(at, e.now+left)
			} else if uncharged > 0 {
				at = min(at, start)
			}
		}
	}
	e.h.set(i, at)
}

// stepDone is CPU ci's thread finishing its Burn or Spin, or, a Burn
// that polls, running out of local runtime before that: it is charged,
// and runs on unless that throttled it. A Spin charged at its end
// (Step.ChargedAtEnd) is charged there, and if that throttled it, the
// step ends when the thread runs again.
func (e *engine) stepDone(ci int32) {
	c := &e.cpus[ci]
	i := c.cur
	e.progress(ci)
	t := &e.threads[i]
	if t.kind == Burn && t.need > 0 {
		e.charge(ci)
		if !e.checkRuntime(ci) {
			e.armCompletion(ci)
		}
		return
	}
	if t.kind == Spin && t.chargeEnd {
		t.chargeEnd = false
		e.charge(ci)
		if e.checkRuntime(ci) {
			return // stopped: the step ends when the thread runs again
		}
	}
	switch e.advance(i) {
	case tQueued:
		e.armCompletion(ci)
	case tSleeping:
		e.block(ci)
		e.h.set(i, e.threads[i].until)
	case tExited:
		e.block(ci)
		e.h.clear(i)
		e.exited(i)
	}
}

// block takes CPU ci's thread off it as it sleeps or exits (dequeue,
// then put_prev): it is charged, the last one out returns the CPU's slack
// runtime, the run queue is throttled if out of runtime, and the CPU
// picks another thread.
func (e *engine) block(ci int32) {
	c := &e.cpus[ci]
	t := &e.threads[c.cur]
	e.charge(ci)
	t.state = tSleeping
	t.lag = t.vrun - c.minV
	c.cur = -1
	e.running--
	c.rq[0].nr--
	if c.rq[0].nr == 0 {
		e.returnRuntime(ci, 0)
	}
	if e.levels == 2 {
		e.parentSync(ci)
	}
	// 6.18 checks the runtime when it picks from a run queue with
	// threads (pick_task_fair), not on the way out of an empty one.
	if !e.m.taskThrottle || c.rq[0].nr > 0 {
		e.checkRuntime(ci)
	}
	e.schedule(ci)
}

// deschedule puts CPU ci's running thread back on its queue (preempted,
// or stopped by a throttle).
func (e *engine) deschedule(ci int32) {
	c := &e.cpus[ci]
	e.progress(ci)
	e.charge(ci)
	i := c.cur
	e.threads[i].state = tQueued
	e.push(ci, i)
	c.cur = -1
	e.running--
	e.h.clear(i)
}

// preempt makes CPU ci's thread yield to the next.
func (e *engine) preempt(ci int32) {
	e.deschedule(ci)
	if !e.checkRuntime(ci) {
		e.schedule(ci)
	}
}

func (e *engine) push(ci, i int32) {
	c := &e.cpus[ci]
	c.queue = append(c.queue, i)
	if e.threads[i].pin < 0 {
		c.freeQueued++
		e.freeQueued++
	}
}

// take removes the k-th thread of CPU ci's queue.
func (e *engine) take(ci int32, k int) int32 {
	c := &e.cpus[ci]
	i := c.queue[k]
	copy(c.queue[k:], c.queue[k+1:])
	c.queue = c.queue[:len(c.queue)-1]
	if e.threads[i].pin < 0 {
		c.freeQueued--
		e.freeQueued--
	}
	return i
}

// schedule picks the next thread on an idle CPU (pick_next_task): the
// smallest vruntime, or, with nothing queued, a free thread pulled from a
// busier CPU.
func (e *engine) schedule(ci int32) {
	c := &e.cpus[ci]
	if c.cur >= 0 || e.stopped(ci) {
		return
	}
	if len(c.queue) == 0 {
		e.idlePull(ci)
		return
	}
	if e.checkRuntime(ci) {
		return
	}
	k := 0
	for j := 1; j < len(c.queue); j++ {
		if e.threads[c.queue[j]].vrun < e.threads[c.queue[k]].vrun {
			k = j
		}
	}
	i := e.take(ci, k)
	t := &e.threads[i]
	t.state = tRunning
	c.cur = i
	c.runStart, c.lastCharge, c.picked = e.now, e.now, t.ran
	e.updateMinV(ci)
	e.running++
	if e.running == 1 {
		e.h.set(e.fixed+slotTick, e.nextTick())
	}
	e.armCompletion(ci)
}

// updateMinV advances CPU ci's min_vruntime to the smallest vruntime on
// it (it never goes back).
func (e *engine) updateMinV(ci int32) {
	c := &e.cpus[ci]
	m := int64(-1 << 63)
	first := true
	if c.cur >= 0 {
		m, first = e.threads[c.cur].vrun, false
	}
	for _, i := range c.queue {
		if v := e.threads[i].vrun; first || v < m {
			m, first = v, false
		}
	}
	if !first && m > c.minV {
		c.minV = m
	}
}

// timeslice is what a thread runs before it yields at a tick, with nr
// threads runnable on its CPU.
func (e *engine) timeslice(nr int) int64 {
	if e.m.eevdf {
		return e.minGran
	}
	return max(e.latency/int64(nr), e.minGran)
}

// nextTick is the first tick after now.
func (e *engine) nextTick() int64 {
	off := int64(e.cfg.TickOffset) // below a tick
	if e.now < off {
		return off
	}
	return off + ((e.now-off)/e.tick+1)*e.tick
}

// onTick is the scheduler tick on every CPU that runs a thread
// (recheck); then the load is balanced.
func (e *engine) onTick() {
	for ci := range e.cpus {
		e.recheck(int32(ci))
	}
	e.balance()
	if e.running > 0 {
		e.h.set(e.fixed+slotTick, e.now+e.tick)
	} else {
		e.h.clear(e.fixed + slotTick)
	}
}

// recheck is what the scheduler does to the thread running on CPU ci at
// a tick, and when another task's wake-up interrupts it
// (Config.Wakeups): the thread is charged (a CPU-bound thread overruns
// its local runtime by up to a tick before this notices), the run queue
// throttled if out of runtime, the thread preempted when its timeslice
// is used and another waits.
func (e *engine) recheck(ci int32) {
	c := &e.cpus[ci]
	if c.cur < 0 {
		return
	}
	e.charge(ci)
	e.updateMinV(ci)
	if e.checkRuntime(ci) {
		return
	}
	t := &e.threads[c.cur]
	if t.kind == Burn && t.polls {
		// The charge may have topped its local runtime up.
		e.progress(ci)
		e.armCompletion(ci)
	}
	if len(c.queue) == 0 {
		return
	}
	if t.ran+max(e.now-c.runStart, 0)-c.picked >= e.timeslice(1+len(c.queue)) {
		e.preempt(ci)
	}
}

// wakeupRun is how long another task's wake-up keeps the group's thread
// off its CPU: the lab's reader of the counters, which wakes one thread
// of cfsprobe's, reads two files and waits again (internal/alarm), stops
// a spinning thread for 10 to 15 µs on this host.
const wakeupRun = 12 * time.Microsecond

// armWakeup arms the next wake-up of another task (Config.Wakeups).
func (e *engine) armWakeup() {
	w := int64(e.cfg.Wakeups)
	e.h.set(e.fixed+slotWakeup, e.now+w/2+e.wakeRng.Int64N(w))
}

// otherWakeup is another task waking on the host: on a CPU that runs no
// thread of the group when there is one (the lab's reader keeps off a
// pinned workload's CPUs; a task in the fair class looks for an idle
// CPU: select_idle_sibling), where it disturbs nothing of the
// group's; else on a CPU drawn at random, where it interrupts the
// group's thread (recheck) and runs for wakeupRun before the thread that
// then has the CPU goes on. The wake-ups stop with the group's last
// thread.
func (e *engine) otherWakeup() {
	if e.running == len(e.cpus) {
		ci := int32(e.wakeRng.IntN(len(e.cpus)))
		e.recheck(ci) // charges the thread up to now
		if c := &e.cpus[ci]; c.cur >= 0 {
			e.progress(ci)
			c.runStart += int64(wakeupRun)
			c.lastCharge += int64(wakeupRun)
			e.armCompletion(ci)
		}
	}
	if e.alive > 0 {
		e.armWakeup()
	} else {
		e.h.clear(e.fixed + slotWakeup)
	}
}

// idleCPU: nothing of the group's can run on CPU ci.
func (e *engine) idleCPU(ci int32) bool {
	c := &e.cpus[ci]
	return c.cur < 0 && (len(c.queue) == 0 || e.stopped(ci))
}

// selectCPU is where woken thread i goes (select_task_rq_fair).
func (e *engine) selectCPU(i int32) int32 {
	t := &e.threads[i]
	if t.pin >= 0 {
		return t.pin
	}
	if t.cpu >= 0 && e.idleCPU(t.cpu) {
		return t.cpu
	}
	n := len(e.allowed)
	off := e.rng.IntN(n)
	for k := 0; k < n; k++ {
		if ci := e.allowed[(off+k)%n]; e.idleCPU(ci) {
			return ci
		}
	}
	best := e.allowed[off]
	if t.cpu >= 0 {
		best = t.cpu
	}
	for _, ci := range e.allowed {
		if e.cpus[ci].rq[0].nr < e.cpus[best].rq[0].nr {
			best = ci
		}
	}
	return best
}

// enqueue puts thread i on CPU ci's queue (a wake-up, or a migration):
// the running thread is charged (update_curr), a run queue that had no
// threads checks its runtime (check_enqueue_throttle), and the thread
// runs at once on an idle CPU, or preempts one well ahead of it.
func (e *engine) enqueue(i, ci int32, wake bool) {
	c := &e.cpus[ci]
	t := &e.threads[i]
	if c.cur >= 0 {
		e.charge(ci)
		e.updateMinV(ci)
	}
	lag := t.lag
	if wake && lag < -e.latency/2 {
		lag = -e.latency / 2 // sleeper credit (GENTLE_FAIR_SLEEPERS)
	}
	t.vrun = c.minV + lag
	t.cpu = ci
	t.state = tQueued
	e.push(ci, i)
	c.rq[0].nr++
	if c.rq[0].nr == 1 && !c.rq[0].throttled && e.bw[0].quota > 0 {
		e.account(ci, 0, 0)
		if c.rq[0].remaining <= 0 {
			e.throttle(ci, 0)
		}
	}
	if e.levels == 2 {
		e.parentSync(ci)
	}
	if c.cur >= 0 && e.checkRuntime(ci) {
		return
	}
	if e.stopped(ci) {
		if e.m.taskThrottle {
			e.startClocks(ci)
		}
		return
	}
	if c.cur < 0 {
		e.schedule(ci)
		return
	}
	if wake && e.threads[c.cur].vrun-t.vrun > e.wakeGran {
		e.preempt(ci)
	}
}

// migrate moves queued free thread i from CPU src to CPU dst.
func (e *engine) migrate(i, src, dst int32, k int) {
	s := &e.cpus[src]
	e.take(src, k)
	t := &e.threads[i]
	t.lag = t.vrun - s.minV
	s.rq[0].nr--
	if s.rq[0].nr == 0 {
		e.returnRuntime(src, 0)
	}
	if e.levels == 2 {
		e.parentSync(src)
	}
	e.enqueue(i, dst, false)
}

// pullFrom moves one waiting free thread allowed on dst from the
// unthrottled CPU with the most of them; it reports whether it did.
func (e *engine) pullFrom(dst int32, atLeast int) bool {
	src := int32(-1)
	most := atLeast - 1
	for _, ci := range e.allowed {
		if c := &e.cpus[ci]; ci != dst && c.freeQueued > most && !e.stopped(ci) {
			src, most = ci, c.freeQueued
		}
	}
	if src < 0 {
		return false
	}
	for k, i := range e.cpus[src].queue {
		if e.threads[i].pin < 0 {
			e.migrate(i, src, dst, k)
			return true
		}
	}
	return false
}

// idlePull is newidle balance: CPU ci, with nothing to run, pulls a
// waiting free thread.
func (e *engine) idlePull(ci int32) {
	if e.freeQueued == 0 || !e.cpus[ci].allowed || e.stopped(ci) {
		return
	}
	e.pullFrom(ci, 1)
}

// balance is the periodic load balancer, at the tick: idle CPUs pull
// waiting free threads, then the busiest CPU gives one to the least busy
// if they differ by two threads or more.
func (e *engine) balance() {
	if e.freeQueued == 0 {
		return
	}
	least, most := int32(-1), int32(-1)
	for _, ci := range e.allowed {
		if e.stopped(ci) {
			continue
		}
		if e.idleCPU(ci) {
			e.idlePull(ci)
			if e.freeQueued == 0 {
				return
			}
		}
		c := &e.cpus[ci]
		if least < 0 || c.rq[0].nr < e.cpus[least].rq[0].nr {
			least = ci
		}
		if c.freeQueued > 0 && (most < 0 || c.rq[0].nr > e.cpus[most].rq[0].nr) {
			most = ci
		}
	}
	if least >= 0 && most >= 0 && e.cpus[most].rq[0].nr-e.cpus[least].rq[0].nr >= 2 {
		for k, i := range e.cpus[most].queue {
			if e.threads[i].pin < 0 {
				e.migrate(i, most, least, k)
				return
			}
		}
	}
}
