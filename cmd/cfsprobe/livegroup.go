package main

import (
	"errors"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/cfsprobe/cfsprobe/internal/containers"
	"github.com/cfsprobe/cfsprobe/internal/hostfs"
	"github.com/cfsprobe/cfsprobe/internal/lab"
	"github.com/cfsprobe/cfsprobe/internal/monitor"
)

// liveGroup is how cfsprobe record and cfsprobe recommend name a live
// group to record: its cgroup path, a process in it, a container or a
// pod, found in the tree of --cgroup-root, names asked of the container
// runtimes.
type liveGroup struct {
	cgroup         string
	pid            int
	container, pod string
	cgroupRoot     cgroupRoot
	procRoot       string
	runtime        runtimeFlags
}

// liveGroupWays lists the flags that name a live group, for messages.
const liveGroupWays = "--cgroup, --pid, --container or --pod"

// addFlags adds the naming flags; verb is what is done with the group
// ("record", "record first, and advise on,").
func (l *liveGroup) addFlags(fl *pflag.FlagSet, verb, cgroupHelp string) {
	fl.StringVar(&l.cgroup, "cgroup", "", cgroupHelp)
	fl.IntVar(&l.pid, "pid", 0, verb+" the group of this process")
	fl.StringVar(&l.container, "container", "", verb+" the group of the container of this name, or this ID (or a unique prefix of it)")
	fl.StringVar(&l.pod, "pod", "", verb+" the group of this Kubernetes pod: NAMESPACE/NAME, or its UID")
	l.cgroupRoot.addFlag(fl)
	fl.StringVar(&l.procRoot, "proc-root", hostfs.Default().Proc(), "where proc is mounted (for --pid)")
	l.runtime.addFlags(fl)
}

// named says whether a flag names a live group.
func (l *liveGroup) named(c *cobra.Command) bool {
	for _, f := range []string{"cgroup", "pid", "container", "pod"} {
		if c.Flags().Changed(f) {
			return true
		}
	}
	return false
}

// selector is the group the flags (and path, a cgroup path given as an
// argument, "" when none) name, and the words that named it (for the
// trace's spec). ways lists the ways for the messages.
func (l *liveGroup) selector(c *cobra.Command, path, ways string) (monitor.Selector, []string, error) {
	var sel monitor.Selector
	var given []string
	n := 0
	if path != "" {
		sel.Path, given, n = path, append(given, path), n+1
	}
	if c.Flags().Changed("cgroup") {
		sel.Path, given, n = l.cgroup, append(given, "--cgroup", l.cgroup), n+1
	}
	if c.Flags().Changed("pid") {
		if l.pid <= 0 {
			return sel, nil, usageErr("--pid %d is not a process ID: give a positive number", l.pid)
		}
		sel.PID, given, n = l.pid, append(given, "--pid", strconv.Itoa(l.pid)), n+1
	}
	if c.Flags().Changed("container") {
		sel.Container, given, n = l.container, append(given, "--container", l.container), n+1
	}
	if c.Flags().Changed("pod") {
		if ns, name, ok := strings.Cut(l.pod, "/"); ok && (ns == "" || name == "" || strings.Contains(name, "/")) {
			return sel, nil, usageErr("--pod %q: give the pod as NAMESPACE/NAME (shop/api-7d9f), or its UID", l.pod)
		}
		sel.Pod, given, n = l.pod, append(given, "--pod", l.pod), n+1
	}
	switch {
	case n == 0:
		return sel, nil, usageErr("name the group to record: %s (see: %s --help)", ways, c.CommandPath())
	case n > 1:
		return sel, nil, usageErr("name the group one way only: %s", ways)
	}
	return sel, given, nil
}

// recordConfig finds the group sel names and makes the recording's
// configuration (the caller sets the duration and the sampling), and the
// group's label for people: its container's or pod's name, else its
// path. A group that does not exist exits 2.
func (l *liveGroup) recordConfig(sel monitor.Selector, given []string) (lab.RecordConfig, string, error) {
	root, err := l.cgroupRoot.open()
	if err != nil {
		return lab.RecordConfig{}, "", err
	}
	names, err := l.runtime.resolver()
	if err != nil {
		return lab.RecordConfig{}, "", err
	}
	if sel, err = byName(names, sel); err != nil {
		return lab.RecordConfig{}, "", err
	}
	host := hostfs.Default().WithProc(l.procRoot) // --pid's proc, and the host's facts
	g, err := root.Find(sel, host)
	if err != nil {
		if errors.Is(err, monitor.ErrNoGroup) {
			return lab.RecordConfig{}, "", &exitError{2, err}
		}
		return lab.RecordConfig{}, "", err
	}
	n, _ := names.Names(g.ID)
	return lab.RecordConfig{Group: g, Args: given, Host: root.HostFacts(host), Names: n}, n.Label(g.ID.Name), nil
}

// byName turns a selector's container name or pod NAMESPACE/NAME into the
// ID or UID the runtimes listed (Refresh first). A container ID (or the
// start of one, 4 characters or more) that no runtime knows is kept: the
// group's path may still have it.
func byName(names *containers.Resolver, sel monitor.Selector) (monitor.Selector, error) {
	switch {
	case sel.Container != "":
		id, err := names.FindContainer(sel.Container)
		switch {
		case err == nil:
			sel.Container = id
		case errors.Is(err, containers.ErrAmbiguous):
			return sel, usageErr("--container %v: give the container's ID (docker ps, crictl ps), or --pod", err)
		case len(sel.Container) >= 4 && isHex(sel.Container):
			// An ID: found by the groups' paths.
		default:
			return sel, usageErr("--container %s: %v: give a container's name or ID as docker ps or crictl ps shows it (an ID: at least 4 characters)", sel.Container, err)
		}
	case strings.Contains(sel.Pod, "/"):
		ns, name, _ := strings.Cut(sel.Pod, "/")
		uid, err := names.FindPod(ns, name)
		if err != nil {
			return sel, usageErr("--pod %s: %v: give a pod the CRI runtime on --cri-endpoint runs, or its UID (kubectl get pod -n %s %s -o jsonpath='{.metadata.uid}')", sel.Pod, err, ns, name)
		}
		sel.Pod = uid
	}
	return sel, nil
}

func isHex(s string) bool {
	return strings.Trim(s, "0123456789abcdef") == ""
}
