package cgroup

import (
	"errors"
	"fmt"
	"os/exec"
	"runtime"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Start starts cmd so that the program runs inside the group from its
// first instruction: no CPU time of its program is spent, or accounted,
// outside. outside is the CPU time the child had used when it entered
// the group (its process CPU clock, which counts from the fork), none of
// which the group was charged.
//
// On v2 the child is cloned straight into the group (clone3 with
// CLONE_INTO_CGROUP): outside is 0. Elsewhere (v1, or a v2 kernel older
// than 5.7) the child is started under ptrace, which stops it right after
// execve and before its first user-space instruction; it is moved into
// the group and then released: outside is its fork's and exec's.
func Start(cmd *exec.Cmd, g Group) (outside time.Duration, err error) {
	if cg, ok := g.(interface{ cgroupFD() (int, func(), error) }); ok {
		fd, closeFD, err := cg.cgroupFD()
		if err == nil {
			attr := sysProcAttr(cmd)
			saved := *attr
			attr.UseCgroupFD, attr.CgroupFD = true, fd
			err = cmd.Start()
			closeFD()
			if err == nil {
				return 0, nil
			}
			// ENOSYS/EINVAL: clone3 or CLONE_INTO_CGROUP not supported.
			if !errors.Is(err, syscall.ENOSYS) && !errors.Is(err, syscall.EINVAL) && !errors.Is(err, syscall.E2BIG) {
				return 0, err
			}
			*attr = saved
			cmd.Process = nil
		}
	}
	return startTraced(cmd, g)
}

func sysProcAttr(cmd *exec.Cmd) *syscall.SysProcAttr {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	return cmd.SysProcAttr
}

func startTraced(cmd *exec.Cmd, g Group) (time.Duration, error) {
	// ptrace requests must come from the thread that is the tracer: the
	// one that forked the child.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	attr := sysProcAttr(cmd)
	attr.Ptrace = true
	defer func() { attr.Ptrace = false }()
	if err := cmd.Start(); err != nil {
		return 0, err
	}
	pid := cmd.Process.Pid
	var ws syscall.WaitStatus
	for {
		_, err := syscall.Wait4(pid, &ws, syscall.WALL, nil)
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			_ = cmd.Process.Kill()
			return 0, fmt.Errorf("wait for %s to stop after exec: %w", cmd.Path, err)
		}
		break
	}
	if !ws.Stopped() {
		return 0, fmt.Errorf("%s exited before it could be moved into the cgroup (status %v)", cmd.Path, ws)
	}
	// Stopped, it uses no CPU until it is released.
	outside, err := ProcessCPU(pid)
	if err == nil {
		err = g.AddProc(pid)
	}
	if err != nil {
		_ = syscall.Kill(pid, syscall.SIGKILL)
		_ = syscall.PtraceDetach(pid)
		_ = cmd.Wait()
		return 0, err
	}
	if err := syscall.PtraceDetach(pid); err != nil {
		_ = syscall.Kill(pid, syscall.SIGKILL)
		_ = cmd.Wait()
		return 0, fmt.Errorf("release %s after moving it into the cgroup: %w", cmd.Path, err)
	}
	return outside, nil
}

// ProcessCPU reads process pid's CPU clock (its CLOCK_PROCESS_CPUTIME_ID,
// which any process may read): the CPU time of all its threads since its
// fork, to the nanosecond.
func ProcessCPU(pid int) (time.Duration, error) {
	if pid <= 0 || pid >= 1<<28 {
		return 0, fmt.Errorf("read the CPU clock of process %d: not a process ID", pid)
	}
	// The clock of another process: MAKE_PROCESS_CPUCLOCK(pid,
	// CPUCLOCK_SCHED) in the kernel's posix-timers.h.
	id := int32(^pid<<3 | 2)
	var ts unix.Timespec
	if err := unix.ClockGettime(id, &ts); err != nil {
		return 0, fmt.Errorf("read the CPU clock of process %d: %w", pid, err)
	}
	return time.Duration(ts.Nano()), nil
}
