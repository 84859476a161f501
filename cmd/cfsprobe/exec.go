package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/cfsprobe/cfsprobe/internal/cpuview"
	"github.com/cfsprobe/cfsprobe/internal/hostfs"
)

type execFlags struct {
	cpus     string
	round    string
	printEnv bool
	debug    bool
	roots    hostRoots
}

func newExecCmd() *cobra.Command {
	f := &execFlags{}
	c := &cobra.Command{
		Use:   "exec [--cpus N|auto] [--round ceil|floor|nearest] [--print-env] -- COMMAND [ARGS...]",
		Short: "run a command that sees only the CPUs its quota gives it",
		Long: `Runs COMMAND (it replaces cfsprobe: same process, no daemon, no root needed) so
that it sees N CPUs instead of every CPU of the host:

  - programs that ask the C library (sysconf(_SC_NPROCESSORS_ONLN), get_nprocs,
    sched_getaffinity, /sys/devices/system/cpu/online and /proc/cpuinfo
    through libc) get N from cfsprobe's library, given through LD_PRELOAD
    (put in front of an LD_PRELOAD already set): nproc, getconf, Python,
    C++ hardware_concurrency, nginx worker_processes auto, ...
  - runtimes that do not ask libc get their own variables: GOMAXPROCS,
    OMP_NUM_THREADS, OPENBLAS_NUM_THREADS, MKL_NUM_THREADS, PYTHON_CPU_COUNT,
    DOTNET_PROCESSOR_COUNT, and -XX:ActiveProcessorCount=N appended to
    JAVA_TOOL_OPTIONS. A variable you set already is never overridden.

--cpus auto (the default) derives N from this process's own limits, as
cfsprobe cpus shows them: the tightest quota of its group and ancestors, its
cpuset and affinity. The library then follows the quota: if it changes, the
count changes within a second. --round says how a fractional quota becomes a
count. The default is floor (at least 1): with no more busy threads than the
quota has whole CPUs, the group never runs out of quota before the period
ends, so no thread is stopped until the next one; the fraction left over is
idle capacity. ceil uses it, at the price of being throttled whenever every
thread is busy (the JVM, .NET and Go 1.25 round up).

If the limits cannot be read (no quota, a file that cannot be read), N is the
real CPU count and a warning says so on stderr: COMMAND runs regardless, and
its exit status is cfsprobe's.

Not covered, and what to do:
  - statically linked programs, and programs that make the system calls
    themselves (sched_getaffinity, or reading /sys directly) do not load the
    library: give them their own flag or variable (e.g. -j, --threads), or
    mount LXCFS's view of /sys/devices/system/cpu and /proc/cpuinfo.
  - Go programs make their own system calls: GOMAXPROCS sizes the scheduler,
    but runtime.NumCPU() still counts the host's CPUs.
  - set-user-ID programs ignore LD_PRELOAD; a program that switches user and
    then starts another may not be able to read the library in your cache.

--print-env shows what would be set, without running anything.`,
		Example: `  cfsprobe exec -- nproc
  cfsprobe exec --cpus 2 -- sh -c 'make -j"$(nproc)"'
  cfsprobe exec --round ceil -- java -jar app.jar
  cfsprobe exec --print-env
  sudo cfsprobe run --cpus 1 -- cfsprobe exec -- python3 -c 'import os; print(os.cpu_count())'`,
		Args: cobra.ArbitraryArgs,
		RunE: func(c *cobra.Command, args []string) error { return runExec(c, f, args) },
	}
	c.Flags().SetInterspersed(false)
	fl := c.Flags()
	fl.StringVar(&f.cpus, "cpus", "auto", "the view: a whole number of CPUs, or auto (from this process's limits)")
	fl.StringVar(&f.round, "round", string(cpuview.Floor), "how auto rounds a fractional quota: ceil, floor or nearest")
	fl.BoolVar(&f.printEnv, "print-env", false, "print the variables that would be set (K=V; those you set are shown as kept) and run nothing")
	fl.BoolVar(&f.debug, "debug", false, "have the library say on stderr what it answers (CFSPROBE_CPUS_DEBUG=1)")
	f.roots.addFlags(fl)
	_ = fl.MarkHidden("proc-root")
	_ = fl.MarkHidden("fs-root")
	return c
}

func runExec(c *cobra.Command, f *execFlags, args []string) error {
	opts, err := viewOptions("--cpus", f.cpus, "--round", f.round, f.roots.FS())
	if err != nil {
		return err
	}
	if len(args) == 0 && !f.printEnv {
		return usageErr("no command: give one after --, e.g. cfsprobe exec -- nproc (or --print-env to see the variables)")
	}
	opts.Debug = f.debug
	plan := cpuview.PrepareExec(opts)
	for _, w := range plan.Warnings {
		fmt.Fprintln(os.Stderr, "cfsprobe exec: warning:", w)
	}
	if f.printEnv {
		for _, ch := range plan.Changes {
			if ch.Kept {
				fmt.Fprintf(c.OutOrStdout(), "# %s=%s (kept: set already)\n", ch.Name, ch.Value)
			} else {
				fmt.Fprintf(c.OutOrStdout(), "%s=%s\n", ch.Name, ch.Value)
			}
		}
		return nil
	}
	path, err := lookCommand(args[0])
	if err != nil {
		return err
	}
	for _, w := range plan.ForProgram(path) {
		fmt.Fprintln(os.Stderr, "cfsprobe exec: warning:", w)
	}
	err = syscall.Exec(path, args, plan.Env)
	// Only reached when execve failed.
	code := 126
	if errors.Is(err, fs.ErrNotExist) {
		code = 127
	}
	return &exitError{code, fmt.Errorf("exec: %s: %w", args[0], err)}
}

// viewOptions reads a view (N or auto) and its rounding, given to the
// flags cpusFlag and roundFlag, into what cfsprobe exec and run --view
// give cpuview.PrepareExec.
func viewOptions(cpusFlag, cpus, roundFlag, round string, fs hostfs.FS) (cpuview.ExecOptions, error) {
	n := 0 // auto
	if cpus != "auto" {
		var err error
		if n, err = strconv.Atoi(cpus); err != nil || n < 1 {
			return cpuview.ExecOptions{}, usageErr("%s %q: give a whole number of CPUs (1 or more) or auto", cpusFlag, cpus)
		}
	}
	r, err := cpuview.ParseRounding(round)
	if err != nil {
		return cpuview.ExecOptions{}, usageErr("%s: %v", roundFlag, err)
	}
	return cpuview.ExecOptionsHere(n, r, fs), nil
}

// lookCommand finds the command as a shell would: not found is exit
// status 127, found but not executable 126.
func lookCommand(name string) (string, error) {
	if strings.Contains(name, "/") {
		fi, err := os.Stat(name)
		switch {
		case err != nil:
			return "", &exitError{127, fmt.Errorf("exec: %s: no such file", name)}
		case fi.IsDir() || fi.Mode()&0o111 == 0:
			return "", &exitError{126, fmt.Errorf("exec: %s: permission denied (not an executable file)", name)}
		}
		return name, nil
	}
	p, err := exec.LookPath(name)
	if err != nil {
		return "", &exitError{127, fmt.Errorf("exec: %s: command not found", name)}
	}
	return p, nil
}
