#!/usr/bin/env bash
# Media path benchmark: the same streams direct to the pods, through edge
# and through nginx (the predecessor's hop), in one run. Everything listens
# on 127.0.0.1; nginx and redis run as non-daemon children of this script.
#
#   bench/media/run.sh [streams...]        default: 200 500
#   MEASURE=15s WARMUP=5s bench/media/run.sh 200 500 1000
#   TLS=1 bench/media/run.sh 200 1000      adds edge and nginx terminating TLS
#                                          (same certificate, same suites), and
#                                          full handshakes per second per core
#                                          and the second edge (goroutine relay,
#                                          or BASE) terminating TLS too: the
#                                          TLS relay's before and after
#   TLS=only ...                           direct and the TLS paths only
#   BASE=main ...                          the second edge is the epoll relay
#                                          built from that commit (label
#                                          edge-base) instead of the goroutine
#                                          relay: a change measured side by side
#   SECOND=uring ...                       the second edge uses the io_uring
#                                          relay (label edge-uring;
#                                          URING_BATCH=300us: its
#                                          proxy.uring_batch)
#   PROFILE=/tmp/prof ...                  also, per stream count, the system
#                                          calls of each proxy counted by perf
#                                          and a CPU profile (pprof) of each edge
#                                          (PERF_RECORD=1: and perf record -g)
set -euo pipefail
cd "$(dirname "$0")/../.."
STREAMS=${*:-200 500}
MEASURE=${MEASURE:-15s}
WARMUP=${WARMUP:-5s}
TLS=${TLS:-0}
PROFILE=${PROFILE:-}
BASE=${BASE:-}
work=$(mktemp -d /tmp/edge-bench-media.XXXXXX)
pids=()
second_env=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT
ulimit -n "$(ulimit -Hn)" || true

go build -o "$work/edge" ./cmd/edge
# The second edge: the same binary with the goroutine relay, for the
# comparison (or BASE, or SECOND=uring).
if [ -n "$BASE" ]; then
	# The second edge is the same epoll relay built from another commit:
	# before and after of a change, side by side in one run.
	mkdir -p "$work/base"
	git archive "$BASE" | tar -x -C "$work/base"
	(cd "$work/base" && go build -o "$work/edge-goroutines" ./cmd/edge)
	second=edge-base
elif [ "${SECOND:-}" = uring ]; then
	# The second edge carries plain TCP sockets on the io_uring relay
	# (proxy.relay: uring; URING_BATCH=300us: its proxy.uring_batch).
	cp "$work/edge" "$work/edge-goroutines"
	second_env=(EDGE_PROXY__RELAY=uring "EDGE_PROXY__URING_BATCH=${URING_BATCH:-0s}")
	second=edge-uring
else
	cp "$work/edge" "$work/edge-goroutines"
	second_env=(EDGE_PROXY__RELAY=goroutines)
	second=edge-goroutines
