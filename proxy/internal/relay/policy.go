package relay

import (
	"crypto/rand"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/edge-voice/edge/proxy/internal/wsproto"
)

// CloseIdleTimeout is edge's close code for a client that sent nothing
// for proxy.idle_timeout (the application range: RFC 6455 registers none).
const CloseIdleTimeout = 4000

// Limits are the host's per-socket limits, read once at each socket's
// start: a configuration change applies to new sockets.
type Limits struct {
	// MaxMessageBytes bounds a message (close 1009; 0: none).
	MaxMessageBytes int64
	// IdleTimeout bounds the client's silence (close 4000; 0: none).
	IdleTimeout time.Duration
	// PodWriteTimeout bounds a write the pod does not take while the
	// client reads (close 1014; 0: none).
	PodWriteTimeout time.Duration
	// PodPingInterval is how long a pod may send nothing before edge
	// pings it, and PodSilence how long a ping may go unanswered before
	// the pod is lost (Liveness; 0: no pings).
	PodPingInterval, PodSilence time.Duration
}

// Counters are one direction's metrics, added to as bytes are relayed.
type Counters struct {
	Bytes, Messages prometheus.Counter
}

// Counts are what a socket relayed, for its log line and its release.
type Counts struct {
	BytesIn, BytesOut       int64 // client to pod, pod to client
	MessagesIn, MessagesOut int64
}

// Policy is what edge decides about one relayed socket, whichever relay
// moves its bytes: the frame accounting of each direction, the message
// size limit (close 1009), the client's framing (close 1002), the
// client's idle deadline (close 4000), the close frame injected when edge
// ends the socket (its stop code: 1008 on a lost lease, 1001 on drain, or
// one of the above) and the counters. The relays differ only in how bytes
// move (goroutines on Go's netpoller, or event loops), so every rule lives
// here once.
//
// A Policy is not locked: each part has one owner. Dirs[i] belongs to
// whoever reads direction i's source (one pump each in the goroutine
// relay, the loop in the event-loop relays), and the idle clock to the
// reader of the client. Verdicts go through the socket's stop state.
type Policy struct {
	// Dirs[0] is client_to_pod, Dirs[1] pod_to_client.
	Dirs [2]DirPolicy
	// idle is proxy.idle_timeout at the socket's start (0: none) and
	// lastClient the relay's clock, in nanoseconds, at the client's last
	// bytes. Only the client's silence counts: a voice agent may listen
	// quietly, a provider streams without pause.
	idle, lastClient int64
	// Live finds a pod that hangs: edge pings a quiet pod and its
	// answers are consumed here (Dirs[1]'s scanner drops them).
	Live Liveness
}

// DirPolicy is one direction's share of a Policy.
type DirPolicy struct {
	sc      wsproto.Scanner
	limit   uint64 // proxy.max_message_bytes (0: none)
	src     Side   // side whose bytes this direction reads
	counter Counters
	// bytes relayed, and the messages already added to the counter.
	bytes, counted int64
	// closeSeen: the first close frame of this direction is recorded.
	closeSeen bool
	// over: a refused frame came (over the limit, or broken), and nothing
	// from it on is forwarded; cleanCut: its header was not forwarded
	// either, so the destination is between frames.
	over, cleanCut bool
	// opening keeps the stream's first messages for a socket that may
	// move to another pod (Keep); nil for every other socket.
	opening *opening
}

// opening is what a direction keeps of its stream's start: its bytes as
// forwarded, until want whole messages have passed (at the end of a read
// that leaves the stream between messages: what follows them in that read
// is kept too) or max bytes.
type opening struct {
	want      int64
	max       int
	buf       []byte
	done, cut bool
}

// Keep asks d to keep its forwarded bytes from the stream's start until
// messages whole data messages have passed, within max bytes: the opening
// a call's new pod is given again (Host.Resume). Called before the first
// Relayed; only sockets that may move pay for it, once.
func (d *DirPolicy) Keep(messages, max int) {
	d.opening = &opening{want: int64(messages), max: max}
}

// Kept is what d kept of its stream's start (Keep), and whether it holds
// the messages asked for: false when they have not all come yet, or did
// not fit.
func (d *DirPolicy) Kept() ([]byte, bool) {
	if d.opening == nil || !d.opening.done {
		return nil, false
	}
	return d.opening.buf, true
}

