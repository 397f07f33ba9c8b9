# A voice-agent pod written with python3-websockets (Debian's), not edge's
# code: it echoes every message, prints "REQ <path>" for each upgrade it
# is asked for, and refuses an upgrade for a sample rate it does not take
# with 400, as agents do. Its own handshake checks are the library's
# (it refuses a malformed Sec-WebSocket-Extensions, and negotiates
# permessage-deflate whenever a client offers it).
#
# With --agent NAME it is a Twilio-speaking agent that can be made to die
# (test/measure/pod-deaths.py): each media message is answered with one
# naming NAME and the sequence number it answers, every 5th followed by a
# mark named NAME/<n>; it prints "START <callSid> <Edge-Resumed>" for each
# stream start, "MARK <callSid> <name>" for each mark echo it receives and
# "CLOSED <callSid> <code>" when a call's socket ends. Lines on stdin kill
# its calls: "reset" (SO_LINGER 0, the peer gets RST), "fin" (shutdown for
# writing: a FIN and no close frame), "block" (the event loop stops for
# good, the process and its sockets stay); it exits when stdin ends. Other
# deaths (SIGKILL, SIGSTOP) are the caller's own.
import argparse
import asyncio
import http
import json
import os
import socket
import struct
import sys
import time

import websockets

ap = argparse.ArgumentParser()
ap.add_argument("--agent", help="answer as a Twilio agent of this name, dying on command")
args = ap.parse_args()
calls = set()  # the agent's call sockets
finned = set()  # those it sent its FIN on: it writes nothing more there


async def echo(ws, *_):
    try:
        async for msg in ws:
            await ws.send(msg)
    except websockets.ConnectionClosed:
        pass  # a client gone without a close frame is the client's business


async def agent(ws, *_):
    calls.add(ws)
    sid, stream, n = "-", "", 0
    try:
        async for msg in ws:
            try:
                m = json.loads(msg)
            except ValueError:
                await ws.send(msg)  # edge's probe
                continue
            ev = m.get("event")
            if ev == "start":
                sid, stream = m["start"]["callSid"], m["start"]["streamSid"]
                print("START", sid, ws.request_headers.get("Edge-Resumed", "0"), flush=True)
            elif ev == "mark":
                print("MARK", sid, m["mark"]["name"], flush=True)
            elif ev == "media" and ws not in finned:
                n += 1
                await ws.send(json.dumps({"event": "media", "streamSid": stream, "agent": args.agent,
                                          "echo": int(m["sequenceNumber"]), "media": m["media"]}))
                if n % 5 == 0:
                    await ws.send(json.dumps({"event": "mark", "streamSid": stream,
                                              "mark": {"name": "%s/%d" % (args.agent, n)}}))
    except (websockets.ConnectionClosed, OSError):
        pass
    finally:
        calls.discard(ws)
        finned.discard(ws)
        print("CLOSED", sid, ws.close_code, flush=True)


def command():
    line = sys.stdin.readline()
    if not line:
        os._exit(0)  # whoever drove it is gone
    line = line.strip()
    for ws in list(calls):
        sock = ws.transport.get_extra_info("socket")
        if line == "reset":
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            ws.transport.abort()
        elif line == "fin":
            finned.add(ws)
            sock.shutdown(socket.SHUT_WR)
    if line == "block":
        time.sleep(1 << 30)


async def process_request(path, headers):
    print("REQ", path, flush=True)
    if "sample-rate=44100" in path:
        return http.HTTPStatus.BAD_REQUEST, [], b"unsupported sample rate\n"
    return None


async def main():
    async with websockets.serve(agent if args.agent else echo, "127.0.0.1", 0, process_request=process_request,
                                max_size=1 << 20) as server:
        if args.agent:
            asyncio.get_running_loop().add_reader(sys.stdin, command)
        print("LISTEN", server.sockets[0].getsockname()[1], flush=True)
        await asyncio.Future()


if __name__ == "__main__":
    try:
        asyncio.run(main())
    except KeyboardInterrupt:
        sys.exit(0)
