package sim

// The bandwidth controller, after kernel/sched/fair.c (our own code, the
// kernel's names in the comments): level 0 is the group, level 1 its
// parent when the parent has a quota of its own.

// charge is update_curr: the running thread's CPU time since it was last
// charged goes to the group's usage and is taken from the local runtime
// at every level.
func (e *engine) charge(ci int32) {
	c := &e.cpus[ci]
	d := e.ranSince(c, &c.lastCharge)
	if d == 0 {
		return
	}
	e.threads[c.cur].vrun += d
	e.usage += d
	for l := 0; l < e.levels; l++ {
		e.account(ci, l, d)
	}
}

// account is __account_cfs_rq_runtime: take d from the local runtime and,
// when it runs out, ask the pool for a slice.
func (e *engine) account(ci int32, l int, d int64) {
	b := &e.bw[l]
	if b.quota == 0 {
		return
	}
	rq := &e.cpus[ci].rq[l]
	rq.remaining -= d
	if e.m.expiry != expireNever {
		e.expire(rq, b)
	}
	if rq.remaining > 0 || rq.throttled {
		return
	}
	e.assign(rq, l, e.slice)
}

// expire is expire_cfs_rq_runtime (before 5.4): local runtime past its
// deadline is dropped, unless the group's deadline has not moved, which
// the kernel takes for clock drift and answers by extending the local
// deadline by a tick. 3.16 tells the two apart by comparing deadlines
// (!=), which after every refill extends and never drops; 4.18 by
// sequence numbers.
func (e *engine) expire(rq *cfsRq, b *bandwidth) {
	if e.now < rq.expires || rq.remaining < 0 {
		return
	}
	extend := rq.expires != b.expires
	if e.m.expiry == expireSeq {
		extend = rq.seq == b.seq
	}
	if extend {
		rq.expires += e.tick
	} else {
		rq.remaining = 0
	}
}

// assign is assign_cfs_rq_runtime: top the local runtime up to target
// from the pool (what the pool has), starting the period timer if it is
// idle.
func (e *engine) assign(rq *cfsRq, l int, target int64) {
	b := &e.bw[l]
	want := target - rq.remaining
	if !b.active {
		e.startPeriod(l)
	}
	if b.runtime > 0 {
		amount := min(b.runtime, want)
		b.runtime -= amount
		rq.remaining += amount
		b.idle = false
	}
	switch e.m.expiry {
	case expireStale:
		if b.expires-rq.expires > 0 {
			rq.expires = b.expires
		}
	case expireSeq:
		if rq.seq != b.seq {
			rq.seq = b.seq
			rq.expires = b.expires
		}
	}
}

// startPeriod is start_cfs_bandwidth: re-arm the period timer on its old
// grid (hrtimer_forward_now). From 4.18 it also moves the group's
// deadline past the periods missed; 3.16 left it stale, so that runtime
// handed out until the next refill expires at once.
func (e *engine) startPeriod(l int) {
	b := &e.bw[l]
	b.active = true
	var overrun int64
	if e.now >= b.next {
		overrun = (e.now-b.next)/b.period + 1
		b.next += overrun * b.period
	}
	if e.m.expiry == expireSeq {
		b.expires += (overrun + 1) * b.period
		b.seq++
	}
	e.h.set(e.fixed+slotPeriod0+int32(l), b.next)
	if l == 0 {
		e.armSample()
	}
}

// checkRuntime is check_cfs_rq_runtime: a run queue out of local runtime
// is throttled. It reports whether the CPU is stopped.
func (e *engine) checkRuntime(ci int32) bool {
	c := &e.cpus[ci]
	for l := 0; l < e.levels; l++ {
		rq := &c.rq[l]
		if e.bw[l].quota > 0 && !rq.throttled && rq.remaining <= 0 {
			e.throttle(ci, l)
		}
	}
	return e.stopped(ci)
}

// stopped reports whether the group's threads on CPU ci may not run.
func (e *engine) stopped(ci int32) bool {
	c := &e.cpus[ci]
	return c.rq[0].throttled || (e.levels == 2 && c.rq[1].throttled)
}

// throttle is throttle_cfs_rq: the run queue joins the throttled list
// and its threads stop. Before 6.18 its throttled time runs from now;
// from 6.18 from the first thread it stops.
func (e *engine) throttle(ci int32, l int) {
	c := &e.cpus[ci]
	rq := &c.rq[l]
	if rq.throttled {
		return
	}
	rq.throttled = true
	e.listAdd(l, ci)
	if !e.bw[l].active {
		e.startPeriod(l)
	}
	if !e.m.taskThrottle || c.rq[0].nr > 0 {
		rq.clock = e.now
	}
	if c.cur >= 0 {
		e.deschedule(ci)
	}
	if l == 0 && e.levels == 2 {
		e.parentSync(ci)
	}
}

