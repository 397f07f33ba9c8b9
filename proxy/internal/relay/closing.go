package relay

import (
	"time"

	"github.com/edge-voice/edge/proxy/internal/wsproto"
)

// Side is a party to a relayed socket.
type Side int8

const (
	// None: nobody yet (no side ended, no close frame seen).
	None Side = iota
	// Client is the provider's end, the socket edge accepted.
	Client
	// Pod is the voice agent's end, the socket edge dialled.
	Pod
	// Edge is edge itself, ending the socket with a stop code of its own.
	Edge
)

func (s Side) String() string {
	switch s {
	case Client:
		return "client"
	case Pod:
		return "pod"
	case Edge:
		return "edge"
	}
	return "none"
}

// Other is the side across the relay from s (Client and Pod only).
func (s Side) Other() Side { return Client + Pod - s }

// End is how a side's stream ended.
type End uint8

const (
	// EOF: the side ended its stream (a TCP FIN, a TLS close_notify).
	EOF End = iota + 1
	// Failed: its connection failed (a reset, a read or a write to it
	// that failed, a TLS record that does not open, its fatal alert).
	Failed
	// Stalled: the pod took no writes for proxy.pod_write_timeout while
	// the client read (a hung pod; a client that does not read excuses
	// it, and the relay does not report it then).
	Stalled
)

// Phase is where a socket's close stands.
type Phase uint8

const (
	// PhaseOpen: relaying.
	PhaseOpen Phase = iota
	// PhaseClosing: edge's close frames, and the rest of a frame in
	// flight before them, are going out, within CloseGrace.
	PhaseClosing
	// PhaseShut: edge's last bytes are out and both connections are shut
	// for writing; what the peers still send is drained (a lingering
	// close) until both end their streams, within LingerTime.
	PhaseShut
	// PhaseDone: torn down.
	PhaseDone
)

// CloseGrace bounds how long a closing socket waits for its close frames
// to be written before the TCP close: a peer that stopped reading must
// not keep a socket, or a drain, alive.
const CloseGrace = time.Second

// LingerTime bounds how long, after edge's close frame is out, edge
// drains a peer that is still sending before closing the connection (as
// nginx's lingering_close): closing with unread bytes resets the
// connection, and a reset can destroy the close frame before the peer
// reads it (RFC 6455 7.1.1). Long enough for a peer to read the close and
// answer, short enough that a peer that never stops cannot hold the
// socket.
const LingerTime = 2 * time.Second

// Closing is the closing state machine of one relayed socket: the relay
// tells it the close events it sees (a close frame passing, a side's
// stream ending, edge's stop, the clock at the steps of the close
// handshake) and asks it what follows: which close code edge owes each
// side, whether the pod is to blame, when to shut and tear down, and at
// the end who closed the socket. It does no I/O, reads no clock (times
// are the relay's clock, in nanoseconds) and takes no lock: its owner
// serialises the events. Nothing here runs per message.
//
// The rules, whichever relay carries the socket:
//   - Edge's stop wins the attribution: the first stop code is the
//     socket's (a drain's 1001, a lost lease's 1008, the idle timeout's
//     4000, a message over the limit's 1009 to its sender, a client's
//     broken framing's 1002, a lost pod's 1014); later ones are ignored.
//     Without one, the first close frame seen names its sender and code;
//     without any, the side whose stream ended first, with no code.
//   - Only the pod's own end costs the pod: its stream ending (a FIN, a
//     reset, a failed write to it, a stall) while the client is still
//     there, before any close frame (its own, or the client's, which
//     begins the client's close) and before any stop of edge's. Then edge owes the client 1014 and the call ends as
//     pod_lost. Whatever the client does (its FIN, reset, close_notify,
//     garbage, a broken TLS record) is the client's end, so a media URL's
//     holder cannot make edge blame a healthy pod.
//   - Edge owes a side its close frame while it has a stop code, that
//     side's stream has not ended and no close frame has already gone to
//     it from the other side (nothing follows a close frame, RFC 6455
//     5.5.1). Where in the stream it goes (at a frame boundary) is the
//     relay's business.
type Closing struct {
	phase Phase
	// deadline is the bound of the current phase, on the relay's clock.
	deadline int64
	// code and reason are edge's stop (0: none).
	code   int
	reason string
	// lost: the pod's side died mid-call (see Ended).
	lost bool
	// firstClose is the first close code seen, firstCloser its sender;
	// firstEnd the side whose stream ended first.
	firstClose            int
	firstCloser, firstEnd Side
	// closed[s]: a close frame came from s; ended[s]: s's stream ended.
	closed, ended [Edge + 1]bool
}

// party reports whether s is one of the two connections' sides.
func party(s Side) bool { return s == Client || s == Pod }

// CloseFrame records a close frame from side from, with code (1005 when
// it carried none). Only a side's first close frame counts, and none
// after its stream ended.
func (c *Closing) CloseFrame(from Side, code int) {
	if !party(from) || c.closed[from] || c.ended[from] {
		return
	}
	c.closed[from] = true
	if c.firstClose == 0 {
		c.firstClose, c.firstCloser = code, from
	}
}

