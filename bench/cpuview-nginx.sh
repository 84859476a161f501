#!/usr/bin/env bash
# bench/cpuview-nginx.sh: seed 004's Exp2 ("Effects of Period and quota
# information") on this host, scaled to it. nginx with `worker_processes
# auto` runs in a cgroup whose CPU quota is half the host's CPUs and is
# loaded by wrk over loopback, in five cases:
#
#   1 none    no CPU view: nginx sees the host's CPUs
#   2 quota   cfsprobe exec --cpus QUOTA: the view is the quota's CPUs
#   3 over    cfsprobe exec --cpus 2xQUOTA: overcommit
#   4 under   cfsprobe exec --cpus QUOTA/2: undercommit (whole CPUs, at
#             least 1: on a 2-CPU host that is 1, the same view as case 2)
#   5 lxcfs   LXCFS --enable-cfs bind-mounted over /proc/cpuinfo, /proc/stat
#             and /sys/devices/system/cpu/online (today's userspace answer)
#
# and two more with the quota raised to all the host's CPUs, where nothing
# is throttled: 6 (no view) and 7 (a view of half of them). On a 2-CPU host
# case 4 cannot have fewer workers than case 2, and 6 against 7 separates
# what the number of workers does from what throttling does.
#
# Each case runs REPS times, the cases interleaved (1 2 3 4 5 1 2 ...) so
# that background noise falls on all of them alike; the table gives the
# median and, in brackets, the lowest and highest run. It prints a markdown
# section on stdout (what bench/run.sh cpuview-nginx records in
# bench/RESULTS.md) and its progress on stderr.
#
# Needs root and cgroup v1 (cpu, cpuacct, cpuset and memory hierarchies,
# apart or co-mounted). Installs nginx, wrk and lxcfs from apt when they are
# missing, without starting their services. Builds bin/cfsprobe when it is
# missing. Everything it makes (groups, nginx, lxcfs and its mount, a
# temporary directory) is removed at the end, also on failure and Ctrl-C.
#
# Environment: REPS (3), DURATION of each wrk run (12s), CONNECTIONS (64),
# WRK_THREADS (1), CASES ("1 2 3 4 5 6 7"). With the defaults it takes
# about five minutes.
set -euo pipefail
cd "$(dirname "$0")/.."

REPS=${REPS:-3}
DURATION=${DURATION:-12s}
CONNECTIONS=${CONNECTIONS:-64}
WRK_THREADS=${WRK_THREADS:-1}
CASES=${CASES:-1 2 3 4 5 6 7}
CFSPROBE=${CFSPROBE:-bin/cfsprobe}
CG=/sys/fs/cgroup

say() { echo "cpuview-nginx: $*" >&2; }
die() {
	say "$*"
	exit 1
}

[[ $REPS =~ ^[1-9][0-9]*$ ]] || { say "REPS=$REPS is not a positive whole number: set REPS=3"; exit 2; }
[[ $DURATION =~ ^[1-9][0-9]*s$ ]] || { say "DURATION=$DURATION is not whole seconds: set e.g. DURATION=15s"; exit 2; }
for c in $CASES; do
	[[ $c =~ ^[1-7]$ ]] || { say "CASES holds $c; the cases are 1 to 7: set e.g. CASES=\"1 2 5\""; exit 2; }
done
[ "$(id -u)" = 0 ] || { say "makes cgroups and mounts: run it as root"; exit 2; }
if [ -f $CG/cgroup.controllers ] || [ ! -d $CG/cpu ] || [ ! -d $CG/cpuacct ] || [ ! -d $CG/cpuset ] || [ ! -d $CG/memory ]; then
	say "needs cgroup v1 with cpu, cpuacct, cpuset and memory hierarchies under $CG (this host has: $(cd $CG && echo *))"
	exit 2
fi

# --- packages ---------------------------------------------------------------