func (o *opening) add(b []byte, messages int64, between bool) {
	if o.done || o.cut {
		return
	}
	if len(o.buf)+len(b) > o.max {
		o.cut, o.buf = true, nil
		return
	}
	o.buf = append(o.buf, b...)
	o.done = messages >= o.want && between
}

// BetweenMessages reports whether d's destination has every message it
// began whole: where another stream's messages may follow.
func (d *DirPolicy) BetweenMessages() bool { return !d.over && d.sc.BetweenMessages() }

// DropPartial is, for a destination that must not see the rest of a
// message its predecessor was given part of (a new pod, after its call
// moved mid-message), how many of b's leading bytes belong to that
// message: they are scanned, so the frame accounting stays whole, and
// dropped. 0 once the source is between messages. Byte by byte: it runs
// once per move, over one message at most.
func (d *DirPolicy) DropPartial(b []byte) int {
	for i := range b {
		if d.sc.BetweenMessages() {
			return i
		}
		d.sc.Scan(b[i:i+1], d.limit)
	}
	return len(b)
}

// Verdict is a policy's decision to end the socket, given to the socket's
// stop; a zero Verdict carries on.
type Verdict struct {
	Code   int
	Reason string
}

// Init sets p up for a socket starting at now, on the relay's clock, with
// the host's limits and counters (c[0] client_to_pod, c[1]
// pod_to_client); ext says the handshake negotiated an extension (the
// client's frames may use the reserved bits).
func (p *Policy) Init(lim Limits, c *[2]Counters, now int64, ext bool) {
	limit := uint64(max(lim.MaxMessageBytes, 0))
	p.Dirs[0] = DirPolicy{limit: limit, src: Client, counter: c[0]}
	p.Dirs[0].sc.Client, p.Dirs[0].sc.Ext = true, ext
	p.Dirs[1] = DirPolicy{limit: limit, src: Pod, counter: c[1]}
	p.idle = int64(max(lim.IdleTimeout, 0))
	p.lastClient = now
	if lim.PodPingInterval > 0 && lim.PodSilence > 0 {
		p.Live.init(int64(lim.PodPingInterval), int64(lim.PodSilence), now)
		p.Dirs[1].sc.DropPongs = true
	}
}

// LiveCheck is a loop's liveness check of the pod at now: hung, the pod
// is lost; else the ping to write to the pod behind what waits for it
// (nil: none now), counted as sent.
func (p *Policy) LiveCheck(now int64) (ping []byte, hung bool) {
	if _, hung, _ := p.Live.Check(now); hung {
		return nil, true
	}
	if ping = p.PingFrame(); ping != nil {
		p.Live.Pinged(now)
	}
	return ping, false
}

// PingFrameDue reports whether a ping is asked for and may go now (the
// client's direction between frames): PingFrame would give one.
func (p *Policy) PingFrameDue() bool {
	return p.Live.Due() && p.Dirs[0].atBoundary() && !p.Dirs[0].over
}

// PingFrame is edge's ping for the pod, or nil where none may go now: no
// ping asked for (Live.Due), or the client's direction is inside a frame,
// which the ping would corrupt (it goes at the next boundary). The
// relay writes it to the pod behind what it forwarded, then calls
// Live.Pinged.
func (p *Policy) PingFrame() []byte {
	if !p.PingFrameDue() {
		return nil
	}
	return wsproto.PingFrame()
}

// Counts are what p relayed so far.
func (p *Policy) Counts() Counts {
	return Counts{
		BytesIn: p.Dirs[0].bytes, BytesOut: p.Dirs[1].bytes,
		MessagesIn: p.Dirs[0].sc.Messages, MessagesOut: p.Dirs[1].sc.Messages,
	}
}

// Src is the side whose bytes d reads.
func (d *DirPolicy) Src() Side { return d.src }

