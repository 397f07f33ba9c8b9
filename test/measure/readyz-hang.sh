#!/bin/bash
# Usage: go build -o /tmp/edge ./cmd/edge && test/measure/readyz-hang.sh /tmp/edge
# (ports 26379, 18080, 19090 and 18082 on 127.0.0.1 must be free).
# Probes /readyz with a 250 ms timeout (a balancer's health check) while
# redis-server is SIGSTOPped (hung), for 5 s; prints answered/timed out.
EDGE=$1
redis-server --port 26379 --save '' --appendonly no --daemonize no >/dev/null 2>&1 &
RPID=$!
sleep 0.5
$EDGE --redis-url redis://127.0.0.1:26379/0 --set listen.public=127.0.0.1:18080 --set listen.admin=127.0.0.1:19090 --set listen.internal=127.0.0.1:18082 --set log.level=warn >"${TMPDIR:-/tmp}/edge-readyz-hang.log" 2>&1 &
EPID=$!
for i in $(seq 1 100); do curl -s -o /dev/null -w '%{http_code}' http://127.0.0.1:19090/readyz 2>/dev/null | grep -q 200 && break; sleep 0.2; done
kill -STOP $RPID
ok=0; to=0; max=0
end=$((SECONDS+5))
while [ $SECONDS -lt $end ]; do
  out=$(curl -s -o /dev/null -m 0.25 -w '%{http_code} %{time_total}' http://127.0.0.1:19090/readyz)
  code=${out% *}; t=${out#* }
  if [ "$code" = "200" ]; then ok=$((ok+1)); else to=$((to+1)); fi
  max=$(echo "$t $max" | awk '{print ($1>$2)?$1:$2}')
done
echo "probes answered 200 within 250 ms: $ok; failed or timed out: $to; slowest ${max}s"
kill -CONT $RPID; kill $EPID; wait $EPID 2>/dev/null; kill $RPID; wait $RPID 2>/dev/null
