#!/bin/bash
# redis-instructions.sh counts the instructions redis-server runs per
# allocate+release cycle (bench/cmd/rediscycles) under valgrind's
# callgrind: the cycles' count for 1,010 cycles less that for 10 (start-up,
# the pools' registration and the beats), divided by 1,000. The machine's
# other work does not move the count.
#
#   bench/redis-instructions.sh            # this tree
#   BASE=040e418 bench/redis-instructions.sh   # also a commit, side by side
#
# Needs valgrind and redis-server (apt-get install valgrind redis-server).
# A commit is built from a git worktree with this tree's driver
# (bench/cmd/rediscycles, bench/cycle.go), so its
# allocator must have the API the driver calls.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v valgrind >/dev/null || { echo "needs valgrind (apt-get install valgrind)" >&2; exit 2; }
command -v redis-server >/dev/null || { echo "needs redis-server (apt-get install redis-server)" >&2; exit 2; }
work=$(mktemp -d)
trap 'rm -rf "$work"; git worktree remove --force "$work/base" >/dev/null 2>&1 || true' EXIT
port=${PORT:-7391}

# count <driver> <cycles>: Redis' instructions for a run of the driver.
count() {
	local out="$work/cg.out"
	valgrind --tool=callgrind --callgrind-out-file="$out" redis-server --port "$port" --save '' --appendonly no >"$work/valgrind.log" 2>&1 &
	local vg=$!
	for _ in $(seq 150); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.2; done
	"$1" -addr "127.0.0.1:$port" -n "$2"
	redis-cli -p "$port" shutdown nosave >/dev/null 2>&1 || true
	wait "$vg" || true
	awk '/^(summary|totals):/ {print $2; exit}' "$out"
}

# per_cycle <driver>: instructions per cycle.
per_cycle() {
	local small big
	small=$(count "$1" 10)
	big=$(count "$1" 1010)
	echo $(((big - small) / 1000))
}

go build -o "$work/rediscycles" ./bench/cmd/rediscycles
echo "this tree ($(git rev-parse --short HEAD)$(git diff --quiet || echo ', changed')): $(per_cycle "$work/rediscycles") instructions per cycle"
if [ -n "${BASE:-}" ]; then
	git worktree add -q --detach "$work/base" "$BASE"
	mkdir -p "$work/base/bench/cmd/rediscycles"
	cp bench/cmd/rediscycles/main.go "$work/base/bench/cmd/rediscycles/"
	cp bench/cycle.go "$work/base/bench/"
	(cd "$work/base" && go build -o "$work/rediscycles-base" ./bench/cmd/rediscycles)
	echo "$BASE: $(per_cycle "$work/rediscycles-base") instructions per cycle"
fi
