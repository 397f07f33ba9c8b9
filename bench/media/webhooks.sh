#!/usr/bin/env bash
# The webhook path while edge relays media: one edge (bench/media/edge.yaml,
# static pods, the three built-in plugins) with N Twilio-like streams open
# (bench/cmd/wsload) answers Twilio webhooks at 200/s (bench/cmd/hookload),
# once per relay given, alternated, all on 127.0.0.1 (the bench/media
# ports: do not run both at once).
#
#   bench/media/webhooks.sh [relay...]      default: epoll uring
#   STREAMS=200 RUNS=2 URING_BATCH=1ms bench/media/webhooks.sh epoll uring
#
# Prints per run the webhooks' answer times and the media streams' line
# (round trips, edge's CPU per message: webhook work included).
set -euo pipefail
cd "$(dirname "$0")/../.."
RELAYS=${*:-epoll uring}
STREAMS=${STREAMS:-200}
RUNS=${RUNS:-2}
work=$(mktemp -d /tmp/edge-bench-webhooks.XXXXXX)
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT
go build -o "$work/edge" ./cmd/edge
go build -o "$work/wsload" ./bench/cmd/wsload
go build -o "$work/hookload" ./bench/cmd/hookload
PODS=pod-0=127.0.0.1:17001,pod-1=127.0.0.1:17002,pod-2=127.0.0.1:17003,pod-3=127.0.0.1:17004
"$work/wsload" pods -addrs 127.0.0.1:17001,127.0.0.1:17002,127.0.0.1:17003,127.0.0.1:17004 >"$work/pods.log" 2>&1 &
pids+=($!)
echo "# $(date -u +%FT%TZ) $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(go version | cut -d' ' -f3), $STREAMS streams, 200 webhooks/s"
run=0
for r in $(seq "$RUNS"); do
	for relay in $RELAYS; do
		run=$((run + 1))
		redis-server --port 16380 --bind 127.0.0.1 --save '' --appendonly no --dir "$work" >"$work/redis.log" 2>&1 &
		redis=$!
		EDGE_PROXY__RELAY=$relay EDGE_PROXY__URING_BATCH=${URING_BATCH:-1ms} \
			"$work/edge" --config bench/media/edge.yaml 2>"$work/edge.log" &
		edge=$!
		for i in $(seq 50); do curl -sf http://127.0.0.1:19080/readyz >/dev/null && break; sleep 0.2; done
		kill -0 $edge 2>/dev/null || { echo "edge exited at start:" >&2; cat "$work/edge.log" >&2; exit 1; }
		"$work/hookload" -rate 200 -d 5s -run $((run + 128)) >/dev/null # warm-up
		"$work/wsload" run -mode edge -label "edge-$relay" -streams "$STREAMS" -pods $PODS -target http://127.0.0.1:18080 \
			-pids $edge -warmup 3s -measure 25s >"$work/ws.json" &
		ws=$!
		sleep 6 # the streams open and warm up
		printf '{"relay":"%s","webhooks":%s' "$relay" "$("$work/hookload" -rate 200 -d 15s -run $run)"
		wait $ws
		printf ',"media":%s}\n' "$(cat "$work/ws.json")"
		kill $edge $redis
		wait $edge $redis 2>/dev/null || true
	done
done
