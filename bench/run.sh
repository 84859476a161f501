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
#              real time by the wall clock and by the process's CPU time.
#
# `make bench` builds bin/cfsprobe and runs every section.
set -euo pipefail
cd "$(dirname "$0")/.."

GO=${GO:-go}
RESULTS=bench/RESULTS.md
all=(exporter cpuview-nginx sim)
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
	[ -x bin/cfsprobe ] || make build
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
	if ! $GO test -run '^$' -bench '^BenchmarkSim16x64$' -benchtime 20x -count 3 ./internal/sim/ >"$raw"; then
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
		printf '\nLoad after: %s\n' "$(cut -d' ' -f1-3 /proc/loadavg)"
	} >"$out"
	record sim "$out"
	rm -f "$out" "$raw"
}

for s in "${sections[@]}"; do
	case $s in
	exporter) bench_exporter ;;
	cpuview-nginx) bench_cpuview_nginx ;;
	sim) bench_sim ;;
	*)
		echo "bench: no section $s (sections: ${all[*]})" >&2
		exit 2
		;;
	esac
done