// Relayed accounts b, the next bytes of d's source, and returns how many of
// them go to its destination: all of them, except from a refused frame on
// (one that takes its message over the limit, or a client's that breaks
// the protocol). That frame is not forwarded at all when its header is in
// b (the destination stays between frames, so it gets edge's close frame,
// 1009 or 1002, not a torn frame and a reset); nothing more of the source
// is forwarded after it (the socket is ending).
func (d *DirPolicy) Relayed(s *Socket, b []byte) (int, Verdict) {
	if d.over {
		return 0, Verdict{}
	}
	d.sc.Scan(b, d.limit)
	// The pod's answers to edge's pings go no further: cut out of b in
	// place (the caller forwards b[:n]).
	dropped := 0
	if len(d.sc.Pongs) > 0 {
		dropped = d.cutPongs(b)
	}
	if d.sc.CloseCode != 0 && !d.closeSeen {
		d.closeSeen = true
		s.CloseFrame(d.src, d.sc.CloseCode)
	}
	n := len(b) - dropped
	var v Verdict
	if d.sc.Refused != 0 {
		d.over, d.cleanCut = true, d.sc.RefusedAt >= 0
		n = max(d.sc.RefusedAt, 0)
		for _, at := range d.sc.Pongs {
			if at < d.sc.RefusedAt {
				n -= wsproto.PongLen
			}
		}
		v = Verdict{wsproto.CloseTooBig, "message too big"}
		if d.sc.Refused == wsproto.CloseProtocolError {
			v = Verdict{wsproto.CloseProtocolError, "protocol error"}
		}
	}
	if d.opening != nil {
		// The scanner counts a message at its last frame's header: it is
		// whole once the stream is between messages too.
		d.opening.add(b[:n], d.sc.Messages, d.sc.BetweenMessages())
	}
	d.bytes += int64(n)
	d.counter.Bytes.Add(float64(n))
	if d.sc.Messages != d.counted {
		d.counter.Messages.Add(float64(d.sc.Messages - d.counted))
		d.counted = d.sc.Messages
	}
	return n, v
}

// cutPongs moves b's bytes over the pongs the scanner found in it and
// returns how many bytes were cut.
func (d *DirPolicy) cutPongs(b []byte) int {
	w, r := 0, 0
	for _, at := range d.sc.Pongs {
		w += copy(b[w:], b[r:at])
		r = at + wsproto.PongLen
	}
	w += copy(b[w:], b[r:])
	return len(b) - w
}

// UntilBoundary is how many of b, the source's next bytes, end the frame in
// flight: 0 when d is between frames, len(b) when all of b is inside it.
// A closing socket forwards them, so that its close frame can follow
// instead of a torn frame. Nothing is accounted here.
func (d *DirPolicy) UntilBoundary(b []byte) int { return d.sc.UntilBoundary(b) }

// Finishing reports whether d is inside a frame that it may still
// complete before edge's close frame (not the oversized one, which is never
// forwarded).
func (d *DirPolicy) Finishing() bool { return !d.over && !d.sc.AtBoundary() }

// atBoundary reports whether d's destination is between frames: every
// byte forwarded so far ends a whole frame.
func (d *DirPolicy) atBoundary() bool {
	if d.over {
		return d.cleanCut
	}
	return d.sc.AtBoundary()
}

// CloseFrame is what edge writes into d's destination to end the socket
// with its stop code, or nil where nothing may go: edge owes the
// destination no close (no stop code, its stream ended, or a close frame
// went to it already, see Closing.Owes), or the direction is inside a
// frame, where a close frame would corrupt the frame in flight (the
// relays first forward the rest of it, see UntilBoundary; a peer that
// never finishes it gets the TCP close). Toward the pod edge is the
// client, and a client masks its frames (RFC 6455 5.3); the mask only
// defeats cache poisoning by script-chosen payloads, and this payload is
// edge's own, so any random mask does.
func (d *DirPolicy) CloseFrame(s *Socket) []byte {
	if !d.atBoundary() {
		return nil
	}
	code, reason := s.Owes(d.src.Other())
	if code == 0 {
		return nil
	}
	var mask *[4]byte
	if d.src == Client {
		mask = new([4]byte)
		rand.Read(mask[:])
	}
	return wsproto.CloseFrame(code, reason, mask)
}

// IdleTimeout is the client's silence allowed (0: unbounded).
func (p *Policy) IdleTimeout() time.Duration { return time.Duration(p.idle) }

// ClientSent notes bytes from the client at now, on the relay's clock.
func (p *Policy) ClientSent(now int64) { p.lastClient = now }

// IdleLeft reports how long, from now, the client may stay silent before
// the socket ends, and the verdict once that time is up (neither without
// an idle timeout). A relay checks it when it likes (a deadline that
// fired, a tick): moving a deadline on every read would cost a timer
// operation per message.
func (p *Policy) IdleLeft(now int64) (time.Duration, Verdict) {
	if p.idle <= 0 {
		return 0, Verdict{}
	}
	if left := p.lastClient + p.idle - now; left > 0 {
		return time.Duration(left), Verdict{}
	}
	return 0, Verdict{CloseIdleTimeout, "idle timeout"}
}
