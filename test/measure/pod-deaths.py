# Pod deaths mid-call, as the provider and the agents see them: an edge
# binary with proxy.resume on every tier, python3-websockets agents
# (proxy/testdata/wspod.py --agent, separate processes) in pods.static of a
# config file edge polls, and Twilio-like streams (connected, start, media
# every 20 ms, each echo timed; marks the agent sends echoed back as its
# audio plays, a call's lead of 0.1-4 s later, and at once on a clear, as
# Twilio does). On each call, after --before echoes and a random phase of the
# cadence, the agent serving it dies one of these ways:
#   kill        SIGKILL of the agent's process (the kernel closes its sockets)
#   reset       the agent resets the call's socket (SO_LINGER 0)
#   fin         the agent shuts the socket for writing: FIN, no close frame
#   unregister  the agent leaves pods.static (edited in the file) and serves on
#   sigstop     SIGSTOP of the agent's process
#   block       the agent's event loop blocks for good (process and sockets stay)
# Then the call streams --after more echoes and hangs up. Dead agents are
# killed, dropped from the file and replaced by fresh ones once their call
# is over. Per relay and kind it prints: calls kept (the provider's socket
# stayed open and echoes came back from another agent); the gap, the
# silence the caller heard (last echo of the dead agent to the first of the
# new one); from the death to the first echo of the new agent; frames lost
# (media sent whose echo never came back) per death; echoes out of order and
# twice; marks the new agent received that another agent had sent (stale);
# how each call that was not kept ended. Also what edge counted: the relay
# that carried the sockets (edge_proxy_relayed_sockets_total) and the
# moves' outcomes (edge_proxy_resumptions_total).
# Usage: go build -o /tmp/edge-meas ./cmd/edge &&
#   /usr/bin/python3 test/measure/pod-deaths.py /tmp/edge-meas [--deaths 100]
#   [--kinds kill,reset,...] [--relays goroutines,epoll,uring] [--concurrency 4]
# (Debian python3-websockets; ports --port .. --port+2 on 127.0.0.1 free.)
# "pump" is accepted for the goroutine relay (proxy.relay: goroutines).
import argparse, asyncio, collections, ctypes, json, os, random, re, signal, sys, tempfile, time, urllib.parse, urllib.request

import websockets

KINDS = ["kill", "reset", "fin", "unregister", "sigstop", "block"]
ap = argparse.ArgumentParser()
ap.add_argument("edge")
ap.add_argument("--deaths", type=int, default=100, help="deaths of each kind on each relay")
ap.add_argument("--kinds", default=",".join(KINDS))
ap.add_argument("--relays", default="goroutines,epoll,uring")
ap.add_argument("--concurrency", type=int, default=4, help="calls at once (each needs its agent and one to move to)")
ap.add_argument("--before", type=int, default=50, help="echoes before the death")
ap.add_argument("--after", type=int, default=50, help="echoes of the new agent before the caller hangs up")
ap.add_argument("--renew-interval", default="2s", help="allocator.renew_interval: a call whose pod left the registry moves at its next renewal")
ap.add_argument("--give-up", type=float, default=20.0, help="seconds without an echo of another agent before a call counts as lost")
ap.add_argument("--port", type=int, default=28080, help="public port; admin and internal are the next two")
ap.add_argument("-v", "--verbose", action="store_true", help="a line per death")
args = ap.parse_args()
kinds = [k for k in args.kinds.split(",") if k]
relays = [{"pump": "goroutines"}.get(r, r) for r in args.relays.split(",") if r]
for k in kinds:
    if k not in KINDS:
        sys.exit(f"unknown kind {k!r}: one of {', '.join(KINDS)}")
repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
WSPOD = os.path.join(repo, "proxy", "testdata", "wspod.py")
PUBLIC, ADMIN, INTERNAL = args.port, args.port + 1, args.port + 2
# Each call holds an agent and may need one to move to; the dead wait ejected
# until the file drops them (after their call, then edge's next poll), and a
# tier keeps at most proxy.max_ejection_percent (50) of its pods out: past
# it a dead pod is not ejected and another call may move to it.
POOL = 4 * args.concurrency + 2
tmp = tempfile.mkdtemp(prefix="pod-deaths-")
CONFIG = os.path.join(tmp, "edge.yaml")


