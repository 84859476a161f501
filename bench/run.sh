#!/usr/bin/env bash
# bench/run.sh [SECTION...]: cfsprobe's benchmarks on this machine, each
# section recording its numbers, with the host's facts, in
# bench/RESULTS.md between its markers (<!-- SECTION:begin --> and
# <!-- SECTION:end -->); the text around them is written by hand.
#
# Sections:
#   exporter   cfsprobe exporter on real cgroups (root): one scrape of
#              1,000 groups against the floor, CPU between scrapes, the
#              per-period sampler, memory under churn, Kubernetes-shaped
#              trees (bench/exporter). EXPORTER_ARGS passes flags, e.g.
#              EXPORTER_ARGS=-quick for a smoke test.
#   cpuview-nginx
#              seed 004's Exp2 (root, about 5 minutes): nginx with
#              worker_processes auto under a quota of half the host's
#              CPUs, loaded by wrk, with no CPU view, cfsprobe exec views
#              of the quota, twice and half of it, and LXCFS; then under
#              all the host's CPUs with and without a view of half
#              (bench/cpuview-nginx.sh; REPS, DURATION, CASES pass through).
#   sim        the simulator's speed (internal/sim BenchmarkSim16x64): 64
#              threads of a bursty program on 16 CPUs under a quota of 8
#              CPUs for 60 simulated seconds, 3 rounds of 20 runs; times
#              real time by the wall clock and by the process's CPU time;
#              and replay's (BenchmarkReplay20Limits): a 1,011-period lab
#              trace replayed under 20 quotas, 3 rounds.
#   fleet      cfsprobe recommend --prometheus at fleet scale (about three
#              minutes, needs Debian's prometheus: make deps): a week of
#              the exporter's series for 1,000 groups on 50 nodes
#              backfilled with promtool into a fresh TSDB, served by
#              prometheus on loopback, every group read, synthesized and
#              advised by the recommender (bench/fleet). FLEET_ARGS passes flags.
#   sim-validate
#              the simulator against this host's kernel (root, about four
#              minutes): every scenario of the four built-in suites
#              (--quick), measured and simulated on the model of this
#              host's kernel era and CPUs, side by side
#              (cfsprobe suite NAME --quick --compare).
#
# `make bench` builds bin/cfsprobe and runs every section.
set -euo pipefail
cd "$(dirname "$0")/.."

