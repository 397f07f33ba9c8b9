#!/usr/bin/env bash
# Footprint of one edge replica: static pods (bench/media/edge.yaml), the
# three built-in plugins, real redis-server and echoing fake pods, all on
# 127.0.0.1 (ports 16380, 17001-17004, 18080, 19080: bench/media's, so do
# not run both at once). Memory is read after a forced GC (the admin
# pprof's heap?gc=1), idle and with N open media streams (Twilio-like
# frames, 50/s each way, from bench/cmd/wsload):
#
#   bench/footprint/run.sh [streams...]    default: 200 1000
#   REFS=20 bench/footprint/run.sh 200     also what the idle replica touches:
#                                          its referenced bits cleared, then
#                                          read back 20 s later (root: it
#                                          writes /proc/PID/clear_refs)
#
# Per process: VmRSS, its anonymous part (the process's own memory: heap,
# stacks, runtime) and file part (pages of the edge binary mapped in, shared
# with the plugin processes, which are the same binary, and reclaimable),
# PSS (file pages split between the processes that map them), and Go's
# heap in use and stacks from /metrics. Per stream = (with N - idle) / N.
set -euo pipefail
cd "$(dirname "$0")/../.."
STREAMS=${*:-200 1000}
work=$(mktemp -d /tmp/edge-bench-footprint.XXXXXX)
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT

go build -o "$work/edge" ./cmd/edge
go build -o "$work/wsload" ./bench/cmd/wsload
PODS=pod-0=127.0.0.1:17001,pod-1=127.0.0.1:17002,pod-2=127.0.0.1:17003,pod-3=127.0.0.1:17004
redis-server --port 16380 --bind 127.0.0.1 --save '' --appendonly no --dir "$work" >"$work/redis.log" 2>&1 &
pids+=($!)
"$work/wsload" pods -addrs 127.0.0.1:17001,127.0.0.1:17002,127.0.0.1:17003,127.0.0.1:17004 >"$work/pods.log" 2>&1 &
pids+=($!)
sleep 0.5
"$work/edge" --config bench/media/edge.yaml 2>"$work/edge.log" &
edge_pid=$!
pids+=($edge_pid)
for i in $(seq 50); do curl -sf http://127.0.0.1:19080/readyz >/dev/null && break; sleep 0.2; done
kill -0 $edge_pid 2>/dev/null || { echo "edge exited at start:" >&2; cat "$work/edge.log" >&2; exit 1; }

# kib PID FIELD: a field of /proc/PID/status or smaps_rollup, in KiB.
kib() { awk -v f="$2:" '$1 == f {print $2; exit}' /proc/$1/status /proc/$1/smaps_rollup; }
gometric() { curl -s http://127.0.0.1:19080/metrics | awk -v m="$1" '$1 == m {printf "%d", $2 / 1024}'; }
sample() { # label streams
	curl -s -o /dev/null "http://127.0.0.1:19080/debug/pprof/heap?gc=1"
	sleep 1
	printf '{"label":"%s","streams":%d,"edge":{"rss_kib":%d,"anon_kib":%d,"file_kib":%d,"pss_kib":%d,"go_heap_inuse_kib":%d,"go_stack_inuse_kib":%d,"goroutines":%d}' \
		"$1" "$2" "$(kib $edge_pid VmRSS)" "$(kib $edge_pid RssAnon)" "$(kib $edge_pid RssFile)" "$(kib $edge_pid Pss)" \
		"$(gometric go_memstats_heap_inuse_bytes)" "$(gometric go_memstats_stack_inuse_bytes)" \
		"$(curl -s http://127.0.0.1:19080/metrics | awk '$1 == "go_goroutines" {print $2}')"
	for c in $(pgrep -P $edge_pid); do
		printf ',"%s":{"rss_kib":%d,"anon_kib":%d,"pss_kib":%d}' "$(tr '\0' ' ' </proc/$c/cmdline | awk '{print $2 "-" $3}')" \
			"$(kib $c VmRSS)" "$(kib $c RssAnon)" "$(kib $c Pss)"
	done
	echo "}"
}

echo "# $(date -u +%FT%TZ) $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(go version | cut -d' ' -f3), load $(cut -d' ' -f1-3 /proc/loadavg)"
sleep 2
sample idle 0
if [ -n "${REFS:-}" ]; then
	# The pages an idle replica references in REFS seconds, against those
	# mapped: the binary's (file) and its own (anonymous).
	refs() { # KiB of smaps field $1 in the binary's mappings, then in the rest
		awk -v bin="$work/edge" -v f="$1:" '/^[0-9a-f]+-[0-9a-f]+ / {inbin = ($6 == bin)}
			$1 == f {if (inbin) b += $2; else o += $2} END {printf "%d %d\n", b, o}' /proc/$edge_pid/smaps
	}
	echo 1 >/proc/$edge_pid/clear_refs
	sleep "$REFS"
	read -r rss_bin rss_other < <(refs Rss)
	read -r ref_bin ref_other < <(refs Referenced)
	printf '{"label":"referenced in %ss","binary_rss_kib":%d,"binary_referenced_kib":%d,"other_rss_kib":%d,"other_referenced_kib":%d}\n' \
		"$REFS" "$rss_bin" "$ref_bin" "$rss_other" "$ref_other"
fi
for n in $STREAMS; do
	# Streams held open for 30 s; sampled once all are open and warm.
	"$work/wsload" run -mode edge -streams "$n" -pods $PODS -target http://127.0.0.1:18080 -pids $edge_pid -warmup 5s -measure 25s >"$work/wsload-$n.json" &
	load=$!
	for i in $(seq 600); do
		open=$(curl -s http://127.0.0.1:19080/metrics | awk '$1 ~ /^edge_proxy_active_sockets/ {s += $2} END {print s + 0}')
		[ "$open" -ge "$n" ] && break
		sleep 0.2
	done
	sleep 5
	sample streams "$n"
	wait $load
	sleep 3
	sample "after-$n" 0
done
