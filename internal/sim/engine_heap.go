package sim

import "math"

// never is the time of a timer that is not armed.
const never = math.MaxInt64

// timers is an indexed 4-ary min-heap of a fixed set of timer slots
// (each CPU's step completion, each thread's wake-up, the tick, the
// period and slack timers, the next reading, the end): arming a slot
// again moves it in place, so the event loop allocates nothing. Ties go
// by the slot's rank (so that, at one instant, the period timer runs
// before the tick), then by slot number: the order is deterministic.
// The heap holds each entry's key, so that sifting reads one array; four
// children a node halve its depth, and most operations sift down.
type timers struct {
	heap []timer
	pos  []int32 // slot -> index in heap, -1 when not armed
	rank []uint8 // per slot
}

// slotMask takes the slot from a timer's key.
const slotMask = 1<<24 - 1

type timer struct {
	at  int64
	key uint32 // rank<<24 | slot
}

func (a timer) before(b timer) bool {
	return a.at < b.at || (a.at == b.at && a.key < b.key)
}

func newTimers(slots int) *timers {
	h := &timers{
		heap: make([]timer, 0, slots),
		pos:  make([]int32, slots),
		rank: make([]uint8, slots),
	}
	for i := range h.pos {
		h.pos[i] = -1
	}
	return h
}

// min is the earliest armed slot and its time (-1, never when none).
func (h *timers) min() (int32, int64) {
	if len(h.heap) == 0 {
		return -1, never
	}
	return int32(h.heap[0].key & slotMask), h.heap[0].at
}

// set arms slot s for time t (never disarms it).
func (h *timers) set(s int32, t int64) {
	if t == never {
		h.clear(s)
		return
	}
	x := timer{at: t, key: uint32(h.rank[s])<<24 | uint32(s)}
	i := h.pos[s]
	if i < 0 {
		h.heap = append(h.heap, x)
		h.up(int32(len(h.heap)-1), x)
		return
	}
	if x.before(h.heap[i]) {
		h.up(i, x)
	} else {
		h.down(i, x)
	}
}

func (h *timers) clear(s int32) {
	i := h.pos[s]
	if i < 0 {
		return
	}
	h.pos[s] = -1
	last := int32(len(h.heap) - 1)
	x := h.heap[last]
	h.heap = h.heap[:last]
	if i == last {
		return
	}
	if i > 0 && x.before(h.heap[(i-1)/4]) {
		h.up(i, x)
	} else {
		h.down(i, x)
	}
}

// up places x at hole i or above.
func (h *timers) up(i int32, x timer) {
	for i > 0 {
		p := (i - 1) / 4
		if !x.before(h.heap[p]) {
			break
		}
		h.heap[i] = h.heap[p]
		h.pos[h.heap[i].key&slotMask] = i
		i = p
	}
	h.heap[i] = x
	h.pos[x.key&slotMask] = i
}

// down places x at hole i or below.
func (h *timers) down(i int32, x timer) {
	hp := h.heap
	n := int32(len(hp))
	for {
		l := 4*i + 1
		if l >= n {
			break
		}
		m, mv := l, hp[l]
		if c := l + 1; c < n && hp[c].before(mv) {
			m, mv = c, hp[c]
		}
		if c := l + 2; c < n && hp[c].before(mv) {
			m, mv = c, hp[c]
		}
		if c := l + 3; c < n && hp[c].before(mv) {
			m, mv = c, hp[c]
		}
		if !mv.before(x) {
			break
		}
		hp[i] = mv
		h.pos[mv.key&slotMask] = i
		i = m
	}
	hp[i] = x
	h.pos[x.key&slotMask] = i
}
