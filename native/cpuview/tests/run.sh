#!/usr/bin/env bash
# Tests of the cpuview preload library (native/cpuview, see its README).
#
# Builds one small program per interposed call, plus the C++
# hardware_concurrency program, the follow test and the stress test, twice:
# plainly and with -fsanitize=address,undefined. Then runs them
#   - without the library: every door must give what the kernel says (the
#     expected values are read here from /sys, /proc/cpuinfo and the
#     affinity mask, never from the doors under test);
#   - with the library but CFSPROBE_CPUS unset or invalid: the same;
#   - with CFSPROBE_CPUS=N: every door gives N CPUs, the first N of the
#     affinity mask (also under taskset, and clamped to the real count);
#   - following the quota of fake cgroup dirs and of a real cgroup;
#   - the stress test: many threads and a SIGALRM handler calling every door;
#   - the ASan/UBSan build: instrumented programs with the instrumented
#     library, LD_PRELOAD="$(cc -print-file-name=libasan.so) lib-asan.so";
#   - real programs: nproc, getconf, cat, grep, python3, nginx.
# Exits 1 on any mismatch, after printing what differed.
#
#   LIB=...so LIB_ASAN=...so BUILD=dir native/cpuview/tests/run.sh
# (make test-preload sets these; the defaults are make's paths.)
set -uo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
LIB=${LIB:-$root/internal/cpuview/preload/libcfsprobe-cpuview.so}
LIB_ASAN=${LIB_ASAN:-$root/build/cpuview/asan/libcfsprobe-cpuview.so}
BUILD=${BUILD:-$root/build/cpuview/tests}
CC=${CC:-cc}
CXX=${CXX:-c++}
STRESS_SECONDS=${STRESS_SECONDS:-2}

# Whatever the caller runs with must not leak into the runs below.
unset LD_PRELOAD CFSPROBE_CPUS CFSPROBE_CPUS_FOLLOW CFSPROBE_CPUS_ROUND CFSPROBE_CPUS_DEBUG \
	OMP_NUM_THREADS OMP_THREAD_LIMIT PYTHON_CPU_COUNT

for f in "$LIB" "$LIB_ASAN"; do
	[[ -f $f ]] || { echo "run.sh: $f is missing; build it with make preload (or make test-preload)" >&2; exit 2; }
done
LIB=$(cd "$(dirname "$LIB")" && pwd)/$(basename "$LIB")
LIB_ASAN=$(cd "$(dirname "$LIB_ASAN")" && pwd)/$(basename "$LIB_ASAN")
ASAN_RT=$($CC -print-file-name=libasan.so)
[[ -e $ASAN_RT ]] || { echo "run.sh: $CC has no libasan.so (apt-get install gcc)" >&2; exit 2; }

npass=0
nfail=0
pass() { npass=$((npass + 1)); printf 'ok   %s\n' "$*"; }
fail() { nfail=$((nfail + 1)); printf 'FAIL %s\n' "$*"; }
skip() { printf 'SKIP %s\n' "$*"; }

# ---- build ------------------------------------------------------------------

WARN=(-Wall -Wextra -Werror)
SAN=(-fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer)
# The tests pass NULL to nonnull-declared functions on purpose.
SAN_TESTS=("${SAN[@]}" -fno-sanitize=nonnull-attribute)
DOORS=(t_sysconf t_get_nprocs t_get_nprocs_conf t_sched_getaffinity t_pthread_getaffinity_np
	t_open t_open64 t_openat t_openat64 t_open_2 t_fopen t_fopen64 t_hardware_concurrency)