install_missing() {
	local missing=() p
	for p in "$@"; do
		dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
	done
	[ ${#missing[@]} -gt 0 ] || return 0
	say "installing ${missing[*]} from apt"
	# policy-rc.d 101 keeps the postinst scripts from starting nginx or
	# lxcfs as services (a stray nginx on port 80 or lxcfs on
	# /var/lib/lxcfs); an existing policy is left as it is.
	local policy=/usr/sbin/policy-rc.d ours=0
	if [ ! -e $policy ]; then
		printf '#!/bin/sh\nexit 101\n' >$policy
		chmod +x $policy
		ours=1
		trap 'rm -f /usr/sbin/policy-rc.d' EXIT
	fi
	local rc=0
	{ apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"; } >&2 || rc=$?
	if [ $ours = 1 ]; then
		rm -f $policy
		trap - EXIT
	fi
	[ $rc = 0 ] || die "apt-get install ${missing[*]} failed"
}
install_missing nginx wrk lxcfs

# --- what gets made, and its removal ----------------------------------------

tmp=$(mktemp -d /tmp/cpuview-nginx.XXXXXX)
chmod 755 "$tmp" # nginx's workers run as nobody and read html/ from here
group=cfsprobe-bench-nginx-$$
groupdirs=() # every hierarchy's directory of the group, without duplicates
alldirs=()   # those and wrk's, to remove at the end
lxcfs_pid=""
launcher=""
wrkpid=""

# kill_group: SIGKILL whatever is left in the groups (nginx, wrk).
kill_group() {
	local d pid
	for d in "${alldirs[@]}"; do
		[ -f "$d/cgroup.procs" ] || continue
		while read -r pid; do kill -KILL "$pid" 2>/dev/null || true; done <"$d/cgroup.procs"
	done
}

cleanup() {
	local rc=$?
	trap - EXIT INT TERM
	[ -z "$wrkpid" ] || kill -TERM "$wrkpid" 2>/dev/null || true
	kill_group
	[ -z "$launcher" ] || wait "$launcher" 2>/dev/null || true
	if [ -n "$lxcfs_pid" ]; then
		kill -TERM "$lxcfs_pid" 2>/dev/null || true
		wait "$lxcfs_pid" 2>/dev/null || true
	fi
	if mountpoint -q "$tmp/lxcfs" 2>/dev/null; then
		umount "$tmp/lxcfs" 2>/dev/null || umount -l "$tmp/lxcfs" || say "could not unmount $tmp/lxcfs"
	fi
	local d
	for d in "${alldirs[@]}"; do
		for _ in 1 2 3 4 5 6 7 8 9 10; do
			[ -d "$d" ] || break
			rmdir "$d" 2>/dev/null && break
			kill_group
			sleep 0.2
		done
		[ ! -d "$d" ] || say "could not remove $d"
	done
	if mountpoint -q "$tmp/lxcfs" 2>/dev/null; then
		say "left $tmp in place: lxcfs is still mounted on $tmp/lxcfs"
	else
		rm -rf "$tmp"
	fi
	exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# cg_write FILE VALUE: every write to cgroupfs, naming file and value when
# it fails.
cg_write() {
	if ! echo "$2" 2>/dev/null >"$1"; then
		die "write $2 to $1 failed"
	fi
}

host_cpus=$(getconf _NPROCESSORS_ONLN)
# The quota: half the host's CPUs (whole CPUs, at least one).
quota_cpus=$((host_cpus / 2))
[ $quota_cpus -ge 1 ] || quota_cpus=1
period_us=100000

make_group() {
	local h d seen
	for h in cpu cpuacct cpuset memory; do
		d=$(realpath "$CG/$h")/$group
		seen=0
		for x in "${groupdirs[@]}"; do [ "$x" = "$d" ] && seen=1; done
		[ $seen = 1 ] && continue
		mkdir "$d" || die "mkdir $d failed"
		groupdirs+=("$d")
		alldirs+=("$d")
	done
	local cs
	cs=$(realpath $CG/cpuset)/$group
	cg_write "$cs/cpuset.cpus" "$(cat "$(realpath $CG/cpuset)/cpuset.cpus")"
	cg_write "$cs/cpuset.mems" "$(cat "$(realpath $CG/cpuset)/cpuset.mems")"
	cpudir=$(realpath $CG/cpu)/$group
	# wrk's own accounting group (no limit), so that the CPU the rest of
	# the machine used during a run can be told apart
	wrkacct=$(realpath $CG/cpuacct)/$group-wrk
	mkdir "$wrkacct" || die "mkdir $wrkacct failed"
	alldirs+=("$wrkacct")
	acctdir=$(realpath $CG/cpuacct)/$group
	memdir=$(realpath $CG/memory)/$group
	cg_write "$cpudir/cpu.cfs_period_us" $period_us
}

# set_quota CPUS: quota = CPUS x period.
set_quota() {
	cg_write "$cpudir/cpu.cfs_quota_us" $(($1 * period_us))
}

# --- nginx ------------------------------------------------------------------

port=""
for _ in $(seq 50); do
	p=$((20000 + RANDOM % 20000))
	if [ -z "$(ss -Htln "( sport = :$p )")" ]; then
		port=$p
		break
	fi
done
[ -n "$port" ] || die "no free port found between 20000 and 40000"

mkdir -p "$tmp/html" "$tmp/temp"
# The seed served nginx's default page (its responses are ~810 bytes with
# headers): the same 615-byte index.html.
if [ -f /usr/share/nginx/html/index.html ]; then
	cp /usr/share/nginx/html/index.html "$tmp/html/index.html"
else
	head -c 615 /dev/zero | tr '\0' x >"$tmp/html/index.html"
fi
chmod -R a+rX "$tmp/html"
# The official image's nginx.conf, trimmed to what serving one file uses.
cat >"$tmp/nginx.conf" <<EOF
worker_processes auto;
daemon off;
pid $tmp/nginx.pid;
error_log stderr notice;
events {
    worker_connections 1024;
}
http {
    access_log off;
    default_type text/html;
    sendfile on;
    keepalive_timeout 65;
    client_body_temp_path $tmp/temp/body;
    proxy_temp_path $tmp/temp/proxy;
    fastcgi_temp_path $tmp/temp/fastcgi;
    uwsgi_temp_path $tmp/temp/uwsgi;
    scgi_temp_path $tmp/temp/scgi;
    server {
        listen 127.0.0.1:$port;
        root $tmp/html;
    }
}
EOF
nginx_cmd=(nginx -e stderr -p "$tmp" -c "$tmp/nginx.conf")
nginx -t -e stderr -p "$tmp" -c "$tmp/nginx.conf" 2>"$tmp/nginx-t.log" || {
	cat "$tmp/nginx-t.log" >&2
	die "nginx -t refused the configuration above"
}

# --- LXCFS ------------------------------------------------------------------

start_lxcfs() {
	mkdir -p "$tmp/lxcfs"
	lxcfs -f --enable-cfs -p "$tmp/lxcfs.pid" "$tmp/lxcfs" >"$tmp/lxcfs.log" 2>&1 &
	lxcfs_pid=$!
	for _ in $(seq 50); do
		mountpoint -q "$tmp/lxcfs" && [ -f "$tmp/lxcfs/proc/cpuinfo" ] && break
		kill -0 $lxcfs_pid 2>/dev/null || { cat "$tmp/lxcfs.log" >&2; die "lxcfs exited"; }
		sleep 0.1
	done
	mountpoint -q "$tmp/lxcfs" || { cat "$tmp/lxcfs.log" >&2; die "lxcfs did not mount $tmp/lxcfs in 5s"; }
	# LXCFS computes the view from the cgroup of the process that reads,
	# and takes the quota from the cpu hierarchy at the path of the
	# reader's *cpuset* group: so nginx is in a cpuset group of the same
	# name. Check that a reader in the group sees the quota's CPUs.
	local got
	got=$(in_group cat "$tmp/lxcfs/sys/devices/system/cpu/online")
	say "lxcfs: a reader in the group sees CPUs $got"
	lxcfs_online=$got
}

# in_group CMD...: run CMD in the group, in the foreground.
in_group() {
	(
		for d in "${groupdirs[@]}"; do echo "$BASHPID" >"$d/cgroup.procs"; done
		exec "$@"
	)
}

# --- one run ----------------------------------------------------------------

# expected_workers MODE: the workers `worker_processes auto` starts under
# the view MODE.
expected_workers() {
	case $1 in
	none) echo "$host_cpus" ;;
	lxcfs) echo "$quota_now" ;;
	*) echo "$1" ;;
	esac
}

# start_nginx MODE: nginx's master in the group, through the view MODE
# (none, lxcfs, or a CPU count for cfsprobe exec --cpus).
start_nginx() {
	local mode=$1
	rm -f "$tmp/nginx.pid"
	(
		for d in "${groupdirs[@]}"; do echo "$BASHPID" >"$d/cgroup.procs"; done
		case $mode in
		none) exec "${nginx_cmd[@]}" ;;
		lxcfs)
			# a private mount namespace so that the bind mounts are
			# nginx's alone
			# shellcheck disable=SC2016 # expanded by the inner sh
			exec unshare -m --propagation private sh -c '
				m=$1; shift
				mount --bind "$m/proc/cpuinfo" /proc/cpuinfo &&
				mount --bind "$m/proc/stat" /proc/stat &&
				mount --bind "$m/sys/devices/system/cpu/online" /sys/devices/system/cpu/online &&
				exec "$@"' sh "$tmp/lxcfs" "${nginx_cmd[@]}"
			;;
		*) exec "$CFSPROBE" exec --cpus "$mode" -- "${nginx_cmd[@]}" ;;
		esac
	) >"$tmp/nginx.log" 2>&1 &
	launcher=$!
	local n prev=-1 stable=0
	for _ in $(seq 100); do
		kill -0 $launcher 2>/dev/null || { cat "$tmp/nginx.log" >&2; die "nginx ($mode) exited at start"; }
		if [ -s "$tmp/nginx.pid" ] && [ -n "$(ss -Htln "( sport = :$port )")" ]; then
			master=$(cat "$tmp/nginx.pid")
			n=$(pgrep -c -P "$master" || true)
			if [ "$n" = "$prev" ] && [ "$n" -gt 0 ]; then
				stable=$((stable + 1))
				[ $stable -ge 3 ] && return 0
			else
				stable=0
			fi
			prev=$n
		fi
		sleep 0.1
	done
	cat "$tmp/nginx.log" >&2
	die "nginx ($mode) did not start listening on 127.0.0.1:$port in 10s"
}

