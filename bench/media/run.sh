#!/usr/bin/env bash
# Media path benchmark: the same streams direct to the pods, through edge
# and through nginx (the predecessor's hop), in one run. Everything listens
# on 127.0.0.1; nginx and redis run as non-daemon children of this script.
#
#   bench/media/run.sh [streams...]        default: 200 500
#   MEASURE=15s WARMUP=5s bench/media/run.sh 200 500 1000
set -euo pipefail
cd "$(dirname "$0")/../.."
STREAMS=${*:-200 500}
MEASURE=${MEASURE:-15s}
WARMUP=${WARMUP:-5s}
work=$(mktemp -d /tmp/edge-bench-media.XXXXXX)
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT
ulimit -n 65536 || true

go build -o "$work/edge" ./cmd/edge
# The same edge with the goroutine relay as its default, for the comparison.
go build -ldflags "-X github.com/edge-voice/edge/proxy.defaultRelay=goroutines" -o "$work/edge-goroutines" ./cmd/edge
go build -o "$work/wsload" ./bench/cmd/wsload
PODS=pod-0=127.0.0.1:17001,pod-1=127.0.0.1:17002,pod-2=127.0.0.1:17003,pod-3=127.0.0.1:17004

redis-server --port 16380 --bind 127.0.0.1 --save '' --appendonly no --dir "$work" >"$work/redis.log" 2>&1 &
pids+=($!)
"$work/wsload" pods -addrs 127.0.0.1:17001,127.0.0.1:17002,127.0.0.1:17003,127.0.0.1:17004 >"$work/pods.log" 2>&1 &
pids+=($!)
mkdir -p "$work/nginx/logs"
/usr/sbin/nginx -p "$work/nginx" -c "$PWD/bench/nginx.conf" -g "daemon off; pid $work/nginx/nginx.pid;" 2>"$work/nginx.log" &
nginx_pid=$!
pids+=($nginx_pid)
sleep 1
# edge twice, same config but the relay: the default (epoll) and the
# goroutine relay, each on its own ports.
GOMAXPROCS=${EDGE_GOMAXPROCS:-} "$work/edge" --config bench/media/edge.yaml 2>"$work/edge.log" &
edge_pid=$!
pids+=($edge_pid)
GOMAXPROCS=${EDGE_GOMAXPROCS:-} EDGE_LISTEN__PUBLIC=127.0.0.1:18081 EDGE_LISTEN__ADMIN=127.0.0.1:19081 \
	"$work/edge-goroutines" --config bench/media/edge.yaml 2>"$work/edge-goroutines.log" &
edgeg_pid=$!
pids+=($edgeg_pid)
# An edge that did not come up (a port held by another process on a shared
# machine) must stop the run: the load would otherwise measure whatever
# answers on that port.
for port in 19080 19081; do
	for i in $(seq 50); do curl -sf http://127.0.0.1:$port/readyz >/dev/null && break; sleep 0.2; done
done
for pid in $edge_pid $edgeg_pid; do
	kill -0 "$pid" 2>/dev/null || { echo "an edge exited at start:" >&2; cat "$work"/edge*.log >&2; exit 1; }
done
nginx_all=$(echo $nginx_pid $(pgrep -P $nginx_pid) | tr ' ' ',')

echo "# $(date -u +%FT%TZ) $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(go version | cut -d' ' -f3), $(/usr/sbin/nginx -v 2>&1 | cut -d/ -f2)"
for n in $STREAMS; do
	"$work/wsload" run -mode direct -streams "$n" -pods $PODS -warmup "$WARMUP" -measure "$MEASURE"
	"$work/wsload" run -mode edge -label edge-epoll -streams "$n" -pods $PODS -target http://127.0.0.1:18080 -pids $edge_pid -warmup "$WARMUP" -measure "$MEASURE"
	"$work/wsload" run -mode edge -label edge-goroutines -streams "$n" -pods $PODS -target http://127.0.0.1:18081 -pids $edgeg_pid -warmup "$WARMUP" -measure "$MEASURE"
	"$work/wsload" run -mode nginx -streams "$n" -pods $PODS -target http://127.0.0.1:18088 -pids "$nginx_all" -warmup "$WARMUP" -measure "$MEASURE"
done