mkdir -p "$BUILD/plain" "$BUILD/asan"
echo "building the tests in $BUILD"
pids=()
for src in "$here"/t_*.c "$here"/t_*.cc; do
	name=$(basename "${src%.*}")
	if [[ $src == *.cc ]]; then c=$CXX; std=-std=gnu++17; else c=$CC; std=-std=gnu11; fi
	$c $std -O1 -g "${WARN[@]}" -pthread -o "$BUILD/plain/$name" "$src" &
	pids+=($!)
	$c $std -O1 -g "${WARN[@]}" "${SAN_TESTS[@]}" -pthread -o "$BUILD/asan/$name" "$src" &
	pids+=($!)
done
for p in "${pids[@]}"; do wait "$p" || { echo "run.sh: building the tests failed" >&2; exit 1; }; done

# ---- what the kernel says ----------------------------------------------------

# expand "0-2,5" -> "0 1 2 5"; compress "0 1 2 5" -> "0-2,5"; count "0-2,5" -> 4
expand() {
	local parts part out=() i
	IFS=, read -ra parts <<<"$1"
	for part in "${parts[@]}"; do
		if [[ $part == *-* ]]; then
			for ((i = ${part%-*}; i <= ${part#*-}; i++)); do out+=("$i"); done
		elif [[ -n $part ]]; then
			out+=("$part")
		fi
	done
	echo "${out[*]}"
}
compress() {
	local out="" start="" prev="" c
	for c in "$@"; do
		if [[ -n $start ]] && ((c == prev + 1)); then prev=$c; continue; fi
		[[ -n $start ]] && out+="${out:+,}$start$( ((prev > start)) && echo "-$prev")"
		start=$c prev=$c
	done
	[[ -n $start ]] && out+="${out:+,}$start$( ((prev > start)) && echo "-$prev")"
	echo "$out"
}
count() { local a; read -ra a <<<"$(expand "$1")"; echo "${#a[@]}"; }

ONLINE=$(</sys/devices/system/cpu/online)
POSSIBLE=$(</sys/devices/system/cpu/possible)
PRESENT=$(</sys/devices/system/cpu/present)
# shellcheck disable=SC2046
CPUINFO=$(compress $(awk -F: '/^processor/ {print $2 + 0}' /proc/cpuinfo))

# affinity PREFIX...: the affinity list of a process started with PREFIX
affinity() { "$@" awk '/^Cpus_allowed_list/ {print $2}' /proc/self/status; }

# expect_real PREFIX...: the EXPECT_* variables for a run that must see the
# real values; expect_view N PREFIX...: for the view of N CPUs.
expect_real() {
	local aff
	aff=$(affinity "$@")
	export EXPECT_ONLN EXPECT_CONF EXPECT_AFFINITY EXPECT_ONLINE EXPECT_POSSIBLE EXPECT_PRESENT \
		EXPECT_CPUINFO EXPECT_REAL EXPECT_VIEW
	EXPECT_ONLN=$(count "$ONLINE") EXPECT_CONF=$(count "$POSSIBLE") EXPECT_AFFINITY=$aff
	EXPECT_ONLINE=$ONLINE EXPECT_POSSIBLE=$POSSIBLE EXPECT_PRESENT=$PRESENT EXPECT_CPUINFO=$CPUINFO
	EXPECT_REAL=$(count "$aff") EXPECT_VIEW=0
}
expect_view() {
	local n=$1 aff real s cpus
	shift
	aff=$(affinity "$@")
	real=$(count "$aff")
	((n > real)) && n=$real
	read -ra cpus <<<"$(expand "$aff")"
	s=$(compress "${cpus[@]:0:n}")
	export EXPECT_ONLN EXPECT_CONF EXPECT_AFFINITY EXPECT_ONLINE EXPECT_POSSIBLE EXPECT_PRESENT \
		EXPECT_CPUINFO EXPECT_REAL EXPECT_VIEW
	EXPECT_ONLN=$n EXPECT_CONF=$n EXPECT_AFFINITY=$s EXPECT_ONLINE=$s EXPECT_POSSIBLE=$s
	EXPECT_PRESENT=$s EXPECT_CPUINFO=$s EXPECT_REAL=$real EXPECT_VIEW=1
}

AFF=$(affinity)
REAL=$(count "$AFF")
LAST=$(expand "$AFF")
LAST=${LAST##* }
echo "kernel: online $ONLINE, possible $POSSIBLE, present $PRESENT, /proc/cpuinfo $CPUINFO, affinity $AFF ($REAL CPUs)"

# ---- running -----------------------------------------------------------------

# run LABEL VARIANT LIBRARY PROGRAM [VAR=value...] [-- PREFIX...]: run one test
# program (VARIANT plain or asan; LIBRARY none, lib) with the EXPECT_*
# variables set, under PREFIX (taskset).
run() {
	local label=$1 variant=$2 lib=$3 prog=$4 preload="" out rc
	shift 4
	local vars=() prefix=()
	while (($#)); do
		if [[ $1 == -- ]]; then shift; prefix=("$@"); break; fi
		vars+=("$1")
		shift
	done
	if [[ $lib == lib ]]; then
		if [[ $variant == asan ]]; then preload="$ASAN_RT $LIB_ASAN"; else preload=$LIB; fi
	fi
	out=$("${prefix[@]}" env "${vars[@]}" LD_PRELOAD="$preload" \
		ASAN_OPTIONS=halt_on_error=1:detect_leaks=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
		timeout 120 "$BUILD/$variant/$prog" 2>&1)
	rc=$?
	if ((rc == 0)) && ! grep -qE '^FAIL|runtime error|Sanitizer' <<<"$out"; then
		pass "$label: $prog ($(grep -c '^ok' <<<"$out") ok)"
		grep -E '^     ' <<<"$out" | sed 's/^/  /' # the tests' notes (stress counts)
	else
		fail "$label: $prog (exit $rc)"
		grep -vE '^ok' <<<"$out" | head -40 | sed 's/^/       /'
	fi
}

# doors LABEL VARIANT LIBRARY [VAR=value...] [-- PREFIX...]: every door test.
doors() {
	local label=$1 variant=$2 lib=$3 t
	shift 3
	for t in "${DOORS[@]}"; do run "$label" "$variant" "$lib" "$t" "$@"; done
}

echo
echo "== the doors, plain build"
expect_real
doors "no library" plain none
doors "library, CFSPROBE_CPUS unset" plain lib
doors "library, CFSPROBE_CPUS=abc" plain lib CFSPROBE_CPUS=abc
doors "library, CFSPROBE_CPUS=0" plain lib CFSPROBE_CPUS=0
expect_view 1
doors "library, CFSPROBE_CPUS=1" plain lib CFSPROBE_CPUS=1 CFSPROBE_CPUS_DEBUG=1
expect_view $((REAL + 5))
doors "library, CFSPROBE_CPUS=$((REAL + 5)) (more than real)" plain lib CFSPROBE_CPUS=$((REAL + 5))
expect_view 1
doors "library, CFSPROBE_CPUS=1, follow dirs that do not exist" plain lib CFSPROBE_CPUS=1 \
	CFSPROBE_CPUS_FOLLOW=v2,/nonexistent/a:v1,/nonexistent/b
if ((REAL >= 2)); then
	expect_real taskset -c "$LAST"
	doors "no library, taskset -c $LAST" plain none -- taskset -c "$LAST"
	expect_view 1 taskset -c "$LAST"
	doors "library, CFSPROBE_CPUS=1, taskset -c $LAST" plain lib CFSPROBE_CPUS=1 -- taskset -c "$LAST"
	expect_view "$REAL" taskset -c "$LAST"
	doors "library, CFSPROBE_CPUS=$REAL, taskset -c $LAST (clamped)" plain lib CFSPROBE_CPUS="$REAL" -- taskset -c "$LAST"
else
	skip "taskset cases: the affinity mask has one CPU"
fi

echo
echo "== the doors, ASan/UBSan build (instrumented tests and library)"
expect_real
doors "asan, no library" asan none
doors "asan, library, CFSPROBE_CPUS unset" asan lib
expect_view 1
doors "asan, library, CFSPROBE_CPUS=1" asan lib CFSPROBE_CPUS=1
expect_view $((REAL + 5))
doors "asan, library, CFSPROBE_CPUS=$((REAL + 5))" asan lib CFSPROBE_CPUS=$((REAL + 5))
if nm -D "$LIB_ASAN" | grep -q __asan_report_load && nm -D "$LIB_ASAN" | grep -q __ubsan_handle; then
	pass "the asan library is instrumented (calls __asan_report_* and __ubsan_handle_*)"
else
	fail "the asan library is not instrumented"
fi

echo
echo "== exported symbols"
exports=$(nm -D --defined-only "$LIB" | awk '{print $3}' | sort | tr '\n' ' ')
want="__open64_2 __open_2 __openat64_2 __openat_2 fopen fopen64 get_nprocs get_nprocs_conf open open64 openat openat64 pthread_getaffinity_np sched_getaffinity sysconf "
if [[ $exports == "$want" ]]; then pass "exports exactly: $exports"; else fail "exports: $exports; want: $want"; fi
needed=$(objdump -p "$LIB" 2>/dev/null | awk '/NEEDED/ {print $2}' | tr '\n' ' ')
if [[ $needed =~ ^(libc\.so\.6 |libdl\.so\.2 |libpthread\.so\.0 )+$ ]]; then pass "depends on glibc only: $needed"; else fail "depends on: $needed"; fi

echo
echo "== following the quota"
tmp=$(mktemp -d)
cleanup() {
	[[ -n ${nginx_pid:-} ]] && kill -KILL "$nginx_pid" 2>/dev/null
	[[ -n ${cg:-} && -d ${cg:-} ]] && rmdir "$cg" 2>/dev/null
	rm -rf "$tmp"
}
trap cleanup EXIT

# fake_groups DIR: a v2 dir g2 and a v1 dir g1, neither with a quota
fake_groups() {
	mkdir -p "$1/g1" "$1/g2"
	echo "max 100000" >"$1/g2/cpu.max"
	echo -1 >"$1/g1/cpu.cfs_quota_us"
	echo 100000 >"$1/g1/cpu.cfs_period_us"
}
if ((REAL >= 2)); then
	# The three roundings, and the floor one under ASan, at once (each
	# takes about 13 s of mostly sleeping).
	expect_real
	declare -A follow_pids=()
	for case in plain:floor plain:ceil plain:nearest asan:floor; do
		d=$tmp/follow-${case/:/-}
		fake_groups "$d"
		(run "follow, rounding ${case#*:}, ${case%:*}" "${case%:*}" lib t_follow FOLLOW_DIR="$d" \
			CFSPROBE_CPUS="$REAL" CFSPROBE_CPUS_ROUND="${case#*:}" \
			CFSPROBE_CPUS_FOLLOW="v2,$d/g2:v1,$d/g1" >"$d.out") &
		follow_pids[$case]=$!
	done
	for case in plain:floor plain:ceil plain:nearest asan:floor; do
		wait "${follow_pids[$case]}"
		cat "$tmp/follow-${case/:/-}.out"
		if grep -q '^FAIL' "$tmp/follow-${case/:/-}.out"; then nfail=$((nfail + 1)); else npass=$((npass + 1)); fi
	done
else
	skip "follow: the affinity mask has one CPU, so every quota gives 1"
fi

# A real cgroup with a quota of 1 CPU: the library reads the kernel's files.
cg=""
if [[ $(id -u) == 0 ]] && ((REAL >= 2)); then
	if [[ -f /sys/fs/cgroup/cpu/cpu.cfs_quota_us ]]; then
		cg=/sys/fs/cgroup/cpu/cfsprobe-cpuview-test.$$
		mkdir "$cg" && echo 100000 >"$cg/cpu.cfs_period_us" && echo 100000 >"$cg/cpu.cfs_quota_us" && follow=v1,$cg
	elif grep -qw cpu /sys/fs/cgroup/cgroup.subtree_control 2>/dev/null; then
		cg=/sys/fs/cgroup/cfsprobe-cpuview-test.$$
		mkdir "$cg" && echo "100000 100000" >"$cg/cpu.max" && follow=v2,$cg
	fi
	if [[ -n $cg && -d $cg ]]; then
		expect_view 1
		for t in t_sysconf t_get_nprocs t_sched_getaffinity t_open t_fopen t_hardware_concurrency; do
			run "real cgroup ${follow%%,*} with 1 CPU of quota, CFSPROBE_CPUS=$REAL" plain lib "$t" \
				CFSPROBE_CPUS="$REAL" CFSPROBE_CPUS_FOLLOW="$follow"
		done
		rmdir "$cg"
	else
		skip "real cgroup: no writable cpu controller"
	fi
	cg=""
else
	skip "real cgroup: needs root and 2 CPUs"
fi

echo
echo "== stress: threads and a SIGALRM handler calling every door ($STRESS_SECONDS s each)"
expect_real
run "stress, no library" plain none t_stress STRESS_SECONDS="$STRESS_SECONDS"
expect_view 1
run "stress, library, CFSPROBE_CPUS=1" plain lib t_stress STRESS_SECONDS="$STRESS_SECONDS" CFSPROBE_CPUS=1
run "stress, asan, library, CFSPROBE_CPUS=1" asan lib t_stress STRESS_SECONDS="$STRESS_SECONDS" CFSPROBE_CPUS=1
if ((REAL >= 2)); then
	d=$tmp/stress
	fake_groups "$d"
	echo "100000 100000" >"$d/g2/cpu.max"
	for v in plain asan; do
		run "stress, $v, library following a quota file rewritten every 5 ms" $v lib t_stress \
			STRESS_SECONDS=$((STRESS_SECONDS + 1)) CFSPROBE_CPUS="$REAL" STRESS_FLIP="$d/g2/cpu.max" \
			CFSPROBE_CPUS_FOLLOW="v2,$d/g2:v1,$d/g1"
	done
fi

echo
echo "== real programs"
# check LABEL WANT COMMAND...: COMMAND's output must be WANT.
check() {
	local label=$1 want=$2 got
	shift 2
	got=$("$@" 2>&1)
	if [[ $got == "$want" ]]; then pass "$label: $got"; else fail "$label: got \"$got\", want \"$want\""; fi
}
# programs MODE: MODE is real, lib or asan
programs() {
	local mode=$1 pre=() n onln conf aff list procs py
	case $mode in
	real) pre=(env) ;;
	lib) pre=(env LD_PRELOAD="$LIB" CFSPROBE_CPUS=1) ;;
	asan) pre=(env LD_PRELOAD="$ASAN_RT $LIB_ASAN" ASAN_OPTIONS=detect_leaks=0:halt_on_error=1
		UBSAN_OPTIONS=halt_on_error=1 CFSPROBE_CPUS=1) ;;
	esac
	if [[ $mode == real ]]; then
		onln=$(count "$ONLINE") conf=$(count "$POSSIBLE") aff=$REAL list=$ONLINE procs=$(count "$CPUINFO")
	else
		onln=1 conf=1 aff=1 list=${AFF%%[,-]*} procs=1
	fi
	check "$mode: nproc" "$aff" "${pre[@]}" nproc
	check "$mode: getconf _NPROCESSORS_ONLN" "$onln" "${pre[@]}" getconf _NPROCESSORS_ONLN
	check "$mode: getconf _NPROCESSORS_CONF" "$conf" "${pre[@]}" getconf _NPROCESSORS_CONF
	check "$mode: cat /sys/devices/system/cpu/online" "$list" "${pre[@]}" cat /sys/devices/system/cpu/online
	check "$mode: grep -c ^processor /proc/cpuinfo" "$procs" "${pre[@]}" grep -c ^processor /proc/cpuinfo
	for py in /usr/bin/python3 "$(command -v python3 || true)"; do
		[[ -x $py ]] || continue
		[[ $py != /usr/bin/python3 && $(readlink -f "$py") == "$(readlink -f /usr/bin/python3)" ]] && continue
		check "$mode: $py os.cpu_count(), len(os.sched_getaffinity(0))" "$onln $aff" \
			"${pre[@]}" "$py" -c 'import os; print(os.cpu_count(), len(os.sched_getaffinity(0)))'
	done
	if [[ $mode == asan ]]; then
		check "$mode: std::thread::hardware_concurrency()" "ok   hardware_concurrency: std::thread::hardware_concurrency() = $onln" \
			env EXPECT_ONLN="$onln" "${pre[@]}" "$BUILD/asan/t_hardware_concurrency"
	else
		check "$mode: std::thread::hardware_concurrency()" "ok   hardware_concurrency: std::thread::hardware_concurrency() = $onln" \
			env EXPECT_ONLN="$onln" "${pre[@]}" "$BUILD/plain/t_hardware_concurrency"
	fi
	if [[ $mode != asan ]]; then
		n=$onln
		[[ $mode == real ]] && ((aff < n)) && n=$aff
		nginx_check "$mode" "$n" "${pre[@]}"
	fi
}

# nginx_check MODE WANT ENV...: nginx with worker_processes auto starts WANT
# workers. It listens on a unix socket in a temp dir; nothing is left running.
nginx_check() {
	local mode=$1 want=$2 d n i
	shift 2
	if ! command -v nginx >/dev/null; then
		skip "$mode: nginx is not installed (make deps installs it)"
		return
	fi
	d=$tmp/nginx-$mode
	mkdir -p "$d/logs" "$d/tmp"
	cat >"$d/nginx.conf" <<EOF
worker_processes auto;
daemon off;
pid $d/nginx.pid;
error_log $d/logs/error.log;
events { worker_connections 16; }
http {
	access_log off;
	client_body_temp_path $d/tmp/body;
	proxy_temp_path $d/tmp/proxy;
	fastcgi_temp_path $d/tmp/fastcgi;
	uwsgi_temp_path $d/tmp/uwsgi;
	scgi_temp_path $d/tmp/scgi;
	server { listen unix:$d/nginx.sock; return 200 "ok\n"; }
}
EOF
	"$@" nginx -p "$d" -c "$d/nginx.conf" -e "$d/logs/error.log" &
	nginx_pid=$!
	n=0
	# the workers start together once the master is up; wait until the
	# count holds still
	for ((i = 0; i < 50; i++)); do
		sleep 0.1
		local m
		m=$(pgrep -c -P "$nginx_pid")
		if ((m > 0 && m == n)); then break; fi
		n=$m
	done
	kill -QUIT "$nginx_pid" 2>/dev/null
	for ((i = 0; i < 50; i++)); do kill -0 "$nginx_pid" 2>/dev/null || break; sleep 0.1; done
	kill -KILL "$nginx_pid" 2>/dev/null
	wait "$nginx_pid" 2>/dev/null
	nginx_pid=""
	if [[ $n == "$want" ]]; then
		pass "$mode: nginx worker_processes auto: $n workers"
	else
		fail "$mode: nginx worker_processes auto: $n workers, want $want"
		sed 's/^/       /' "$d/logs/error.log" | tail -5
	fi
}

programs real
programs lib
programs asan
echo "     (GNU make sizes nothing by the CPU count: make -j\$(nproc) follows nproc above)"

echo
if ((nfail)); then
	echo "FAIL cpuview: $nfail failed, $npass passed"
	exit 1
fi
echo "ok   cpuview: all $npass passed"
