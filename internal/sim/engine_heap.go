package sim

import "math"

// never is the time of a timer that is not armed.
const never = math.MaxInt64

// timers is an indexed binary min-heap of a fixed set of timer slots
// (each CPU's step completion, each thread's wake-up, the tick, the
// period and slack timers, the next reading, the end): arming a slot
// again moves it in place, so the event loop allocates nothing. Ties go
// by the slot's rank (so that, at one instant, the period timer runs
// before the tick), then by slot number: the order is deterministic.
type timers struct {
	at   []int64 // per slot; never when not armed
	rank []uint8 // per slot
	heap []int32 // slots, heap-ordered
	pos  []int32 // slot -> index in heap, -1 when not armed
}

func newTimers(slots int) *timers {
	h := &timers{
		at:   make([]int64, slots),
		rank: make([]uint8, slots),
		heap: make([]int32, 0, slots),
		pos:  make([]int32, slots),
	}
	for i := range h.pos {
		h.pos[i] = -1
		h.at[i] = never
	}
	return h
}

func (h *timers) less(a, b int32) bool {
	if ta, tb := h.at[a], h.at[b]; ta != tb {
		return ta < tb
	}
	if ra, rb := h.rank[a], h.rank[b]; ra != rb {
		return ra < rb
	}
	return a < b
}

// min is the earliest armed slot and its time (-1, never when none).
func (h *timers) min() (int32, int64) {
	if len(h.heap) == 0 {
		return -1, never
	}
	s := h.heap[0]
	return s, h.at[s]
}

// set arms slot s for time t (never disarms it).
func (h *timers) set(s int32, t int64) {
	if t == never {
		h.clear(s)
		return
	}
	old := h.at[s]
	h.at[s] = t
	i := h.pos[s]
	if i < 0 {
		i = int32(len(h.heap))
		h.heap = append(h.heap, s)
		h.pos[s] = i
		h.up(i)
		return
	}
	if t < old {
		h.up(i)
	} else if t > old {
		h.down(i)
	}
}

func (h *timers) clear(s int32) {
	i := h.pos[s]
	h.at[s] = never
	if i < 0 {
		return
	}
	last := int32(len(h.heap) - 1)
	if i != last {
		h.swap(i, last)
	}
	h.heap = h.heap[:last]
	h.pos[s] = -1
	if i != last {
		h.down(i)
		h.up(i)
	}
}

func (h *timers) swap(i, j int32) {
	h.heap[i], h.heap[j] = h.heap[j], h.heap[i]
	h.pos[h.heap[i]] = i
	h.pos[h.heap[j]] = j
}

func (h *timers) up(i int32) {
	for i > 0 {
		p := (i - 1) / 2
		if !h.less(h.heap[i], h.heap[p]) {
			return
		}
		h.swap(i, p)
		i = p
	}
}

func (h *timers) down(i int32) {
	n := int32(len(h.heap))
	for {
		l := 2*i + 1
		if l >= n {
			return
		}
		m := l
		if r := l + 1; r < n && h.less(h.heap[r], h.heap[l]) {
			m = r
		}
		if !h.less(h.heap[m], h.heap[i]) {
			return
		}
		h.swap(i, m)
		i = m
	}
}