// unthrottle is unthrottle_cfs_rq: the run queue's throttled time is
// counted and its threads may run again.
func (e *engine) unthrottle(ci int32, l int) {
	c := &e.cpus[ci]
	rq := &c.rq[l]
	if !rq.throttled {
		return
	}
	rq.throttled = false
	e.listRemove(l, ci)
	if rq.clock >= 0 {
		e.bw[l].throttledTime += e.now - rq.clock
		rq.clock = -1
	}
	if l == 0 && e.levels == 2 {
		e.parentSync(ci)
	}
	e.schedule(ci)
	if c := &e.cpus[ci]; c.cur >= 0 && e.cfg.ResumeLate > 0 {
		// The idle CPU wakes first (Config.ResumeLate).
		c.runStart += int64(e.cfg.ResumeLate)
		c.lastCharge = c.runStart
		e.armCompletion(ci)
	}
}

// startClocks starts the throttled time of CPU ci's throttled run
// queues that were not counting it (6.18: a thread is stopped there).
func (e *engine) startClocks(ci int32) {
	c := &e.cpus[ci]
	for l := 0; l < e.levels; l++ {
		if rq := &c.rq[l]; rq.throttled && rq.clock < 0 {
			rq.clock = e.now
		}
	}
}

// parentSync keeps the parent's run queue on CPU ci in step with the
// group's: the group is queued there while it has threads and is not
// throttled. Enqueueing checks the parent's runtime
// (check_enqueue_throttle); dequeueing returns the parent's slack and,
// before 6.18, throttles the parent if it ran out.
func (e *engine) parentSync(ci int32) {
	c := &e.cpus[ci]
	want := 0
	if c.rq[0].nr > 0 && !c.rq[0].throttled {
		want = 1
	}
	p := &c.rq[1]
	if p.nr == want {
		return
	}
	p.nr = want
	if want == 1 {
		if !p.throttled {
			e.account(ci, 1, 0)
			if p.remaining <= 0 {
				e.throttle(ci, 1)
			}
		}
		return
	}
	e.returnRuntime(ci, 1)
	if !e.m.taskThrottle && !p.throttled && p.remaining <= 0 {
		e.throttle(ci, 1)
	}
}

// listAdd puts CPU ci on level l's throttled list: at the tail, or at
// the head in 3.16 (c06f04c70489).
func (e *engine) listAdd(l int, ci int32) {
	b := &e.bw[l]
	rq := &e.cpus[ci].rq[l]
	if b.head < 0 {
		rq.prev, rq.next = -1, -1
		b.head, b.tail = ci, ci
		return
	}
	if e.m.lifo {
		rq.prev, rq.next = -1, b.head
		e.cpus[b.head].rq[l].prev = ci
		b.head = ci
		return
	}
	rq.prev, rq.next = b.tail, -1
	e.cpus[b.tail].rq[l].next = ci
	b.tail = ci
}

func (e *engine) listRemove(l int, ci int32) {
	b := &e.bw[l]
	rq := &e.cpus[ci].rq[l]
	if rq.prev >= 0 {
		e.cpus[rq.prev].rq[l].next = rq.next
	} else {
		b.head = rq.next
	}
	if rq.next >= 0 {
		e.cpus[rq.next].rq[l].prev = rq.prev
	} else {
		b.tail = rq.prev
	}
	rq.prev, rq.next = -1, -1
}

// returnRuntime is __return_cfs_rq_runtime, on the last dequeue from a
// CPU: the local runtime beyond min_cfs_rq_runtime goes back to the pool
// (before 5.4 only if it has not expired), and the slack timer is
// started to hand it to throttled CPUs.
func (e *engine) returnRuntime(ci int32, l int) {
	b := &e.bw[l]
	rq := &e.cpus[ci].rq[l]
	if b.quota == 0 || rq.nr > 0 {
		return
	}
	slack := rq.remaining - int64(MinRuntime)
	if slack <= 0 {
		return
	}
	valid := true
	switch e.m.expiry {
	case expireStale:
		valid = rq.expires == b.expires
	case expireSeq:
		valid = rq.seq == b.seq
	}
	if valid {
		b.runtime += slack
		if b.runtime > e.slice && b.head >= 0 {
			e.startSlack(l)
		}
	}
	rq.remaining -= slack
}