def die_with_parent():
    ctypes.CDLL(None).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG: no agent outlives a killed run


TRACE = open(os.path.join(tmp, "trace"), "w")


def trace(*what):
    print("%.3f" % time.time(), *what, file=TRACE, flush=True)


class Agent:
    def __init__(self, name):
        self.name, self.starts, self.marks, self.closed = name, collections.defaultdict(list), collections.defaultdict(list), {}

    async def start(self):
        self.proc = await asyncio.create_subprocess_exec("/usr/bin/python3", WSPOD, "--agent", self.name, stdin=asyncio.subprocess.PIPE,
                                                         stdout=asyncio.subprocess.PIPE, stderr=open(os.path.join(tmp, self.name + ".err"), "w"),
                                                         preexec_fn=die_with_parent)
        self.port = int((await self.proc.stdout.readline()).split()[1])
        trace("spawn", self.name, self.proc.pid, self.port)
        self.reader = asyncio.create_task(self.read())

    async def read(self):
        async for line in self.proc.stdout:
            f = line.decode().split()
            if len(f) < 3 or not line.endswith(b"\n"):
                continue  # LISTEN, REQ, or a line cut short by the agent's death
            if f[0] == "START":
                self.starts[f[1]].append(int(f[2]))
            elif f[0] == "MARK":
                self.marks[f[1]].append(f[2])
            elif f[0] == "CLOSED":
                self.closed[f[1]] = f[2]

    def die(self, kind):
        trace("die", self.name, kind)
        if kind == "kill":
            self.proc.send_signal(signal.SIGKILL)
        elif kind == "sigstop":
            self.proc.send_signal(signal.SIGSTOP)
        else:
            self.proc.stdin.write(kind.encode() + b"\n")

    async def end(self):
        trace("end", self.name)
        if self.proc.returncode is None:
            self.proc.send_signal(signal.SIGCONT)
            self.proc.kill()
        await self.proc.wait()
        await self.reader


class Pool:
    """The agents in pods.static (the file edge polls), and every agent by name."""

    def __init__(self):
        self.listed, self.all, self.n = {}, {}, 0

    async def add(self):
        self.n += 1
        a = Agent(f"agent-{self.n}")
        await a.start()
        self.all[a.name] = self.listed[a.name] = a
        return a

    def write(self):
        static = [{"name": a.name, "address": f"127.0.0.1:{a.port}", "tier": "gold"} for a in self.listed.values()]
        with open(CONFIG + ".new", "w") as f:
            json.dump({"pods": {"static": static}}, f)  # YAML's JSON subset
        os.chmod(CONFIG + ".new", 0o600)
        os.replace(CONFIG + ".new", CONFIG)

    def unlist(self, a):
        self.listed.pop(a.name, None)
        self.write()

    async def retire(self, a):
        """a died: it leaves the file and its process ends; a fresh agent takes its place."""
        self.listed.pop(a.name, None)
        await self.add()
        self.write()
        await a.end()


def http_json(url, data=None):
    with urllib.request.urlopen(urllib.request.Request(url, data=data), timeout=5) as r:
        return r.read().decode()


def metrics():
    out = collections.Counter()
    for line in http_json(f"http://127.0.0.1:{ADMIN}/metrics").splitlines():
        m = re.match(r'(edge_proxy_relayed_sockets_total|edge_proxy_resumptions_total|edge_proxy_relay_info)\{([^}]*)\} (\S+)', line)
        if m:
            out[(m[1], m[2])] = float(m[3])
    return out


def label(key, name):
    return re.search(name + r'="(\w+)"', key[1])[1]


