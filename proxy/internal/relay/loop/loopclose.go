package loop

import "github.com/edge-voice/edge/proxy/internal/relay"

// What the event loops (epoll and io_uring) decide when a socket closes,
// written once for both, on top of the socket's closing state machine
// (relay.Closing): each loop only does the I/O, from its read or its
// completion, in its own way (a pending write or a send in the kernel).
// None of it runs per message.

// endedOpen records that side's stream ended, how, on a socket whose
// close has not begun (cause says why, for the pod's log line), at now on
// the loop's clock. It reports whether edge's close begins: the end cost
// the pod (1014 to the client), or edge has a stop code
// already; the loop's beginClose then sends what is owed. Otherwise the
// socket's close has begun as that side's end, with no close frame: a
// WebSocket peer that ends its TCP stream is done (RFC 6455 7.1.1: the
// TCP close follows the close handshake, or replaces it on a failure), so
// what was read goes out first, then both connections shut and drain (the
// loop's settle).
func endedOpen(env *relay.Env, s *relay.Socket, side relay.Side, how relay.End, cause error, now int64) (edgeClose bool) {
	if env.SideEnded(s, side, how, cause) {
		return true
	}
	if s.Resuming() {
		// The socket moves (only the epoll loop's do): nothing of it
		// ends, and a stop is delivered once the move is over.
		return false
	}
	if s.Stopped() {
		return true
	}
	s.Begin(now)
	return false
}

// closeStart is what a loop sends when edge's close begins (its
// beginClose), given which sources ended (eof[i]: direction i's): for
// each direction whose destination is still there, either the rest of
// the frame in flight first (owed[i]; then finish adds the close frame)
// or edge's close frame now (frames[i]; nil where the destination is owed
// none).
func closeStart(p *relay.Policy, s *relay.Socket, eof [2]bool) (owed [2]bool, frames [2][]byte) {
	for i := range p.Dirs {
		switch {
		case eof[1-i]:
			// The destination is gone.
		case p.Dirs[i].Finishing() && !eof[i]:
			owed[i] = true
		default:
			frames[i] = p.Dirs[i].CloseFrame(s)
		}
	}
	return owed, frames
}

// finish accounts, on a closing socket whose direction d owes the rest of
// its frame in flight, b (the source's next bytes): n of them end that
// frame and go on, the rest is dropped. Once the frame is whole (done),
// frame is edge's close frame to follow it (nil where none is owed).
func finish(d *relay.DirPolicy, s *relay.Socket, b []byte) (n int, frame []byte, done bool) {
	n = d.UntilBoundary(b)
	d.Relayed(s, b[:n])
	if d.Finishing() {
		return n, nil, false
	}
	return n, d.CloseFrame(s), true
}