stop_nginx() {
	[ -n "$launcher" ] || return 0
	kill -TERM "$(cat "$tmp/nginx.pid" 2>/dev/null || echo "$launcher")" 2>/dev/null || true
	for _ in $(seq 50); do
		[ -z "$(cat "$cpudir/cgroup.procs")" ] && break
		sleep 0.1
	done
	kill_group
	wait "$launcher" 2>/dev/null || true
	launcher=""
	for _ in $(seq 20); do
		[ -z "$(cat "$cpudir/cgroup.procs")" ] && break
		sleep 0.1
	done
	[ -z "$(cat "$cpudir/cgroup.procs")" ] || die "nginx is still in the group after SIGKILL: $(tr '\n' ' ' <"$cpudir/cgroup.procs")"
	! pgrep -f "$tmp/nginx.conf" >/dev/null || die "an nginx of this run is still alive: $(pgrep -af "$tmp/nginx.conf")"
}

# mem_mib: the group's memory less its page cache (what docker stats shows
# for a container on cgroup v1, as in the seed): nginx's anonymous memory
# and the kernel memory charged to it, in MiB.
mem_mib() {
	awk -v u="$(cat "$memdir/memory.usage_in_bytes")" '
		$1 == "total_cache" { c = $2 }
		END { printf "%.2f", (u - c) / 1048576 }' "$memdir/memory.stat"
}

