// Package alarm wakes a goroutine at a set time at the least cost to the
// CPUs it shares with the work it watches: the exporter's sampler
// (internal/monitor) and the lab's reader of a run's counters
// (internal/lab) wake tens or hundreds of times a second beside the
// groups they read, and every context switch they cause on a CPU that a
// group's thread is running on is a moment the thread does not run.
package alarm

import (
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Alarm is a timerfd that the Go runtime's network poller waits on. The
// thread that polls wakes up, runs the waiting goroutine and goes back
// to polling: about one context switch per wake-up. With a runtime timer
// (time.After, time.Sleep) each expiry also woke the runtime's monitor
// thread (sysmon sleeps until the next timer, and the first system call
// after the wake-up woke it to poll every 20 µs), and a goroutine on a
// thread of its own was handed between threads: about 7 context switches
// per wake-up for the exporter's sampler, and 5 or 6 for the lab's
// reader (docs/design.md, "The lab's reader"). System calls that do not
// block are best made raw for the same reason (cgroup.PreadAll).
//
// Set and Wait may be called from different goroutines; one goroutine
// waits at a time.
type Alarm struct {
	f  *os.File
	rc syscall.RawConn
	fd int
}

// New returns an alarm that is not set.
func New() (*Alarm, error) {
	fd, err := unix.TimerfdCreate(unix.CLOCK_MONOTONIC, unix.TFD_NONBLOCK|unix.TFD_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("timerfd_create: %w", err)
	}
	f := os.NewFile(uintptr(fd), "timerfd") // non-blocking: the runtime polls it
	rc, err := f.SyscallConn()
	if err != nil {
		f.Close()
		return nil, err
	}
	return &Alarm{f: f, rc: rc, fd: fd}, nil
}

// Set makes the alarm go off d from now (at once when d <= 0), instead
// of when it was set to.
func (a *Alarm) Set(d time.Duration) {
	its := unix.ItimerSpec{Value: unix.NsecToTimespec(max(int64(d), 1))}
	// It cannot fail on a timerfd with a valid time.
	unix.RawSyscall6(unix.SYS_TIMERFD_SETTIME, uintptr(a.fd), 0, uintptr(unsafe.Pointer(&its)), 0, 0, 0)
}

// Wait waits until the alarm goes off. It fails once the alarm is
// closed.
func (a *Alarm) Wait() error {
	var rerr error
	err := a.rc.Read(func(fd uintptr) bool {
		var n uint64 // expirations
		for {
			_, _, e := unix.RawSyscall(unix.SYS_READ, fd, uintptr(unsafe.Pointer(&n)), 8)
			switch e {
			case unix.EINTR:
				continue
			case unix.EAGAIN:
				return false // not yet: the poller waits
			case 0:
			default:
				rerr = e
			}
			return true
		}
	})
	return errors.Join(err, rerr)
}

// Close closes the alarm's timerfd; a Wait under way returns an error.
func (a *Alarm) Close() { a.f.Close() }
