package monitor

import (
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// alarm wakes the sampler at the times it is set to: a timerfd that the
// Go runtime's network poller waits on. The thread that polls wakes up,
// runs the sampler's goroutine and goes back to polling: about one
// context switch per pass. With a runtime timer each expiry also woke the
// runtime's monitor thread (sysmon sleeps until the next timer, and the
// sampler's first system call woke it up to poll every 20 µs), and a
// goroutine on a thread of its own was handed between threads: about 7
// context switches per pass. Its system calls, which do not block, are
// made raw for the same reason (see rawPread).
type alarm struct {
	f  *os.File
	rc syscall.RawConn
	fd int
}

// newAlarm returns an alarm that is not set.
func newAlarm() (*alarm, error) {
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
	return &alarm{f: f, rc: rc, fd: fd}, nil
}

// set makes the alarm go off d from now (at once when d <= 0), instead
// of when it was set to.
func (a *alarm) set(d time.Duration) {
	its := unix.ItimerSpec{Value: unix.NsecToTimespec(max(int64(d), 1))}
	// It cannot fail on a timerfd with a valid time.
	unix.RawSyscall6(unix.SYS_TIMERFD_SETTIME, uintptr(a.fd), 0, uintptr(unsafe.Pointer(&its)), 0, 0, 0)
}

// wait waits until the alarm goes off.
func (a *alarm) wait() error {
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

func (a *alarm) close() { a.f.Close() }