# busy_ticks: the host's busy CPU time so far (/proc/stat, clock ticks).
busy_ticks() { awk '$1 == "cpu" { print $2 + $3 + $4 + $7 + $8 + $9; exit }' /proc/stat; }

stat_of() { awk -v k="$1" '$1 == k { print $2 }' "$cpudir/cpu.stat"; }

# ms VALUE: wrk's time (123.45us, 1.2ms, 1.05s, 1.5m) in milliseconds.
ms() {
	awk -v v="$1" 'BEGIN {
		if (v ~ /us$/) { sub(/us$/, "", v); print v / 1000 }
		else if (v ~ /ms$/) { sub(/ms$/, "", v); print v + 0 }
		else if (v ~ /m$/) { sub(/m$/, "", v); print v * 60000 }
		else if (v ~ /s$/) { sub(/s$/, "", v); print v * 1000 }
		else print "nan" }'
}

# half N: the undercommit view, half of N CPUs; cfsprobe exec takes whole
# CPUs, at least 1, so a quota of 1 CPU gets a view of 1.
half() {
	local h=$(($1 / 2))
	[ $h -ge 1 ] || h=1
	echo $h
}

# run_case CASE REP: one run, appending a row to $tmp/runs.tsv.
run_case() {
	local c=$1 rep=$2 mode q
	q=$quota_cpus
	case $c in
	1) mode=none ;;
	2) mode=$q ;;
	3)
		# cfsprobe exec gives at most the CPUs the process may use
		mode=$((2 * q))
		[ $mode -le "$host_cpus" ] || mode=$host_cpus
		;;
	4) mode=$(half "$q") ;;
	5) mode=lxcfs ;;
	6)
		q=$host_cpus
		mode=none
		;;
	7)
		q=$host_cpus
		mode=$(half "$q")
		;;
	esac
	quota_now=$q
	set_quota "$q"
	start_nginx "$mode"
	local workers want
	workers=$(pgrep -c -P "$master")
	want=$(expected_workers "$mode")
	if [ "$workers" != "$want" ]; then
		cat "$tmp/nginx.log" >&2
		die "case $c (view $mode): nginx started $workers workers, $want expected; the CPU view did not reach nginx"
	fi
	sleep 1
	local mem_idle mem_load p0 t0 tt0 u0 p1 t1 tt1 u1 w0 w1 wu0 wu1 b0 b1
	mem_idle=$(mem_mib)
	p0=$(stat_of nr_periods) t0=$(stat_of nr_throttled) tt0=$(stat_of throttled_time)
	u0=$(cat "$acctdir/cpuacct.usage")
	wu0=$(cat "$wrkacct/cpuacct.usage")
	b0=$(busy_ticks)
	w0=$(date +%s%N)
	(
		echo "$BASHPID" >"$wrkacct/cgroup.procs"
		exec wrk -t"$WRK_THREADS" -c"$CONNECTIONS" -d"$DURATION" --latency "http://127.0.0.1:$port/"
	) >"$tmp/wrk.out" 2>&1 &
	wrkpid=$!
	local m
	mem_load=0
	while kill -0 $wrkpid 2>/dev/null; do
		m=$(mem_mib)
		mem_load=$(awk -v a="$m" -v b="$mem_load" 'BEGIN { print (a > b ? a : b) }')
		sleep 0.5
	done
	wait $wrkpid || { cat "$tmp/wrk.out" >&2; die "wrk failed"; }
	wrkpid=""
	w1=$(date +%s%N)
	p1=$(stat_of nr_periods) t1=$(stat_of nr_throttled) tt1=$(stat_of throttled_time)
	u1=$(cat "$acctdir/cpuacct.usage")
	wu1=$(cat "$wrkacct/cpuacct.usage")
	b1=$(busy_ticks)
	[ "$(pgrep -c -P "$master")" = "$workers" ] || die "case $c: nginx's worker count changed during the run"
	stop_nginx
	local rps p50 p99 errs
	rps=$(awk '/^Requests\/sec:/ { print $2 }' "$tmp/wrk.out")
	p50=$(ms "$(awk '$1 == "50%" { print $2 }' "$tmp/wrk.out")")
	p99=$(ms "$(awk '$1 == "99%" { print $2 }' "$tmp/wrk.out")")
	errs=$(awk '/^  Socket errors:/ { gsub(/,/, ""); print $4 + $6 + $8 + $10 } /^  Non-2xx/ { print $NF }' "$tmp/wrk.out" | awk '{ s += $1 } END { print s + 0 }')
	if [ -z "$rps" ] || [ "$p50" = nan ] || [ "$p99" = nan ]; then
		cat "$tmp/wrk.out" >&2
		die "could not read wrk's output"
	fi
	local periods=$((p1 - p0)) throttled=$((t1 - t0))
	local pct cpus thr_s wcpus other
	wcpus=$(awk -v u=$((wu1 - wu0)) -v w=$((w1 - w0)) 'BEGIN { printf "%.2f", u / w }')
	# the host's busy CPUs over the run, less nginx and wrk
	other=$(awk -v b=$((b1 - b0)) -v hz="$(getconf CLK_TCK)" -v w=$((w1 - w0)) -v n=$((u1 - u0)) -v k=$((wu1 - wu0)) \
		'BEGIN { o = (b / hz * 1e9 - n - k) / w; if (o < 0) o = 0; printf "%.2f", o }')
	thr_s=$(awk -v t=$((tt1 - tt0)) 'BEGIN { printf "%.2f", t / 1e9 }')
	pct=$(awk -v t=$throttled -v p=$periods 'BEGIN { printf "%.1f", p ? 100 * t / p : 0 }')
	cpus=$(awk -v u=$((u1 - u0)) -v w=$((w1 - w0)) 'BEGIN { printf "%.2f", u / w }')
	printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' \
		"$c" "$rep" "$mode" "$q" "$workers" "$mem_idle" "$mem_load" "$periods" "$throttled" "$pct" "$cpus" "$rps" "$p50" "$p99" "$errs" "$thr_s" "$wcpus" "$other" >>"$tmp/runs.tsv"
	say "case $c run $rep: view $mode, $workers workers, memory ${mem_idle}/${mem_load} MiB, throttled $throttled/$periods ($pct%, ${thr_s}s), nginx $cpus CPUs, wrk $wcpus, others $other, $rps req/s, p50 ${p50}ms p99 ${p99}ms, $errs errors"
}

