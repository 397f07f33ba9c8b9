package proxy

import (
	"crypto/rand"
	"time"

	"github.com/edge-voice/edge/proxy/internal/relay"
	"github.com/edge-voice/edge/proxy/internal/wsproto"
)

// Close codes edge sends itself, and why.
const (
	closeGoingAway = wsproto.CloseGoingAway // drain deadline passed on shutdown
	closePolicy    = wsproto.ClosePolicy    // the call lost its lease (released, swept)
	// closeProtocolError: a client's frame that breaks RFC 6455.
	closeProtocolError = wsproto.CloseProtocolError
	closeTooBig        = wsproto.CloseTooBig // a message over proxy.max_message_bytes
	closeIdleTimeout   = 4000                // the client sent nothing for proxy.idle_timeout
	// closeBadGateway (RFC 6455's registry: "Bad Gateway") tells the
	// client its pod's side died mid-call: a reset, a FIN without a close
	// frame, or a write to the pod stalled past proxy.pod_write_timeout.
	closeBadGateway = wsproto.CloseBadGateway
)

// closeGrace and lingerTime bound a close's stages on every relay: the
// close frames' writes, then the lingering close (relay.CloseGrace,
// relay.LingerTime).
const (
	closeGrace = relay.CloseGrace
	lingerTime = relay.LingerTime
)

// policy is what edge decides about one relayed socket, whichever relay
// moves its bytes: the frame accounting of each direction, the message
// size limit (close 1009), the client's framing (close 1002), the
// client's idle deadline (close 4000), the
// close frame injected when edge ends the socket (its stop code: 1008 on a
// lost lease, 1001 on drain, or one of the above) and the counters. The
// relays differ only in how bytes move (goroutines on Go's netpoller in
// pump.go, event loops in eloop_linux.go), so every rule lives here once.
//
// A policy is not locked: each part has one owner. dirs[i] belongs to
// whoever reads direction i's source (one pump each in the goroutine
// relay, the loop in the epoll relay), and the idle clock to the reader
// of the client. Verdicts go through the socket's atomic stop state.
type policy struct {
	// dirs[0] is client_to_pod, dirs[1] pod_to_client.
	dirs [2]dirPolicy
	// idle is proxy.idle_timeout at the socket's start (0: none) and
	// lastClient the relay's clock, in nanoseconds, at the client's last
	// bytes. Only the client's silence counts: a voice agent may listen
	// quietly, a provider streams without pause.
	idle, lastClient int64
}

// dirPolicy is one direction's share of a policy.
type dirPolicy struct {
	sc      wsproto.Scanner
	limit   uint64     // proxy.max_message_bytes (0: none)
	src     relay.Side // side whose bytes this direction reads
	counter *dirCounters
	// bytes relayed, and the messages already added to the counter.
	bytes, counted int64
	// closeSeen: the first close frame of this direction is recorded.
	closeSeen bool
	// over: a refused frame came (over the limit, or broken), and nothing
	// from it on is forwarded; cleanCut: its header was not forwarded
	// either, so the destination is between frames.
	over, cleanCut bool
}

// verdict is a policy's decision to end the socket, given to the socket's
// stop; a zero verdict carries on.
type verdict struct {
	code   int
	reason string
}

// init sets p up for a socket starting at now, on the relay's clock; ext
// says the handshake negotiated an extension (the client's frames may use
// the reserved bits). Limits are read once: a configuration change applies
// to new sockets.
func (p *policy) init(cfg *Config, m *metrics, now int64, ext bool) {
	limit := uint64(max(cfg.MaxMessageBytes, 0))
	p.dirs[0] = dirPolicy{limit: limit, src: relay.Client, counter: m.dir["client_to_pod"]}
	p.dirs[0].sc.Client, p.dirs[0].sc.Ext = true, ext
	p.dirs[1] = dirPolicy{limit: limit, src: relay.Pod, counter: m.dir["pod_to_client"]}
	p.idle = int64(max(cfg.IdleTimeout, 0))
	p.lastClient = now
}