fi
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
if [ "$TLS" != 0 ]; then
	# One ECDSA P-256 certificate for 127.0.0.1 from a throwaway CA, served
	# by both edge and nginx.
	mkdir -p "$work/tls"
	(
		cd "$work/tls"
		openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 1 -subj /CN=bench-ca \
			-keyout ca.key -out ca.crt 2>/dev/null
		openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj /CN=127.0.0.1 \
			-keyout edge.key -out edge.csr 2>/dev/null
		printf 'subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n' >ext.cnf
		openssl x509 -req -in edge.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 1 -extfile ext.cnf -out edge.crt 2>/dev/null
	)
	sed "s#@CERTDIR@#$work/tls#g" bench/nginx-tls.conf >"$work/nginx-tls.conf"
	mkdir -p "$work/nginx-tls/logs"
	/usr/sbin/nginx -p "$work/nginx-tls" -c "$work/nginx-tls.conf" -g "daemon off; pid $work/nginx-tls/nginx.pid;" 2>"$work/nginx-tls.log" &
	nginxt_pid=$!
	pids+=($nginxt_pid)
	GOMAXPROCS=${EDGE_GOMAXPROCS:-} EDGE_LISTEN__PUBLIC=127.0.0.1:18082 EDGE_LISTEN__ADMIN=127.0.0.1:19082 \
		EDGE_TLS__CERT_FILE="$work/tls/edge.crt" EDGE_TLS__KEY_FILE="$work/tls/edge.key" \
		"$work/edge" --config bench/media/edge.yaml 2>"$work/edge-tls.log" &
	edget_pid=$!
	pids+=($edget_pid)
	# The second edge terminating TLS too: TLS on the goroutine relay (or
	# on BASE), the TLS path before the loops took TLS records over.
	env "${second_env[@]}" GOMAXPROCS=${EDGE_GOMAXPROCS:-} EDGE_LISTEN__PUBLIC=127.0.0.1:18083 EDGE_LISTEN__ADMIN=127.0.0.1:19083 \
		EDGE_TLS__CERT_FILE="$work/tls/edge.crt" EDGE_TLS__KEY_FILE="$work/tls/edge.key" \
		"$work/edge-goroutines" --config bench/media/edge.yaml 2>"$work/edge-tls2.log" &
	edget2_pid=$!
	pids+=($edget2_pid)
fi
sleep 1
# edge twice, same config but the relay: the default (epoll) and the
# goroutine relay, each on its own ports.
GOMAXPROCS=${EDGE_GOMAXPROCS:-} "$work/edge" --config bench/media/edge.yaml 2>"$work/edge.log" &
edge_pid=$!
pids+=($edge_pid)
env "${second_env[@]}" GOMAXPROCS=${EDGE_GOMAXPROCS:-} EDGE_LISTEN__PUBLIC=127.0.0.1:18081 EDGE_LISTEN__ADMIN=127.0.0.1:19081 \
	"$work/edge-goroutines" --config bench/media/edge.yaml 2>"$work/edge-goroutines.log" &
edgeg_pid=$!
pids+=($edgeg_pid)
# An edge that did not come up (a port held by another process on a shared
# machine) must stop the run: the load would otherwise measure whatever
# answers on that port.
ports="19080 19081"
[ "$TLS" != 0 ] && ports="$ports 19082 19083"
for port in $ports; do
	for i in $(seq 50); do curl -sf http://127.0.0.1:$port/readyz >/dev/null && break; sleep 0.2; done
done
for pid in $edge_pid $edgeg_pid ${edget_pid:-} ${edget2_pid:-}; do
	kill -0 "$pid" 2>/dev/null || { echo "an edge exited at start:" >&2; cat "$work"/edge*.log >&2; exit 1; }
done
nginx_all=$(echo $nginx_pid $(pgrep -P $nginx_pid) | tr ' ' ',')
[ "$TLS" != 0 ] && nginxt_all=$(echo $nginxt_pid $(pgrep -P $nginxt_pid) | tr ' ' ',')

# profile NAME PIDS [ADMIN_PORT]: with PROFILE, inside the coming
# measurement window (it starts after the streams open and the warm-up,
# and ends before the window does), count the system calls and context
# switches of PIDS with perf (tracepoints: no ptrace, little overhead),
# into $PROFILE/NAME.syscalls; for an edge (ADMIN_PORT) also a CPU profile
# from its admin pprof, and with PERF_RECORD=1 a perf record -g of it
# (kernel side included; it costs the edge CPU, so that run's figures are
# not for comparison).
profile() {
	[ -n "$PROFILE" ] || return 0
	mkdir -p "$PROFILE"
	local at=$(( ${WARMUP%s} + 3 )) win=$(( ${MEASURE%s} - 2 ))
	if [ -n "${3:-}" ]; then
		(sleep $at; curl -s -o "$PROFILE/$1.pprof" "http://127.0.0.1:$3/debug/pprof/profile?seconds=$win") &
	fi
	command -v perf >/dev/null || return 0
	(sleep $at; perf stat -x, -o "$PROFILE/$1.syscalls" -p "$2" \
		-e raw_syscalls:sys_enter,syscalls:sys_enter_read,syscalls:sys_enter_recvfrom,syscalls:sys_enter_write \
		-e syscalls:sys_enter_sendto,syscalls:sys_enter_writev,syscalls:sys_enter_epoll_pwait,syscalls:sys_enter_epoll_wait \
		-e syscalls:sys_enter_epoll_ctl,syscalls:sys_enter_futex,syscalls:sys_enter_nanosleep,syscalls:sys_enter_io_uring_enter,context-switches \
		-- sleep $win 2>/dev/null) &
	if [ "${PERF_RECORD:-0}" = 1 ] && [ -n "${3:-}" ]; then
		(sleep $at; perf record -q -g -o "$PROFILE/$1.perf" -p "$2" -- sleep $win 2>/dev/null) &
	fi
}