# --- the experiment ---------------------------------------------------------

loadavg() { cut -d' ' -f1-3 /proc/loadavg; }
load_before=$(loadavg)
if awk -v l="${load_before%% *}" 'BEGIN { exit !(l > 1.0) }'; then
	say "load average is $load_before: other work on this machine will show in the numbers"
fi

needs_view=0 needs_lxcfs=0
for c in $CASES; do
	case $c in 2 | 3 | 4 | 7) needs_view=1 ;; 5) needs_lxcfs=1 ;; esac
done
if [ $needs_view = 1 ]; then
	[ -x "$CFSPROBE" ] || make build >&2
	"$CFSPROBE" exec --help >/dev/null 2>&1 || die "$CFSPROBE has no exec command: build a cfsprobe with one (make build)"
fi

make_group
set_quota "$quota_cpus"
[ $needs_lxcfs = 0 ] || start_lxcfs
: >"$tmp/runs.tsv"
start=$(date +%s)
for rep in $(seq "$REPS"); do
	for c in $CASES; do
		run_case "$c" "$rep"
	done
done
elapsed=$(($(date +%s) - start))
load_after=$(loadavg)
busy_rest=$(awk -F'\t' '$18 > 0.15 { n++ } END { print n + 0 }' "$tmp/runs.tsv")
[ "$busy_rest" = 0 ] || say "in $busy_rest runs the rest of the host used more than 0.15 CPUs (column 'rest'): other work was running; rerun on a quieter machine"