class Death:
    """One call and the death of the agent serving it, as the provider saw it."""

    def __init__(self, kind, i):
        self.kind, self.sid = kind, "CA%032x" % random.getrandbits(128)
        self.sent, self.echoes, self.clears, self.mark_echoes = {}, [], [], []
        self.ended, self.old, self.t_death = None, None, None
        self.moved = asyncio.Event()
        self.merchant = f"m-{i % 97}"  # spread over merchants: proxy.resume.max_per_merchant_per_minute

    async def run(self, pool):
        body = urllib.parse.urlencode({"CallSid": self.sid, "merchant_id": self.merchant}).encode()
        for _ in range(50):
            try:
                twiml = await asyncio.to_thread(http_json, f"http://127.0.0.1:{PUBLIC}/api/v1/twilio/allocate", body)
                url = re.search(r'<Stream url="([^"]+)"', twiml).group(1).replace("&amp;", "&")
                break
            except Exception:
                await asyncio.sleep(0.2)  # no pod free yet: replacements come with the next poll of the file
        else:
            raise RuntimeError("no allocation in 10 s")
        stream = "MZ" + self.sid[2:]
        self.seq = 0
        loop = asyncio.get_running_loop()
        pending = {}  # mark name -> its echo's timer
        self.lead = random.uniform(0.1, 4)

        async def send(msg):
            self.seq += 1
            msg["sequenceNumber"] = str(self.seq)
            await ws.send(json.dumps(msg))
            return self.seq

        def echo_mark(name):
            pending.pop(name, None)
            self.mark_echoes.append((time.monotonic(), name))
            asyncio.ensure_future(send({"event": "mark", "streamSid": stream, "mark": {"name": name}}))

        async def feed():
            t0 = loop.time()
            for k in range(1 << 30):
                seq = await send({"event": "media", "streamSid": stream, "media": {"payload": "AAAA"}})
                self.sent[seq] = time.monotonic()
                await asyncio.sleep(max(0, t0 + (k + 1) * 0.02 - loop.time()))

        async def receive():
            try:
                async for msg in ws:
                    now, m = time.monotonic(), json.loads(msg)
                    if m["event"] == "media":
                        self.echoes.append((now, m["agent"], m["echo"]))
                        if self.old is not None and m["agent"] != self.old:
                            self.moved.set()
                    elif m["event"] == "mark":
                        # played when the audio before it has: the call's agent
                        # runs ahead of the caller's ear by its lead
                        pending[m["mark"]["name"]] = loop.call_later(self.lead, echo_mark, m["mark"]["name"])
                    elif m["event"] == "clear":
                        self.clears.append(now)
                        for name, timer in list(pending.items()):
                            timer.cancel()
                            echo_mark(name)
            except websockets.ConnectionClosed as e:
                self.ended = f"{e.code} {e.reason}"
            finally:
                self.moved.set()

        async with websockets.connect(url, max_size=1 << 20) as ws:
            await send({"event": "connected", "protocol": "Call", "version": "1.0.0"})
            await send({"event": "start", "streamSid": stream, "start": {"callSid": self.sid, "streamSid": stream}})
            feeder, receiver = asyncio.create_task(feed()), asyncio.create_task(receive())
            try:
                while len(self.echoes) < args.before and self.ended is None:
                    await asyncio.sleep(0.02)
                if self.ended is None:
                    await asyncio.sleep(random.uniform(0, 0.02))  # any phase of the cadence
                    self.old = self.echoes[-1][1]
                    old = pool.all[self.old]
                    self.t_death = time.monotonic()
                    if self.kind == "unregister":
                        pool.unlist(old)
                    else:
                        old.die(self.kind)
                    try:
                        await asyncio.wait_for(self.moved.wait(), args.give_up)
                    except asyncio.TimeoutError:
                        self.ended = f"no echo of another agent in {args.give_up:.0f} s"
                    deadline = time.monotonic() + args.after * 0.02 + 2
                    while self.ended is None and time.monotonic() < deadline and \
                            sum(1 for e in self.echoes if e[1] != self.old) < args.after:
                        await asyncio.sleep(0.02)
                feeder.cancel()
                if self.ended is None:
                    await asyncio.sleep(0.5)  # the echoes and mark echoes in flight
                    await send({"event": "stop", "streamSid": stream, "stop": {"callSid": self.sid}})
            finally:
                feeder.cancel()
                for t in pending.values():
                    t.cancel()
        await receiver
        if self.old is not None:
            await pool.retire(pool.all[self.old])
        return self

    def judge(self, pool):
        """What this death cost, or None for a call that ended before its death."""
        if self.old is None:
            return None
        new = [e for e in self.echoes if e[1] != self.old]
        kept = bool(new) and self.ended in (None, "1000 ")
        seqs = [e[2] for e in self.echoes]
        echoed = set(seqs)
        r = {"kept": kept, "ended": self.ended or "", "lost": sum(1 for s in self.sent if s not in echoed),
             "reordered": sum(1 for a, b in zip(seqs, seqs[1:]) if b < a),
             "duplicated": len(seqs) - len(set(seqs)), "clears": len(self.clears), "stale": 0, "replayed": True,
             # echoes of the dead agent's marks the provider sent after the
             # death: what edge must keep from the new agent
             "old_marks": sum(1 for t, m in self.mark_echoes if t >= self.t_death and m.startswith(self.old + "/")),
             "old_marks_cleared": sum(1 for t, m in self.mark_echoes if self.clears and t >= self.clears[0] and m.startswith(self.old + "/")),
             "old_closed": pool.all[self.old].closed.get(self.sid, "-"),
             "own_marks": sum(1 for m in pool.all[self.old].marks.get(self.sid, []) if m.startswith(self.old + "/"))}
        if new:
            last_old = max(t for t, a, _ in self.echoes if a == self.old)
            r["gap"] = (new[0][0] - last_old) * 1000
            r["detect"] = (new[0][0] - self.t_death) * 1000
            for name in {a for _, a, _ in new}:
                agent = pool.all[name]
                r["stale"] += sum(1 for m in agent.marks.get(self.sid, []) if not m.startswith(name + "/"))
                r["own_marks"] += sum(1 for m in agent.marks.get(self.sid, []) if m.startswith(name + "/"))
                r["replayed"] &= bool(agent.starts.get(self.sid)) and min(agent.starts[self.sid]) >= 1
        r["agents"] = len({a for _, a, _ in self.echoes})
        return r


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, max(0, int(round(p / 100 * len(xs) + 0.5)) - 1))] if xs else float("nan")


