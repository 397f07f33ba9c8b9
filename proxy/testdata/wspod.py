# A voice-agent pod written with python3-websockets (Debian's), not edge's
# code: it echoes every message, prints "REQ <path>" for each upgrade it
# is asked for, and refuses an upgrade for a sample rate it does not take
# with 400, as agents do. Its own handshake checks are the library's
# (it refuses a malformed Sec-WebSocket-Extensions, and negotiates
# permessage-deflate whenever a client offers it).
import asyncio
import http
import sys

import websockets


async def echo(ws, *_):
    try:
        async for msg in ws:
            await ws.send(msg)
    except websockets.ConnectionClosed:
        pass  # a client gone without a close frame is the client's business


async def process_request(path, headers):
    print("REQ", path, flush=True)
    if "sample-rate=44100" in path:
        return http.HTTPStatus.BAD_REQUEST, [], b"unsupported sample rate\n"
    return None


async def main():
    async with websockets.serve(echo, "127.0.0.1", 0, process_request=process_request,
                                max_size=1 << 20) as server:
        print("LISTEN", server.sockets[0].getsockname()[1], flush=True)
        await asyncio.Future()


if __name__ == "__main__":
    try:
        asyncio.run(main())
    except KeyboardInterrupt:
        sys.exit(0)