# --- the table --------------------------------------------------------------

# stat CASE COLUMN FORMAT: "median (min-max)" of a column over a case's runs
# (the range only when there is more than one run and it is not one value).
stat() {
	awk -F'\t' -v c="$1" '$1 == c { print $'"$2"' }' "$tmp/runs.tsv" | sort -g | awk -v f="$3" '
		{ v[NR] = $1 }
		END {
			if (NR == 0) { print "-"; exit }
			m = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
			s = sprintf(f, m)
			if (NR > 1 && sprintf(f, v[1]) != sprintf(f, v[NR]))
				s = s " (" sprintf(f, v[1]) "–" sprintf(f, v[NR]) ")"
			print s
		}'
}
# med CASE COLUMN: the median alone, as it is written in the runs.
med() { stat "$1" "$2" %.2f | cut -d' ' -f1; }
first() { awk -F'\t' -v c="$1" -v k="$2" '$1 == c { print $k; exit }' "$tmp/runs.tsv"; }

model=$(awk -F': *' '/^model name/ { print $2; exit }' /proc/cpuinfo)
kernel=$(uname -r)
nginx_v=$(nginx -v 2>&1 | sed 's|.*nginx/||')
wrk_v=$(dpkg-query -W -f='${Version}' wrk)
lxcfs_v=$(dpkg-query -W -f='${Version}' lxcfs)
glibc_v=$(dpkg-query -W -f='${Version}' libc6)

view_name() {
	case $1 in
	1) echo "none (nginx sees the host's $host_cpus)" ;;
	2) echo "$(first 2 3) (the quota's CPUs)" ;;
	3) echo "$(first 3 3) (overcommit, 2×)" ;;
	4) echo "$(first 4 3) (undercommit, ½×)" ;;
	5) echo "LXCFS --enable-cfs (online: $lxcfs_online)" ;;
	6) echo "none (the host's $host_cpus)" ;;
	7) echo "$(first 7 3) (undercommit, ½×)" ;;
	esac
}
case_name() {
	case $1 in 1) echo "1 no view" ;; 2) echo "2 view = quota" ;; 3) echo "3 overcommit" ;; 4) echo "4 undercommit" ;; 5) echo "5 LXCFS" ;; 6) echo "6 quota $host_cpus CPUs, no view" ;; 7) echo "7 quota $host_cpus CPUs, undercommit" ;; esac
}

