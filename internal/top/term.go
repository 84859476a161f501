package top

import (
	"errors"
	"fmt"
	"os"
	"os/signal"
	"sync"

	"golang.org/x/sys/unix"
)

// ErrNotTerminal is returned by OpenTerminal when standard input or output
// is not a terminal.
var ErrNotTerminal = errors.New("not a terminal")

// IsTerminal reports whether f is a terminal.
func IsTerminal(f *os.File) bool {
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}

// Terminal is the terminal in the live view's mode: keys arrive one at a
// time without echo (Ctrl-C and Ctrl-Z keep their meaning), the program
// draws on the alternate screen buffer with the cursor hidden and
// autowrap off. Restore puts everything back; it runs on Ctrl-Z too, and
// the mode is entered again when the program is continued.
type Terminal struct {
	in, out *os.File
	saved   unix.Termios

	mu     sync.Mutex // guards active, closed and writes
	active bool       // in the view's mode
	closed bool       // Restore was called

	keys   chan Key
	redraw chan struct{}
	sigs   chan os.Signal
	done   chan struct{}
	once   sync.Once
}

// OpenTerminal puts the terminal of in (keys) and out (the screen) into
// the view's mode. It fails with ErrNotTerminal when either is not a
// terminal, before changing anything.
func OpenTerminal(in, out *os.File) (*Terminal, error) {
	saved, err := unix.IoctlGetTermios(int(in.Fd()), unix.TCGETS)
	if err != nil {
		return nil, fmt.Errorf("standard input: %w", ErrNotTerminal)
	}
	if _, err := unix.IoctlGetTermios(int(out.Fd()), unix.TCGETS); err != nil {
		return nil, fmt.Errorf("standard output: %w", ErrNotTerminal)
	}
	t := &Terminal{
		in: in, out: out, saved: *saved,
		keys:   make(chan Key, 64),
		redraw: make(chan struct{}, 1),
		sigs:   make(chan os.Signal, 4),
		done:   make(chan struct{}),
	}
	if err := t.enter(); err != nil {
		if t.active {
			t.leave()
		}
		return nil, err
	}
	signal.Notify(t.sigs, unix.SIGWINCH, unix.SIGTSTP, unix.SIGCONT)
	go t.signals()
	go t.readKeys()
	return t, nil
}

// enter sets the view's mode: no canonical input, no echo, no flow
// control (Ctrl-S would freeze the screen); signals stay.
func (t *Terminal) enter() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return nil
	}
	raw := t.saved
	raw.Lflag &^= unix.ICANON | unix.ECHO | unix.IEXTEN
	raw.Iflag &^= unix.IXON
	raw.Cc[unix.VMIN], raw.Cc[unix.VTIME] = 1, 0
	if err := unix.IoctlSetTermios(int(t.in.Fd()), unix.TCSETS, &raw); err != nil {
		return fmt.Errorf("set terminal mode: %w", err)
	}
	t.active = true
	_, err := t.out.WriteString(escAltScreen + escHideCur + escNoWrap + escHome + escClear)
	return err
}

// leave restores the terminal as OpenTerminal found it: the main screen
// with its contents, the cursor, autowrap, and the line discipline's
// settings (keys typed meanwhile are discarded, not passed to the shell).
func (t *Terminal) leave() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.leaveLocked()
}

func (t *Terminal) leaveLocked() {
	t.active = false
	_, _ = t.out.WriteString(escReset + escWrap + escShowCur + escMainScr)
	_ = unix.IoctlSetTermios(int(t.in.Fd()), unix.TCSETSF, &t.saved)
}

// Restore leaves the view's mode for good. It may be called more than
// once.
func (t *Terminal) Restore() {
	t.once.Do(func() {
		signal.Stop(t.sigs)
		close(t.done)
		t.mu.Lock()
		defer t.mu.Unlock()
		t.closed = true
		t.leaveLocked()
	})
}

// Size returns the terminal's columns and lines (80x24 when it does not
// say).
func (t *Terminal) Size() (int, int) {
	ws, err := unix.IoctlGetWinsize(int(t.out.Fd()), unix.TIOCGWINSZ)
	if err != nil || ws.Col == 0 || ws.Row == 0 {
		return 80, 24
	}
	return int(ws.Col), int(ws.Row)
}

// Write draws on the screen; while the program is suspended (or after
// Restore) it draws nothing.
func (t *Terminal) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.active {
		return len(p), nil
	}
	return t.out.Write(p)
}

// Keys delivers the keys pressed.
func (t *Terminal) Keys() <-chan Key { return t.keys }

// Redraw signals a resize or a continue after a suspend.
func (t *Terminal) Redraw() <-chan struct{} { return t.redraw }

func (t *Terminal) signals() {
	for {
		select {
		case <-t.done:
			return
		case s := <-t.sigs:
			switch s {
			case unix.SIGTSTP:
				// Ctrl-Z: give the shell its terminal back, then stop as
				// the default action would have.
				t.leave()
				_ = unix.Kill(os.Getpid(), unix.SIGSTOP)
			case unix.SIGCONT:
				t.mu.Lock()
				active := t.active
				t.mu.Unlock()
				if !active {
					_ = t.enter() // does nothing after Restore
				}
			}
			select {
			case t.redraw <- struct{}{}:
			default:
			}
		}
	}
}

// readKeys decodes standard input into keys until it ends or fails. It
// may stay blocked in a read after Restore; the process is then ending.
func (t *Terminal) readKeys() {
	defer close(t.keys)
	var d keyDecoder
	buf := make([]byte, 256)
	for {
		n, err := t.in.Read(buf)
		for _, k := range d.decode(buf[:n]) {
			select {
			case t.keys <- k:
			case <-t.done:
				return
			}
		}
		if err != nil {
			return
		}
	}
}