echo "# $(date -u +%FT%TZ) $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(go version | cut -d' ' -f3), $(/usr/sbin/nginx -v 2>&1 | cut -d/ -f2)"
for n in $STREAMS; do
	"$work/wsload" run -mode direct -streams "$n" -pods $PODS -warmup "$WARMUP" -measure "$MEASURE"
	if [ "$TLS" != only ]; then
		profile edge-epoll-$n $edge_pid 19080
		"$work/wsload" run -mode edge -label edge-epoll -streams "$n" -pods $PODS -target http://127.0.0.1:18080 -pids $edge_pid -warmup "$WARMUP" -measure "$MEASURE"
		profile $second-$n $edgeg_pid 19081
		"$work/wsload" run -mode edge -label "$second" -streams "$n" -pods $PODS -target http://127.0.0.1:18081 -pids $edgeg_pid -warmup "$WARMUP" -measure "$MEASURE"
		profile nginx-$n "$nginx_all"
		"$work/wsload" run -mode nginx -streams "$n" -pods $PODS -target http://127.0.0.1:18088 -pids "$nginx_all" -warmup "$WARMUP" -measure "$MEASURE"
	fi
	if [ "$TLS" != 0 ]; then
		if [ -n "$PROFILE" ]; then
			# Starts inside the measurement window (after the streams open
			# and the warm-up) and ends before it does.
			mkdir -p "$PROFILE"
			(sleep "$(( ${WARMUP%s} + 3 ))"; curl -s -o "$PROFILE/edge-tls-$n.pprof" \
				"http://127.0.0.1:19082/debug/pprof/profile?seconds=$(( ${MEASURE%s} - 2 ))") &
		fi
		"$work/wsload" run -mode edge -label edge-tls -streams "$n" -pods $PODS -target https://127.0.0.1:18082 -ca "$work/tls/ca.crt" -pids $edget_pid -warmup "$WARMUP" -measure "$MEASURE"
		"$work/wsload" run -mode edge -label "$second-tls" -streams "$n" -pods $PODS -target https://127.0.0.1:18083 -ca "$work/tls/ca.crt" -pids $edget2_pid -warmup "$WARMUP" -measure "$MEASURE"
		"$work/wsload" run -mode nginx -label nginx-tls -streams "$n" -pods $PODS -target https://127.0.0.1:18443 -ca "$work/tls/ca.crt" -pids "$nginxt_all" -warmup "$WARMUP" -measure "$MEASURE"
	fi
done
if [ "$TLS" != 0 ]; then
	# Full handshakes (no resumption) from 8 dialers; per core = per CPU-second of the server.
	"$work/wsload" handshakes -label edge-tls -addr 127.0.0.1:18082 -ca "$work/tls/ca.crt" -pids $edget_pid -measure "$MEASURE"
	"$work/wsload" handshakes -label "$second-tls" -addr 127.0.0.1:18083 -ca "$work/tls/ca.crt" -pids $edget2_pid -measure "$MEASURE"
	"$work/wsload" handshakes -label nginx-tls -addr 127.0.0.1:18443 -ca "$work/tls/ca.crt" -pids "$nginxt_all" -measure "$MEASURE"
fi
