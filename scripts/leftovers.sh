#!/usr/bin/env bash
# leftovers.sh: what `make test` may leave behind, before and after.
#
#   scripts/leftovers.sh snapshot FILE   records this machine's state in FILE
#   scripts/leftovers.sh compare FILE    fails, listing them, if anything is
#                                        new since the snapshot
#   scripts/leftovers.sh sweep           removes the groups of test runs that
#                                        were killed (see sweep below)
#
# The state: processes of the daemons the tests start (each test stops its
# own by PID; this is the net under them), mounts, cgroup directories two
# levels deep in every hierarchy (kubepods, docker/<id>, cfsprobe*),
# network links, and the sysctls the kubelet and dockerd change.
set -euo pipefail

# Daemons the tests start, by the name in /proc/PID/comm (15 characters).
DAEMONS='^(dockerd|containerd|containerd-shim|containerd-shi|runc|kubelet|kube-apiserver|kube-controller|kube-scheduler|etcd|prometheus|cfsprobe|cfsprobe-engine|qemu-system-x86)$'
# The kubelet sets the first six unless --protect-kernel-defaults; dockerd
# may turn on forwarding.
SYSCTLS=(vm/overcommit_memory vm/panic_on_oom kernel/panic kernel/panic_on_oops
	kernel/keys/root_maxkeys kernel/keys/root_maxbytes net/ipv4/ip_forward)

state() {
	local pid comm s
	for d in /proc/[0-9]*; do
		pid=${d#/proc/}
		comm=$(cat "$d/comm" 2>/dev/null) || continue
		[[ $comm =~ $DAEMONS ]] || continue
		# A PID is reused; with its start time it names one process.
		s=$(awk '{print $22}' "$d/stat" 2>/dev/null) || continue
		echo "process $pid/$s $comm"
	done
	awk '{print "mount " $5}' /proc/self/mountinfo
	for h in /sys/fs/cgroup/*/; do
		find "$h" -mindepth 1 -maxdepth 2 -type d 2>/dev/null | sed 's/^/cgroup /'
	done
	ip -o link show 2>/dev/null | awk -F': ' '{print "link " $2}' | sed 's/@.*//'
	for s in "${SYSCTLS[@]}"; do
		[ -r "/proc/sys/$s" ] && echo "sysctl ${s//\//.}=$(tr '\t' ' ' <"/proc/sys/$s")"
	done
	return 0
}

# sweep removes what a killed test or benchmark run left: a top-level
# group named cfsprobe-<what>-<pid> (testenv.ParentName, the benchmarks)
# whose PID is no longer running and in which no task is left, in every
# hierarchy, deepest directories first. Groups of a running process, or
# with a task in them, are kept and listed; so is everything else.
sweep() {
	local h d pid
	for h in /sys/fs/cgroup/*/; do
		for d in "$h"cfsprobe-*-[0-9]*; do
			[ -d "$d" ] || continue
			pid=${d##*-}
			[[ $pid =~ ^[0-9]+$ ]] || continue
			if [ -e "/proc/$pid" ]; then
				echo "keeping $d: process $pid runs" >&2
				continue
			fi
			if [ -n "$(find "$d" -name cgroup.procs -exec cat {} + 2>/dev/null)" ]; then
				echo "keeping $d: tasks run in it" >&2
				continue
			fi
			if find "$d" -depth -type d -exec rmdir {} + 2>/dev/null; then
				echo "removed $d, left by process $pid, which has ended" >&2
			else
				echo "could not remove all of $d" >&2
			fi
		done
	done
	return 0
}

case "${1:-}" in
sweep)
	sweep
	;;
snapshot)
	state | sort -u >"$2"
	;;
compare)
	now=$(mktemp)
	trap 'rm -f "$now"' EXIT
	state | sort -u >"$now"
	# Only what is new counts: a group or process that went away (a
	# container someone else stopped) is not the tests' doing.
	left=$(comm -13 "$2" "$now")
	if [ -n "$left" ]; then
		echo "make test left these behind (or changed them):" >&2
		echo "$left" | sed 's/^/  /' >&2
		exit 1
	fi
	echo "nothing left behind: no new process, mount, cgroup or link; sysctls as before"
	;;
*)
	echo "usage: $0 snapshot FILE | compare FILE | sweep" >&2
	exit 2
	;;
esac