// relayed accounts b, the next bytes of d's source, and returns how many of
// them go to its destination: all of them, except from a refused frame on
// (one that takes its message over the limit, or a client's that breaks
// the protocol). That frame is not forwarded at all when its header is in
// b (the destination stays between frames, so it gets edge's close frame,
// 1009 or 1002, not a torn frame and a reset); nothing more of the source
// is forwarded after it (the socket is ending).
func (d *dirPolicy) relayed(s *socket, b []byte) (int, verdict) {
	if d.over {
		return 0, verdict{}
	}
	d.sc.Scan(b, d.limit)
	if d.sc.CloseCode != 0 && !d.closeSeen {
		d.closeSeen = true
		s.closeFrame(d.src, d.sc.CloseCode)
	}
	n := len(b)
	var v verdict
	if d.sc.Refused != 0 {
		d.over, d.cleanCut = true, d.sc.RefusedAt >= 0
		n = max(d.sc.RefusedAt, 0)
		v = verdict{closeTooBig, "message too big"}
		if d.sc.Refused == closeProtocolError {
			v = verdict{closeProtocolError, "protocol error"}
		}
	}
	d.bytes += int64(n)
	d.counter.bytes.Add(float64(n))
	if d.sc.Messages != d.counted {
		d.counter.messages.Add(float64(d.sc.Messages - d.counted))
		d.counted = d.sc.Messages
	}
	return n, v
}

// untilBoundary is how many of b, the source's next bytes, end the frame in
// flight: 0 when d is between frames, len(b) when all of b is inside it.
// A closing socket forwards them, so that its close frame can follow
// instead of a torn frame. Nothing is accounted here.
func (d *dirPolicy) untilBoundary(b []byte) int { return d.sc.UntilBoundary(b) }

// finishing reports whether d is inside a frame that it may still
// complete before edge's close frame (not the oversized one, which is never
// forwarded).
func (d *dirPolicy) finishing() bool { return !d.over && !d.sc.AtBoundary() }

// atBoundary reports whether d's destination is between frames: every
// byte forwarded so far ends a whole frame.
func (d *dirPolicy) atBoundary() bool {
	if d.over {
		return d.cleanCut
	}
	return d.sc.AtBoundary()
}

// closeFrame is what edge writes into d's destination to end the socket
// with its stop code, or nil where nothing may go: edge owes the
// destination no close (no stop code, its stream ended, or a close frame
// went to it already, see relay.Closing.Owes), or the direction is inside
// a frame, where a close frame would corrupt the
// frame in flight (the relays first forward the rest of it, see
// untilBoundary; a peer that never finishes it gets the TCP close). Toward the pod
// edge is the client, and a client masks its frames (RFC 6455 5.3); the
// mask only defeats cache poisoning by script-chosen payloads, and this
// payload is edge's own, so any random mask does.
func (d *dirPolicy) closeFrame(s *socket) []byte {
	if !d.atBoundary() {
		return nil
	}
	code, reason := s.owes(d.src.Other())
	if code == 0 {
		return nil
	}
	var mask *[4]byte
	if d.src == relay.Client {
		mask = new([4]byte)
		rand.Read(mask[:])
	}
	return wsproto.CloseFrame(code, reason, mask)
}

// clientSent notes bytes from the client at now, on the relay's clock.
func (p *policy) clientSent(now int64) { p.lastClient = now }

// idleLeft reports how long, from now, the client may stay silent before
// the socket ends, and the verdict once that time is up (neither without
// an idle timeout). A relay checks it when it likes (a deadline that
// fired, a tick): moving a deadline on every read would cost a timer
// operation per message.
func (p *policy) idleLeft(now int64) (time.Duration, verdict) {
	if p.idle <= 0 {
		return 0, verdict{}
	}
	if left := p.lastClient + p.idle - now; left > 0 {
		return time.Duration(left), verdict{}
	}
	return 0, verdict{closeIdleTimeout, "idle timeout"}
}
