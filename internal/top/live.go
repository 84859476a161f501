package top

import (
	"context"
	"time"

	"github.com/cfsprobe/cfsprobe/internal/trace"
)

// Options are the settings of a view.
type Options struct {
	Interval  time.Duration // between readings
	Sort      SortKey
	Reverse   bool
	All       bool       // the source reads every group, not only those with a limit
	Host      trace.Host // for the header
	Highlight bool       // draw the titles in reverse video and throttled rows in bold
}

// Screen is the terminal the live view draws on: Terminal, or a fake.
type Screen interface {
	Size() (width, height int)
	// Write draws a frame: escape sequences and text.
	Write(p []byte) (int, error)
	// Keys delivers the keys pressed; it is closed when input ends.
	Keys() <-chan Key
	// Redraw signals that the screen must be drawn again (it was resized,
	// or the program came back from a suspend).
	Redraw() <-chan struct{}
}

// Live shows the view on scr, reading src every interval, until the key q
// is pressed (nil), ctx is done (ctx.Err()) or drawing fails. Keys: t u s
// n l sort by throttled, usage, stall, name, limit (the same key again
// reverses the order); up, down, PgUp, PgDn (also k, j, b, space), Home
// and End (g, G) scroll; q quits. A group read once so far shows "-" until
// its second reading.
func Live(ctx context.Context, src Source, scr Screen, o Options) error {
	ctx, stop := runSource(ctx, src)
	defer stop()
	v := &liveView{src: src, scr: scr, o: o, m: NewModel(), view: View{Sort: o.Sort, Reverse: o.Reverse}}
	v.read()
	if err := v.draw(); err != nil {
		return err
	}
	tick := time.NewTicker(o.Interval)
	defer tick.Stop()
	keys := scr.Keys()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
			v.read()
		case k, ok := <-keys:
			if !ok {
				keys = nil // input ended: only q would have stopped us
				continue
			}
			if v.key(k) {
				return nil
			}
		case <-scr.Redraw():
		}
		if err := v.draw(); err != nil {
			return err
		}
	}
}

// liveView is the state of a live view between frames.
type liveView struct {
	src  Source
	scr  Screen
	o    Options
	m    *Model
	err  error // of the last reading
	view View
	page int // rows shown by the last frame
	buf  []byte
}

func (v *liveView) read() {
	s, err := v.src.Read()
	if err == nil {
		v.m.Update(s)
	}
	v.err = err
}

func (v *liveView) draw() error {
	w, h := v.scr.Size()
	v.view.Width, v.view.Height = w, h
	rows := v.m.Rows(v.view.Sort, v.view.Reverse)
	hd := HeaderOf(v.m, v.o)
	if v.err != nil {
		hd.Err = v.err.Error()
	}
	lines, off := Frame(hd, rows, v.view)
	v.view.Offset = off
	v.page = max(h-3, 1)
	v.buf = appendFrame(v.buf[:0], lines, w, v.o.Highlight)
	_, err := v.scr.Write(v.buf)
	return err
}

// key acts on a key; true means quit.
func (v *liveView) key(k Key) bool {
	switch k {
	case "q", "Q", KeyCtrlC:
		return true
	case "t", "u", "s", "n", "l":
		key := map[Key]SortKey{"t": SortThrottled, "u": SortUsage, "s": SortStall, "n": SortName, "l": SortLimit}[k]
		if key == v.view.Sort {
			v.view.Reverse = !v.view.Reverse
		} else {
			v.view.Sort, v.view.Reverse = key, false
		}
		v.view.Offset = 0
	case KeyUp, "k":
		v.view.Offset--
	case KeyDown, "j":
		v.view.Offset++
	case KeyPgUp, "b":
		v.view.Offset -= v.page
	case KeyPgDown, " ", "f":
		v.view.Offset += v.page
	case KeyHome, "g":
		v.view.Offset = 0
	case KeyEnd, "G":
		v.view.Offset = v.m.Len() // Frame keeps it within the rows
	}
	// Frame clamps the offset to the rows; keep it from going far below 0
	// so that the next key moves at once.
	v.view.Offset = max(v.view.Offset, 0)
	return false
}

// HeaderOf gathers the header's facts from the model shown with options o.
func HeaderOf(m *Model, o Options) Header {
	return Header{Host: o.Host, Shown: m.Len(), Total: m.Total(), All: o.All, Skipped: m.Skipped(), Interval: o.Interval, At: m.At()}
}

// Once reads src twice, interval apart, and returns the model: rows with
// figures over that interval (a group that appeared in between has none).
func Once(ctx context.Context, src Source, interval time.Duration) (*Model, error) {
	ctx, stop := runSource(ctx, src)
	defer stop()
	m := NewModel()
	for i := 0; i < 2; i++ {
		if i > 0 {
			t := time.NewTimer(interval)
			select {
			case <-ctx.Done():
				t.Stop()
				return nil, ctx.Err()
			case <-t.C:
			}
		}
		s, err := src.Read()
		if err != nil {
			return nil, err
		}
		m.Update(s)
	}
	return m, nil
}

// runner is a Source with work of its own to run while it is read
// (TreeSource's per-period sampler).
type runner interface{ Run(context.Context) }

// runSource starts src's Run, if it has one; stop ends it and waits.
func runSource(ctx context.Context, src Source) (context.Context, func()) {
	r, ok := src.(runner)
	if !ok {
		return ctx, func() {}
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { r.Run(ctx); close(done) }()
	return ctx, func() { cancel(); <-done }
}