// refreshWithin is runtime_refresh_within: the period timer fires within d.
func (e *engine) refreshWithin(l int, d int64) bool {
	b := &e.bw[l]
	return !b.active || b.next-e.now < d
}

// startSlack is start_cfs_slack_bandwidth: not within slack +
// min_bandwidth_expiration of a refill, and not pushed forward when
// already started.
func (e *engine) startSlack(l int) {
	b := &e.bw[l]
	if e.refreshWithin(l, int64(SlackPeriod+MinExpiration)) || b.slackOn {
		return
	}
	b.slackOn = true
	e.h.set(e.fixed+slotSlack0+int32(l), e.now+int64(SlackPeriod))
}

// slackTimer is do_sched_cfs_slack_timer: hand the returned runtime to
// throttled CPUs, unless a refill is due within min_bandwidth_expiration.
func (e *engine) slackTimer(l int) {
	b := &e.bw[l]
	b.slackOn = false
	if e.refreshWithin(l, int64(MinExpiration)) {
		return
	}
	if b.runtime > e.slice {
		e.distribute(l)
	}
}

// periodTimer is do_sched_cfs_period_timer: count the period, refill the
// pool, and either go idle (a period with no runtime handed out and
// nothing throttled: periods are then not counted until the group asks
// again) or hand the new runtime to the throttled CPUs.
func (e *engine) periodTimer(l int) {
	b := &e.bw[l]
	slot := e.fixed + slotPeriod0 + int32(l)
	// What threads that poll their CPU clock used so far is charged
	// already (Step.Polls), to the period that ends.
	for ci := range e.cpus {
		if c := &e.cpus[ci]; c.cur >= 0 && e.threads[c.cur].kind == Burn && e.threads[c.cur].polls {
			e.charge(int32(ci))
		}
	}
	b.next += b.period
	b.nrPeriods++
	throttled := b.head >= 0
	if e.m.burst {
		e.refill(l) // 5.14: refill extra burst quota even when idle
	}
	if b.idle && !throttled {
		b.active = false
		e.h.clear(slot)
	} else {
		if !e.m.burst {
			e.refill(l)
		}
		if !throttled {
			b.idle = true
		} else {
			b.nrThrottled++
			if b.runtime > 0 {
				e.distribute(l)
			}
			b.idle = false
		}
		e.h.set(slot, b.next)
	}
	if l == 0 {
		// The reading after the boundary as far from it as the one
		// before (a regular reading may have come closer than
		// straddle): trace.BuildTimeline narrows the grid to where the
		// intervals that saw boundaries meet, and places a boundary at
		// its middle, so lopsided intervals would place it off the
		// boundary (3.5 µs late where a regular reading came 3 µs
		// before one, 2026-12-02).
		e.afterAt = e.now + min(straddle, max(e.now-e.samples[len(e.samples)-1].T, 1))
		e.armSample()
	}
}

// refill is __refill_cfs_bandwidth_runtime. Before 5.14 the pool is set
// to the quota; from 5.14 the quota is added, up to quota + burst, and a
// period that took more than the quota counts as a burst.
func (e *engine) refill(l int) {
	b := &e.bw[l]
	if e.m.burst {
		b.runtime += b.quota
		if over := b.snap - b.runtime; over > 0 {
			b.burstTime += over
			b.nrBursts++
		}
		b.runtime = min(b.runtime, b.quota+b.burst)
		b.snap = b.runtime
	} else {
		b.runtime = b.quota
	}
	switch e.m.expiry {
	case expireStale:
		b.expires = e.now + b.period
	case expireSeq:
		b.expires = e.now + b.period
		b.seq++
	}
}

// distribute is distribute_cfs_runtime: in throttled-list order, each
// throttled CPU gets what it overran plus 1ns, and is unthrottled, while
// the pool lasts.
func (e *engine) distribute(l int) {
	b := &e.bw[l]
	for ci := b.head; ci >= 0 && b.runtime > 0; {
		rq := &e.cpus[ci].rq[l]
		next := rq.next
		amount := min(-rq.remaining+1, b.runtime)
		b.runtime -= amount
		rq.remaining += amount
		if e.m.expiry != expireNever {
			rq.expires = b.expires
		}
		if rq.remaining > 0 {
			e.unthrottle(ci, l)
		}
		ci = next
	}
}
