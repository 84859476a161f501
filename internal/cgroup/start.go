package cgroup

import (
	"errors"
	"fmt"
	"os/exec"
	"runtime"
	"syscall"
)

// Start starts cmd so that the program runs inside the group from its
// first instruction: no CPU time of it is spent, or accounted, outside.
//
// On v2 the child is cloned straight into the group (clone3 with
// CLONE_INTO_CGROUP). Elsewhere (v1, or a v2 kernel older than 5.7) the
// child is started under ptrace, which stops it right after execve and
// before its first user-space instruction; it is moved into the group
// and then released.
func Start(cmd *exec.Cmd, g Group) error {
	if cg, ok := g.(interface{ cgroupFD() (int, func(), error) }); ok {
		fd, closeFD, err := cg.cgroupFD()
		if err == nil {
			attr := sysProcAttr(cmd)
			saved := *attr
			attr.UseCgroupFD, attr.CgroupFD = true, fd
			err = cmd.Start()
			closeFD()
			if err == nil {
				return nil
			}
			// ENOSYS/EINVAL: clone3 or CLONE_INTO_CGROUP not supported.
			if !errors.Is(err, syscall.ENOSYS) && !errors.Is(err, syscall.EINVAL) && !errors.Is(err, syscall.E2BIG) {
				return err
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

func startTraced(cmd *exec.Cmd, g Group) error {
	// ptrace requests must come from the thread that is the tracer: the
	// one that forked the child.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	attr := sysProcAttr(cmd)
	attr.Ptrace = true
	defer func() { attr.Ptrace = false }()
	if err := cmd.Start(); err != nil {
		return err
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
			return fmt.Errorf("wait for %s to stop after exec: %w", cmd.Path, err)
		}
		break
	}
	if !ws.Stopped() {
		return fmt.Errorf("%s exited before it could be moved into the cgroup (status %v)", cmd.Path, ws)
	}
	if err := g.AddProc(pid); err != nil {
		_ = syscall.Kill(pid, syscall.SIGKILL)
		_ = syscall.PtraceDetach(pid)
		_ = cmd.Wait()
		return err
	}
	if err := syscall.PtraceDetach(pid); err != nil {
		_ = syscall.Kill(pid, syscall.SIGKILL)
		_ = cmd.Wait()
		return fmt.Errorf("release %s after moving it into the cgroup: %w", cmd.Path, err)
	}
	return nil
}
