// Package tied starts child processes that die with this one.
//
// A program that starts a workload, a daemon or a busy loop must not leave
// it running when it dies, however it dies: killed by SIGKILL, by go
// test's timeout, or by a write to a closed pipe, none of which runs a
// cleanup. The kernel can do it: PR_SET_PDEATHSIG (SysProcAttr's
// Pdeathsig) sends the child a signal when its parent dies. But the
// kernel's "parent" is the thread that forked the child, not the process
// (prctl(2); golang/go#27505), and the Go runtime ends a thread whenever a
// goroutine returns while locked to it. A child forked from a thread that
// the runtime later ends is killed then, long before the program dies.
//
// Start and StartWith fork the child from a goroutine locked to its
// thread, which stays there until the child has exited: it waits with
// WNOWAIT, leaving the child to cmd.Wait to reap. A child's own children
// are not reached: they are the program's to stop (by their group or PID).
package tied

import (
	"errors"
	"os/exec"
	"runtime"
	"syscall"

	"golang.org/x/sys/unix"
)

// Start starts cmd (cmd.Start) so that the kernel kills it (SIGKILL)
// when this process dies.
func Start(cmd *exec.Cmd) error {
	return StartWith(cmd, cmd.Start)
}

// StartWith is Start for a child that start forks: a function that calls
// cmd.Start after preparing the thread it runs on (its CPU affinity, a
// ptrace stop: cgroup.Start). start runs on a thread locked for it, so
// what it sets on its thread holds for the fork; it may lock and unlock
// the thread again (locks nest).
func StartWith(cmd *exec.Cmd, start func() error) error {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		err := start()
		if err == nil && cmd.Process == nil {
			err = errNotStarted
		}
		started <- err
		if err != nil {
			return
		}
		var info unix.Siginfo
		for unix.Waitid(unix.P_PID, cmd.Process.Pid, &info, unix.WEXITED|unix.WNOWAIT, nil) == unix.EINTR {
		}
	}()
	return <-started
}

// errNotStarted is a start function's that returned no error and started
// nothing: a bug of the caller's.
var errNotStarted = errors.New("tied: the start function returned without starting the command")
