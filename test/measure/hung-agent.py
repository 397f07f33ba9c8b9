# A hung agent, as the provider hears it: python3-websockets agents
# (proxy/testdata/wspod.py, separate processes) behind an edge binary, a
# Twilio-like stream (connected, start, media every 20 ms, each echo
# timed); the agent serving the call is SIGSTOPped mid-call. Prints, per
# run, the silence the caller heard: until the 1014 (resume off) or until
# echoes came back from another agent (--resume).
# Usage: go build -o /tmp/edge ./cmd/edge && /usr/bin/python3 test/measure/hung-agent.py /tmp/edge [--resume] [--runs N]
# (Debian python3-websockets; ports 18080, 19090 and 18082 on 127.0.0.1 free).
import argparse, asyncio, json, os, re, signal, subprocess, sys, time, urllib.parse, urllib.request

import websockets

ap = argparse.ArgumentParser()
ap.add_argument("edge")
ap.add_argument("--resume", action="store_true")
ap.add_argument("--runs", type=int, default=5)
ap.add_argument("--give-up", type=float, default=30.0)
args = ap.parse_args()
repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def start_pod():
    p = subprocess.Popen(["/usr/bin/python3", os.path.join(repo, "proxy", "testdata", "wspod.py")],
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    return p, int(p.stdout.readline().split()[1])


pods = {f"agent-{i}": start_pod() for i in range(args.runs + 1 if args.resume else args.runs)}
static = [{"name": n, "address": f"127.0.0.1:{port}", "tier": "gold"} for n, (_, port) in pods.items()]
cmd = [args.edge, "--set", "listen.public=127.0.0.1:18080", "--set", "listen.admin=127.0.0.1:19090",
       "--set", "listen.internal=127.0.0.1:18082", "--set", "pods.static=" + json.dumps(static),
       "--set", 'tiers={"gold":{"type":"exclusive","target":%d}}' % len(pods), "--set", 'default_chain=["gold"]',
       "--set", "log.level=warn", "--set", "http.readiness_redis_grace=30s"]
if args.resume:
    cmd += ["--set", 'proxy.resume.tiers=["*"]']
edge = subprocess.Popen(cmd, stdout=subprocess.DEVNULL,
                        stderr=open(os.path.join(os.environ.get("TMPDIR", "/tmp"), "edge-hung-agent.log"), "w"))


def get(url):
    with urllib.request.urlopen(url, timeout=5) as r:
        return json.loads(r.read())


for _ in range(150):
    try:
        if get("http://127.0.0.1:19090/readyz").get("status") == "ready":
            break
    except Exception:
        pass
    time.sleep(0.2)


async def one(i):
    sid = "CA%032x" % (0xfeed0000 + i)
    body = urllib.parse.urlencode({"CallSid": sid, "merchant_id": "m"}).encode()
    twiml = urllib.request.urlopen(urllib.request.Request("http://127.0.0.1:18080/api/v1/twilio/allocate", data=body), timeout=5).read().decode()
    url = re.search(r'<Stream url="([^"]+)"', twiml).group(1).replace("&amp;", "&")
    echoes = []
    async with websockets.connect(url, max_size=1 << 20) as ws:
        await ws.send(json.dumps({"event": "connected", "protocol": "Call", "version": "1.0.0"}))
        await ws.send(json.dumps({"event": "start", "sequenceNumber": "1", "streamSid": "MZ" + sid[2:],
                                  "start": {"callSid": sid, "streamSid": "MZ" + sid[2:]}}))

        async def feed():
            seq = 2
            while True:
                await ws.send(json.dumps({"event": "media", "sequenceNumber": str(seq), "media": {"payload": "AAAA"}}))
                seq += 1
                await asyncio.sleep(0.02)

        feeder = asyncio.create_task(feed())
        stopped_at, ended = None, None
        try:
            while True:
                try:
                    await asyncio.wait_for(ws.recv(), timeout=args.give_up)
                except asyncio.TimeoutError:
                    ended = "still silent after %.0f s" % args.give_up
                    break
                now = time.monotonic()
                echoes.append(now)
                if stopped_at is None and len(echoes) == 50:
                    # The pod the socket reached (a stopped one of an
                    # earlier run may have been failed over at connect).
                    pod = get(f"http://127.0.0.1:19090/api/v1/calls/{sid}")["call"]["pod_name"]
                    os.kill(pods[pod][0].pid, signal.SIGSTOP)
                    stopped_at = now
                elif stopped_at is not None and now - stopped_at > 0.1:
                    break  # echoes again: another agent took the call
        except websockets.ConnectionClosed as e:
            ended = f"close {e.code} {e.reason!r}"
        finally:
            feeder.cancel()
    last = max(t for t in echoes if stopped_at is None or t <= stopped_at)
    if ended is None:
        gap = min(t for t in echoes if t > stopped_at + 0.1) - last
        return pod, f"moved: echoes back after {gap:.2f} s of silence"
    return pod, f"{ended} after {time.monotonic() - last:.2f} s of silence"


async def main():
    for i in range(args.runs):
        pod, what = await one(i)
        print(f"run {i + 1}: {pod} SIGSTOPped: {what}", flush=True)


try:
    asyncio.run(main())
finally:
    edge.terminate()
    edge.wait()
    for p, _ in pods.values():
        p.send_signal(signal.SIGCONT)
        p.kill()