quota_desc="quota $((quota_cpus * period_us / 1000))ms per period $((period_us / 1000))ms ($quota_cpus CPU$([ "$quota_cpus" = 1 ] || echo s), half of the host's $host_cpus)"
cfsprobe_v=none
[ $needs_view = 0 ] || cfsprobe_v=$("$CFSPROBE" version 2>/dev/null | awk '{ print $NF }')

cat <<EOF
Measured $(date -u '+%Y-%m-%d %H:%M UTC') by \`bench/cpuview-nginx.sh\`: $REPS runs of each case, interleaved, $elapsed s in all.

| host | |
|---|---|
| CPU | $model, $host_cpus online CPUs |
| kernel | $kernel |
| cgroups | v1: cpu at $(realpath $CG/cpu), cpuacct at $(realpath $CG/cpuacct), cpuset at $(realpath $CG/cpuset), memory at $(realpath $CG/memory) |
| software | cfsprobe $cfsprobe_v, nginx $nginx_v, wrk $wrk_v, lxcfs $lxcfs_v, glibc $glibc_v |
| load before | $load_before |

nginx (\`worker_processes auto\`, the default 615-byte index.html, no access log) runs in a group with $quota_desc.
wrk (\`-t$WRK_THREADS -c$CONNECTIONS --latency\`, outside the group) loads it over loopback for $DURATION.
EOF
case " $CASES " in *" 6 "* | *" 7 "*) echo "Cases 6 and 7 raise the quota to all $host_cpus CPUs: nothing is throttled there." ;; esac
cat <<EOF
Each cell is the median of the runs, with the lowest and highest in brackets.
Memory: the group's memory less its page cache (\`usage_in_bytes\` − \`total_cache\`, what docker stats showed in the seed), idle and at its highest under load (sampled twice a second).
Throttled: the share of the periods under load in which the group was throttled, and the throttled time (cpu.stat; summed over CPUs).
CPUs used (medians): nginx's group, wrk, and the rest of the host (its busy time in /proc/stat less the two).

| case | CPU view | worker processes | memory idle | memory peak | throttled periods | throttled time | CPUs used: nginx / wrk / rest | requests/s | latency p50 | latency p99 |
|---|---|---|---|---|---|---|---|---|---|---|
EOF
for c in $CASES; do
	printf '| %s | %s | %s | %s MiB | %s MiB | %s %% | %s s | %s / %s / %s | %s | %s ms | %s ms |\n' \
		"$(case_name "$c")" "$(view_name "$c")" "$(stat "$c" 5 %d)" "$(stat "$c" 6 %.1f)" "$(stat "$c" 7 %.1f)" \
		"$(stat "$c" 10 %.0f)" "$(stat "$c" 16 %.2f)" "$(med "$c" 11)" "$(med "$c" 17)" "$(med "$c" 18)" \
		"$(stat "$c" 12 %.0f)" "$(stat "$c" 13 %.2f)" "$(stat "$c" 14 %.1f)"
done
echo
if [[ " $CASES " == *" 3 "* ]] && [ $((2 * quota_cpus)) -ge "$host_cpus" ]; then
	echo "Case 3: twice the quota is all of this host's $host_cpus CPUs, the count nginx sees without a view (case 1)."
fi
if [[ " $CASES " == *" 4 "* ]] && [ $((quota_cpus % 2)) = 1 ]; then
	echo "Case 4: half of the quota is $(awk -v q="$quota_cpus" 'BEGIN { print q / 2 }') CPUs; \`cfsprobe exec --cpus\` takes whole CPUs, at least 1, so the view is $(first 4 3)."
fi
errors=$(awk -F'\t' '{ s += $15 } END { print s + 0 }' "$tmp/runs.tsv")
echo
[ "$errors" = 0 ] || echo "wrk counted $errors socket errors or non-2xx responses over all runs (per run: $(awk -F'\t' '$15 > 0 { printf "case %s run %s: %s; ", $1, $2, $15 }' "$tmp/runs.tsv"))."
echo "Load after: $load_after"
