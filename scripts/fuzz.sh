#!/usr/bin/env bash
# fuzz.sh runs every fuzz target of the module (func FuzzX in a _test.go
# file) for FUZZTIME each, JOBS targets at a time, each with one fuzz
# worker, and fails when one finds a failing input (saved under the
# package's testdata/fuzz, where it fails again in go test).
#   scripts/fuzz.sh [FUZZTIME [JOBS]]   (defaults: 5s, 2)
#
# The targets are found in the test files' source, not by `go test
# -list`, which would compile every package's tests once more without the
# race detector (a minute of both CPUs on a fresh machine) for the few
# that have one. A target runs for FUZZTIME whatever its workers, so two
# targets of one worker each keep two CPUs busy for half the time of one
# after the other.
#
# Go 1.26's fuzz coordinator can report "context deadline exceeded" as a
# failure when -fuzztime runs out while a worker is mid-call
# (golang/go#75804, fixed in Go 1.27): such a run wrote no failing input
# and is not a failure. Any other failure runs once more (a failing input
# saved under testdata/fuzz fails again).
set -euo pipefail
GO=${GO:-go}
fuzztime=${1:-5s}
jobs=${2:-2}
cd "$(dirname "$0")/.."

# fuzz_one PKG TARGET: runs one target; its output is printed when it
# ends, so that two side by side do not interleave.
fuzz_one() {
	local pkg=$1 f=$2 log rc=0
	log=$(mktemp)
	trap 'rm -f "$log"' RETURN
	run() { "$GO" test -run '^$' -fuzz "^$f\$" -fuzztime "$fuzztime" -parallel 1 "$pkg" >"$log" 2>&1; }
	if run; then
		echo "fuzz $pkg $f: ok"
		return 0
	fi
	if grep -q 'context deadline exceeded' "$log" && ! grep -qE 'Failing input written|panic:|_test.go:[0-9]+:' "$log"; then
		echo "fuzz $pkg $f: the fuzzer stopped at -fuzztime with \"context deadline exceeded\" and no failing input (golang/go#75804): not a failure"
		return 0
	fi
	tail -30 "$log"
	echo "fuzz $pkg $f failed; running it once more (a crash found is saved under testdata/fuzz and fails again)"
	run || rc=$?
	if [ "$rc" -ne 0 ]; then
		tail -50 "$log"
		echo "fuzz $pkg $f: FAILED"
		return 1
	fi
	echo "fuzz $pkg $f: ok the second time"
}
export -f fuzz_one
export GO fuzztime

targets=$("$GO" list -f '{{.ImportPath}} {{.Dir}}' ./... | while read -r pkg dir; do
	for f in $(sed -n 's/^func \(Fuzz[A-Za-z0-9_]*\)(.*/\1/p' "$dir"/*_test.go 2>/dev/null); do
		echo "$pkg $f"
	done
done)
[ -n "$targets" ] || { echo "fuzz.sh: no fuzz targets found" >&2; exit 1; }

# The first target is built alone first, for one input: its build
# compiles what every target's shares, the standard library and the
# modules instrumented for coverage, which two go commands side by side
# would each compile (the build cache does not share work in progress).
# From an empty build cache: 104 s in all against 144, 155 s of CPU
# against 229 (2026-11-28, 2 CPUs).
read -r pkg f <<<"$targets"
if ! out=$("$GO" test -run '^$' -fuzz "^$f\$" -fuzztime 1x -parallel 1 "$pkg" 2>&1); then
	echo "$out" | tail -30
	echo "fuzz $pkg $f: FAILED on its first input"
	exit 1
fi

echo "$targets" | xargs -P "$jobs" -L 1 bash -c 'fuzz_one "$0" "$1"'
