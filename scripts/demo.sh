#!/usr/bin/env bash
# make demo: an unlimited and a limited run of the same workload side by
# side, and what the difference means; the kernel check and the seeds'
# experiments; the simulator's prediction of the limited run and of two
# kernel eras; and a recommendation, verified by rerunning it. Needs root
# (it creates cgroups).
set -euo pipefail
cd "$(dirname "$0")/.."
bin=./bin/cfsprobe
out=${DEMO_OUT:-out/demo}
mkdir -p "$out"

if [ "$(id -u)" -ne 0 ]; then
	echo "make demo creates cgroups and needs root: run it with sudo" >&2
	exit 2
fi

cpus=$(nproc)
half=$(awk -v n="$cpus" 'BEGIN { printf "%g", n / 2 }')
say() { printf '\n\033[1m%s\033[0m\n' "$*"; }

say "1. $cpus threads of CPU work, without a limit and with --cpus $half (half this host)"
echo "   Each thread repeats a fixed ~0.25 ms CPU event (like sysbench cpu) for 3 s."
$bin run --out "$out/unlimited.json" parallel --threads "$cpus" --duration 3s >/dev/null
$bin run --out "$out/limited.json" --cpus "$half" parallel --threads "$cpus" --duration 3s >/dev/null
$bin report "$out/unlimited.json" "$out/limited.json"
cat <<TXT

   With $cpus threads and a quota of $half CPUs per 100 ms period, the group spends
   its quota in the first half of every period; then every thread stops until the
   next period. Almost every period is throttled, and the events caught by a stall
   take ~50 ms instead of ~0.25 ms: that is the p99.9 and max above. Average
   CPU use looks fine (it is the limit); only the tail shows the damage.
TXT

say "2. A light workload far under its quota: 5 ms of CPU every 100 ms under 0.2 CPUs"
$bin run --out "$out/periodic.json" --cpus 0.2 periodic --burn 5ms --sleep 100ms --iterations 20 --quiet >/dev/null
$bin report "$out/periodic.json"
cat <<TXT

   The group uses about a quarter of its quota. Kernels 3.16 to 5.3 still
   throttled such groups (burns of ~100 ms instead of 5 ms: slice-expiry bugs,
   fixed in 5.4); on this kernel ($(uname -r)) burns should take 5 ms and no
   period should be throttled.

TXT

say "3. cfsprobe check: does this kernel throttle groups that stay under their quota?"
$bin check --out "$out/check" --report "$out/check.html" || true

say "4. The published experiments, reproduced here (quick forms, about two minutes)"
$bin suite bursty-limits threads-vs-quota aggressive-cfs burst --quick \
	--out "$out/suites" --report "$out/report.html" || true

say "5. Predict: the same limited run on a model of the kernel's bandwidth controller"
$bin simulate --out "$out/limited-simulated.json" --cpus "$half" parallel --threads "$cpus" --duration 3s >/dev/null
$bin report "$out/limited.json" "$out/limited-simulated.json"
echo
echo "   And on kernels this host does not run: 64 threads that wake, work 200 us and"
echo "   sleep 20 ms, under 0.5 CPUs on a 64-CPU host, on Linux 4.18's rules and 5.4's:"
for era in 4.18 5.4; do
	$bin simulate --out "$out/era-$era.json" --kernel "$era" --host-cpus 64 --quota 50ms \
		bursty --threads 64 --on-cpu 200us --off 20ms --duration 5s >/dev/null
done
$bin report "$out/era-4.18.json" "$out/era-5.4.json"
cat <<TXT

   The model (cfsprobe simulate, docs/simulate.md) predicts the measured run's
   throttling and tail from the limit and the workload alone, in a fraction of a
   second and without root. The 64 threads want more than their quota on
   both kernels, but on 4.18 the runtime left on CPUs that went idle expired
   each period: the group got less than its quota and its slowest operations
   took seconds (seed 000's "overly aggressive CFS"); 5.4 gives it the whole
   quota.
TXT

say "6. Fix: which limit? 4 threads busy 40 ms once a second (0.16 CPUs on average)"
echo "   Recorded for 10 s under 0.2 CPUs, then advised, and every setting rerun (about a minute):"
$bin run --out "$out/api.json" --cpus 0.2 bursty --threads 4 --on-cpu 40ms --every 1s --duration 10s >/dev/null
$bin recommend --verify "$out/api.json" 2>/dev/null || true
cat <<TXT

   The rules in use today (seed 003's p95 x 1.5, krr, VPA) read the average,
   0.16 CPUs, and set limits near it: each burst needs 160 ms of CPU at once, so
   they are throttled in most of the periods the group is active, and its bursts
   take many times as long. cfsprobe recommend reads every period (a throttled
   one as a lower bound of what the group wanted), finds the cheapest setting
   that meets the target in the simulator, and --verify reruns them all
   (docs/recommend.md).
TXT

cat <<TXT

Open the report in a browser: $out/report.html (every run's per-period timeline,
latency histogram, in-period profile and the comparison of each suite), and
$out/check.html for the check's runs. Traces (JSON, schema in docs/trace.md)
are in $out/.
TXT
