#!/usr/bin/env bash
# Runs each fuzz target for FUZZTIME: test/fuzz/run.sh <go> <fuzztime> pkg:Name...
#
# Go 1.26's fuzzing coordinator can fail a target at the end of a
# wall-clock -fuzztime with a bare "context deadline exceeded" and no
# failing input (golang/go#75804, fixed in Go 1.27): a race between the
# deadline and its workers' shutdown, seen here on a loaded machine. Such a
# run is run once more; anything else that fails, and above all a run that
# wrote a failing input, fails at once.
set -uo pipefail
go=$1 fuzztime=$2
shift 2
out=$(mktemp)
trap 'rm -f "$out"' EXIT
for t in "$@"; do
	pkg=${t%%:*} name=${t#*:}
	for attempt in 1 2; do
		echo "fuzz $pkg $name ($fuzztime)"
		if "$go" test -run '^$' -fuzz "^$name\$" -fuzztime "$fuzztime" "$pkg" 2>&1 | tee "$out"; then
			break
		fi
		if [ "$attempt" = 1 ] && grep -q '^    context deadline exceeded$' "$out" && ! grep -q 'Failing input written' "$out"; then
			echo "fuzz $name: the coordinator's deadline race (golang/go#75804), no failing input; once more"
			continue
		fi
		exit 1
	done
done