async def run_relay(relay, rows):
    pool = Pool()
    for _ in range(POOL):
        await pool.add()
    pool.write()
    cmd = [args.edge, "--config", CONFIG, "--set", f"listen.public=127.0.0.1:{PUBLIC}", "--set", f"listen.admin=127.0.0.1:{ADMIN}",
           "--set", f"listen.internal=127.0.0.1:{INTERNAL}", "--set", 'tiers={"gold":{"type":"exclusive","target":%d}}' % POOL,
           "--set", 'default_chain=["gold"]', "--set", "log.level=warn", "--set", "http.readiness_redis_grace=30s",
           "--set", 'proxy.resume.tiers=["*"]', "--set", f"proxy.relay={relay}", "--set", f"allocator.renew_interval={args.renew_interval}"]
    log = open(os.path.join(os.environ.get("TMPDIR", "/tmp"), f"edge-pod-deaths-{relay}.log"), "w")
    edge = await asyncio.create_subprocess_exec(*cmd, stdout=asyncio.subprocess.DEVNULL, stderr=log, preexec_fn=die_with_parent)
    try:
        for _ in range(150):
            try:
                if len(json.loads(await asyncio.to_thread(http_json, f"http://127.0.0.1:{ADMIN}/api/v1/pods"))["pods"]) >= POOL:
                    break
            except Exception:
                pass
            await asyncio.sleep(0.2)
        else:
            raise RuntimeError("edge did not come up with its pods: see " + log.name)
        for kind in kinds:
            before, todo, results = await asyncio.to_thread(metrics), iter(range(args.deaths)), []

            async def worker(w):
                await asyncio.sleep(w * 0.3)  # deaths spread, not all in one instant
                for i in todo:
                    d = Death(kind, i)
                    try:
                        await d.run(pool)
                    except websockets.InvalidStatusCode as e:
                        unplaced.append(e.status_code)
                        continue
                    r = d.judge(pool)
                    if r is None:
                        print(f"  {relay} {kind}: call {d.sid} ended before its death: {d.ended}", flush=True)
                        continue
                    results.append(r)
                    if args.verbose:
                        print(f"  {relay} {kind} {len(results)}: {d.old} kept={r['kept']} gap={r.get('gap', 0):.1f}ms "
                              f"detect={r.get('detect', 0):.1f}ms lost={r['lost']} agents={r['agents']} ended={r['ended']!r}", flush=True)

            t0 = time.monotonic()
            unplaced = []
            workers = [asyncio.create_task(worker(w)) for w in range(args.concurrency)]
            try:
                await asyncio.gather(*workers)
            finally:
                for w in workers:
                    w.cancel()
            if unplaced:
                print(f"  {relay} {kind}: {len(unplaced)} calls refused at connect: {collections.Counter(unplaced)}", flush=True)
            after = await asyncio.to_thread(metrics)
            delta = {k: after[k] - before.get(k, 0) for k in after if after[k] != before.get(k, 0)}
            carried = ", ".join(f"{label(k, 'relay')} {v:.0f}" for k, v in delta.items() if k[0] == "edge_proxy_relayed_sockets_total")
            outcomes = ", ".join(f"{label(k, 'outcome')} {v:.0f}" for k, v in delta.items() if k[0] == "edge_proxy_resumptions_total")
            running = [label(k, "running") for k, v in after.items() if k[0] == "edge_proxy_relay_info" and v == 1]
            rows.append((relay, kind, results, carried, outcomes, running, time.monotonic() - t0))
            print_row(rows[-1])
    finally:
        edge.send_signal(signal.SIGTERM)
        await edge.wait()
        for a in list(pool.all.values()):
            await a.end()