// Stop records edge's decision to end the socket with code and reason,
// unless a stop (or the pod's loss) came first or the socket is torn
// down. It reports whether this one was recorded: the relay then ends the
// socket, with the close frames Owes says.
func (c *Closing) Stop(code int, reason string) bool {
	if c.code != 0 || c.phase == PhaseDone {
		return false
	}
	c.code, c.reason = code, reason
	return true
}

// Ended records that side's stream ended, how; a side ends once. It
// reports whether that end costs the pod: the pod's own end while the
// client is still there, before any close frame (the pod's own, or the
// client's, which begins the client's close) and before any stop of
// edge's. The socket then ends with 1014 to the client (it
// has edge's stop code from here on) and as pod_lost.
func (c *Closing) Ended(side Side, how End) (lost bool) {
	if !party(side) || c.ended[side] {
		return false
	}
	c.ended[side] = true
	if c.firstEnd == None {
		c.firstEnd = side
	}
	if !c.wouldCost(side) {
		return false
	}
	c.lost = true
	c.code, c.reason = wsproto.CloseBadGateway, "pod lost"
	return true
}

// Relabel gives a lost pod's close (1014) reason, which says more than
// Ended knows: how the pod was lost, and why the call did not move.
func (c *Closing) Relabel(reason string) {
	if c.lost && c.code == wsproto.CloseBadGateway {
		c.reason = reason
	}
}

// WouldCost reports whether side's stream ending now would cost the pod
// (Ended): a socket that may move to another pod moves instead.
func (c *Closing) WouldCost(side Side) bool { return !c.ended[side] && c.wouldCost(side) }

// wouldCost is Ended's rule, for a side whose end is being recorded.
func (c *Closing) wouldCost(side Side) bool {
	return side == Pod && c.code == 0 && !c.ended[Client] && !c.closed[Client] && !c.closed[Pod] && c.phase != PhaseDone
}

// Stopped reports whether edge has a stop code for the socket (its own,
// or the pod's loss).
func (c *Closing) Stopped() bool { return c.code != 0 }

// Owes is the close code, and its reason, that edge owes side to (0: none
// owed): edge's stop code while to's stream has not ended and no close
// frame went to it from the other side.
func (c *Closing) Owes(to Side) (int, string) {
	if c.code == 0 || !party(to) || c.ended[to] || c.closed[to.Other()] {
		return 0, ""
	}
	return c.code, c.reason
}

// HasEnded reports whether side's stream ended.
func (c *Closing) HasEnded(side Side) bool { return party(side) && c.ended[side] }

// Begin starts the close at now (edge's stop, or a side's stream ended):
// what is owed goes out within CloseGrace. It reports whether the close
// began now; false when it had begun already, and then no close frame is
// added to a close under way (a side's end came first: nothing may follow
// it toward that side, and the other side hears the TCP close).
func (c *Closing) Begin(now int64) bool {
	if c.phase != PhaseOpen {
		return false
	}
	c.phase, c.deadline = PhaseClosing, now+int64(CloseGrace)
	return true
}

// Shut records at now that edge's last bytes are out and both connections
// are shut for writing: the peers are drained until both end their
// streams, within LingerTime. It reports whether the socket shut now.
func (c *Closing) Shut(now int64) bool {
	if c.phase != PhaseClosing {
		return false
	}
	c.phase, c.deadline = PhaseShut, now+int64(LingerTime)
	return true
}

// Over reports whether the socket is to be torn down at now: both sides'
// streams ended once edge's last bytes are out, or the current phase's
// bound passed (a peer that does not read edge's close, or does not end
// its stream after it).
func (c *Closing) Over(now int64) bool {
	switch c.phase {
	case PhaseClosing:
		return now > c.deadline
	case PhaseShut:
		return c.ended[Client] && c.ended[Pod] || now > c.deadline
	}
	return false
}

// TornDown records that the relay closed both connections; only the
// attribution changes no more.
func (c *Closing) TornDown() { c.phase = PhaseDone }

// Phase is where the close stands.
func (c *Closing) Phase() Phase { return c.phase }

// Deadline is the current phase's bound, on the relay's clock
// (PhaseClosing and PhaseShut only).
func (c *Closing) Deadline() int64 { return c.deadline }

// Result is how a socket ended, for its metrics, log line and the call's
// record.
type Result struct {
	// By is who ended it: Edge (its stop code, the pod's loss included),
	// the sender of the first close frame, else the side whose stream
	// ended first (None if neither did: a socket torn down before
	// relaying).
	By Side
	// Code is edge's stop code or the first close frame's code; 0 when
	// the socket ended without a close frame (a crash, a network
	// failure).
	Code int
	// Reason is edge's stop reason ("" without a stop).
	Reason string
	// Lost: the pod's side died mid-call, which counts toward its
	// ejection.
	Lost bool
}

// Result says how the socket ended, as far as the events told so far.
func (c *Closing) Result() Result {
	switch {
	case c.code != 0:
		return Result{By: Edge, Code: c.code, Reason: c.reason, Lost: c.lost}
	case c.firstClose != 0:
		return Result{By: c.firstCloser, Code: c.firstClose}
	}
	return Result{By: c.firstEnd}
}