GO=${GO:-go}
RESULTS=bench/RESULTS.md
all=(exporter cpuview-nginx sim sim-validate fleet)
sections=("$@")
[ ${#sections[@]} -gt 0 ] || sections=("${all[@]}")

# record SECTION FILE: put FILE between SECTION's markers in RESULTS.md
# (appending a section with the markers when there is none).
record() {
	local section=$1 file=$2 begin="<!-- $1:begin -->" end="<!-- $1:end -->"
	[ -f "$RESULTS" ] || printf '# Benchmark results\n' >"$RESULTS"
	if ! grep -qF "$begin" "$RESULTS"; then
		printf '\n## %s\n\n%s\n%s\n' "$section" "$begin" "$end" >>"$RESULTS"
	fi
	awk -v begin="$begin" -v end="$end" -v file="$file" '
		$0 == begin { print; while ((getline line < file) > 0) print line; skip = 1; next }
		$0 == end { skip = 0 }
		!skip { print }
	' "$RESULTS" >"$RESULTS.tmp"
	mv "$RESULTS.tmp" "$RESULTS"
	echo "bench: $section recorded in $RESULTS"
}

bench_exporter() {
	if [ "$(id -u)" != 0 ]; then
		echo "bench: the exporter section makes cgroups: run it as root" >&2
		return 1
	fi
	make build # (up to date: nothing to do)
	local out
	out=$(mktemp)
	# shellcheck disable=SC2086 # EXPORTER_ARGS holds several flags
	if ! $GO run ./bench/exporter -bin bin/cfsprobe ${EXPORTER_ARGS:-} >"$out"; then
		rm -f "$out"
		return 1
	fi
	record exporter "$out"
	rm -f "$out"
}

bench_fleet() {
	local out
	out=$(mktemp)
	# shellcheck disable=SC2086 # FLEET_ARGS holds several flags
	if ! $GO run ./bench/fleet ${FLEET_ARGS:-} >"$out"; then
		rm -f "$out"
		return 1
	fi
	record fleet "$out"
	rm -f "$out"
}

bench_cpuview_nginx() {
	local out
	out=$(mktemp)
	if ! ./bench/cpuview-nginx.sh >"$out"; then
		rm -f "$out"
		return 1
	fi
	record cpuview-nginx "$out"
	rm -f "$out"
}

# hostfacts: what a benchmark's numbers depend on, as a table.
hostfacts() {
	printf '| host | |\n|---|---|\n'
	printf '| CPU | %s, %s online CPUs |\n' "$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)" "$(nproc)"
	printf '| kernel | %s |\n' "$(uname -r)"
	printf '| Go | %s |\n' "$($GO env GOVERSION)"
	printf '| load before | %s |\n' "$(cut -d' ' -f1-3 /proc/loadavg)"
}

bench_sim() {
	local out raw
	out=$(mktemp)
	raw=$(mktemp)
	if ! $GO test -run '^$' -bench '^BenchmarkSim16x64$' -benchtime 20x -count 3 ./internal/sim/ >"$raw" ||
		! $GO test -run '^$' -bench '^BenchmarkReplay20Limits$' -benchtime 1x -count 3 ./internal/sim/ >>"$raw"; then
		cat "$raw" >&2
		rm -f "$out" "$raw"
		return 1
	fi
	{
		printf 'Measured %s by `bench/run.sh sim` (internal/sim BenchmarkSim16x64).\n\n' "$(date -u '+%Y-%m-%d %H:%M UTC')"
		hostfacts
		printf '\n| round | ms per run | × real time (wall clock) | × real time (CPU time) | operations |\n|---|---|---|---|---|\n'
		awk '/^BenchmarkSim16x64/ {
			for (i = 1; i <= NF; i++) {
				if ($i == "ns/op") ns = $(i-1)
				if ($i == "x_realtime") w = $(i-1)
				if ($i == "x_realtime_cpu") c = $(i-1)
				if ($i == "ops") o = $(i-1)
			}
			printf "| %d | %.1f | %d | %d | %d |\n", ++n, ns / 1e6, w, c, o
		}' "$raw"
		printf '\nReplay (internal/sim BenchmarkReplay20Limits): a lab trace of 1,011 periods replayed under 20 quotas, 0.1 to 2 CPUs, as `cfsprobe simulate replay` does (read, reconstruct, simulate, write the trace); the target is 5 s for the 20.\n\n'
		printf '| round | s for 20 limits (wall clock) | s for 20 limits (CPU time) | periods |\n|---|---|---|---|\n'
		awk '/^BenchmarkReplay20Limits/ {
			for (i = 1; i <= NF; i++) {
				if ($i == "s_per_20") w = $(i-1)
				if ($i == "s_per_20_cpu") c = $(i-1)
				if ($i == "periods") p = $(i-1)
			}
			printf "| %d | %.2f | %.2f | %d |\n", ++n, w, c, p
		}' "$raw"
		printf '\nLoad after: %s\n' "$(cut -d' ' -f1-3 /proc/loadavg)"
	} >"$out"
	record sim "$out"
	rm -f "$out" "$raw"
}

bench_sim_validate() {
	if [ "$(id -u)" != 0 ]; then
		echo "bench: the sim-validate section measures on real cgroups: run it as root" >&2
		return 1
	fi
	make build
	local out run st suite
	out=$(mktemp)
	run=$(mktemp)
	{
		printf 'Measured %s by `bench/run.sh sim-validate` with %s (cfsprobe suite NAME --quick --compare: measured on this host, simulated on the model of its kernel era and CPUs).\n\n' "$(date -u '+%Y-%m-%d %H:%M UTC')" "$(bin/cfsprobe version)"
		hostfacts
		printf '| cgroup mounts | %s |\n' "$(awk '$3 == "cgroup2" || ($3 == "cgroup" && $4 ~ /(^|,)cpu(,|$)/) {printf "%s%s at %s", sep, ($3 == "cgroup2" ? "v2" : "v1 cpu"), $2; sep = ", "}' /proc/mounts)"
		for suite in aggressive-cfs burst bursty-limits threads-vs-quota; do
			st=0
			bin/cfsprobe suite "$suite" --quick --compare --parent cfsprobe-bench-sim >"$run" 2>/dev/null || st=$?
			if [ "$st" -gt 1 ]; then # 1: an expectation of the suite was not met
				echo "bench: cfsprobe suite $suite --quick --compare failed (exit $st)" >&2
				rm -f "$out" "$run"
				return 1
			fi
			printf '\n### %s\n\n```\n' "$suite"
			sed -n '/^measured on this host/,/scenarios agree/p' "$run"
			printf '```\n'
		done
		printf '\nLoad after: %s\n' "$(cut -d' ' -f1-3 /proc/loadavg)"
	} >"$out"
	record sim-validate "$out"
	rm -f "$out" "$run"
}

for s in "${sections[@]}"; do
	case $s in
	exporter) bench_exporter ;;
	cpuview-nginx) bench_cpuview_nginx ;;
	sim) bench_sim ;;
	sim-validate) bench_sim_validate ;;
	fleet) bench_fleet ;;
	*)
		echo "bench: no section $s (sections: ${all[*]})" >&2
		exit 2
		;;
	esac
done