def print_row(row):
    relay, kind, rs, carried, outcomes, running, took = row
    kept = [r for r in rs if r["kept"]]
    gaps, det = [r["gap"] for r in kept], [r["detect"] for r in kept]
    lost = [r["lost"] for r in kept]
    endings = collections.Counter(r["ended"] for r in rs if not r["kept"])
    print(f"| {relay} ({'/'.join(running)}) | {kind} | {len(rs)} | {len(kept)} | {pct(gaps, 50):.1f} / {pct(gaps, 99):.1f} | "
          f"{pct(det, 50):.1f} / {pct(det, 99):.1f} | {pct(lost, 50):.0f} / {max(lost, default=0)} | "
          f"{sum(r['reordered'] for r in rs)} / {sum(r['duplicated'] for r in rs)} | "
          f"{sum(r['stale'] for r in rs)} | "
          f"{sum(1 for r in kept if not r['replayed'])} | {'; '.join(f'{n}x {e}' for e, n in endings.items()) or '-'} |", flush=True)
    print(f"    carried by: {carried or '-'}; moves: {outcomes or '-'}; clears per kept call: "
          f"{'/'.join(str(n) for n in sorted({r['clears'] for r in kept})) or '-'}; the dead agent's marks echoed by the provider "
          f"after the death {sum(r['old_marks'] for r in rs)}, after the clear {sum(r['old_marks_cleared'] for r in rs)}; "
          f"marks the agents got back of their own {sum(r['own_marks'] for r in rs)}; "
          f"the dead agent's socket closed: {', '.join(f'{c} {n}x' for c, n in collections.Counter(r['old_closed'] for r in rs).items())}; {took:.0f} s", flush=True)


HEADER = ("| relay (running) | death | deaths | kept | gap p50 / p99 ms | death to new echo p50 / p99 ms | frames lost per death p50 / max "
          "| reordered / duplicated echoes | stale marks at the new agent | kept without replay | unkept: close |\n"
          "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")


async def main():
    rows = []
    print(f"{args.deaths} deaths of each kind, {args.concurrency} calls at once, {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.2f}", flush=True)
    print(HEADER, flush=True)
    for relay in relays:
        await run_relay(relay, rows)
    print(f"\nload {os.getloadavg()[0]:.2f}\n{HEADER}")
    for row in rows:
        print_row(row)


asyncio.run(main())
