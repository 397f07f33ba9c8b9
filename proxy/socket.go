package proxy

import (
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/edge-voice/edge/internal/mediacontract"
	"github.com/edge-voice/edge/proxy/internal/relay"
	"github.com/edge-voice/edge/proxy/internal/wsproto"
)

var (
	aLongTimeAgo = time.Unix(1, 0)
	noDeadline   time.Time
)

// Relay names a relay mechanism, the way a socket's bytes move; what is
// decided about them is the same for all (relay.Policy). Config.Relay
// (proxy.relay) picks one.
type Relay string

const (
	// relayEpoll serves every relayed pair from a few event loops, one
	// epoll set each, outside Go's netpoller (package relay/loop): no
	// goroutine wake-up per message. It carries plain
	// TCP clients and the TLS 1.3 clients of edge's own listener, whose
	// records the loop opens and seals (package tls13). The default on
	// Linux, measured in docs/bench-media.md.
	relayEpoll Relay = "epoll"
	// relayGoroutines runs two copy goroutines per socket on Go's netpoller
	// (package relay/pump). Used where epoll cannot be: other systems, a TLS client
	// whose records the loops cannot take over (TLS 1.2, or a state
	// package tls13 cannot account for), another kind of client connection,
	// or Run not started.
	relayGoroutines Relay = "goroutines"
	// relayUring serves what relayEpoll does from loops that submit their
	// receives and sends through io_uring, batched across sockets
	// (package relay/loop); where io_uring is refused the epoll loops take
	// every socket. Opt-in: it needs io_uring, and trades a batch window's
	// latency for CPU (docs/bench-media.md).
	relayUring Relay = "uring"
)

// Close codes edge sends itself, and why.
const (
	closeGoingAway = wsproto.CloseGoingAway // drain deadline passed on shutdown
	closePolicy    = wsproto.ClosePolicy    // the call lost its lease (released, swept)
	// closeProtocolError: a client's frame that breaks RFC 6455.
	closeProtocolError = wsproto.CloseProtocolError
	closeTooBig        = wsproto.CloseTooBig    // a message over proxy.max_message_bytes
	closeIdleTimeout   = relay.CloseIdleTimeout // the client sent nothing for proxy.idle_timeout
	// closeBadGateway (RFC 6455's registry: "Bad Gateway") tells the
	// client its pod's side died mid-call: a reset, a FIN without a close
	// frame, or a write to the pod stalled past proxy.pod_write_timeout.
	closeBadGateway = wsproto.CloseBadGateway
)

// socket is one relayed media stream: what its relay knows of it (the
// client's and the pod's connections, its start and its closing state
// machine, relay.Socket) and the call it belongs to, which only the proxy
// reads.
type socket struct {
	relay.Socket
	holder string     // the socket's media claim (Leases.Claim)
	call   callMeta   // for the socket's log lines
	span   trace.Span // the socket's span; nil when tracing is off

	// pod is where the call is: it changes when the socket moves, while
	// the renewal and the log lines read it. addr is the instance dialled
	// (on the relay's goroutine once relayed).
	podMu sync.Mutex
	pod   string
	addr  string

	// What moving to another pod needs and did (resume.go), on the
	// relay's goroutine: nil redial for a socket that may not move.
	redial  *redial
	resumes int
	lostPod string // the pod that died last
	// moveOutcome is why the last move failed (a resumptions outcome),
	// "" while none did: the 1014's reason names it (PodLost).
	moveOutcome string
	// resumedAt and outAtResume are when the last move's replay was sent
	// and how many bytes the client had had from pods by then: a pod
	// that dies within proxy.resume.poison_window of it with nothing
	// more sent died of the stream (resume.go).
	resumedAt   time.Time
	outAtResume int64
	// lossRecorded: the move recorded the dead pod's failure, which the
	// socket's end must not count again.
	lossRecorded bool
	// podGone: the pod left the registry (set by the renewal): it is not
	// to blame, nor to be recorded as failed, whatever becomes of the move.
	podGone atomic.Bool
}

func (s *socket) podName() string {
	s.podMu.Lock()
	defer s.podMu.Unlock()
	return s.pod
}

func (s *socket) setPod(pod string) {
	s.podMu.Lock()
	s.pod = pod
	s.podMu.Unlock()
}

// relayHost is the proxy as its relays' relay.Host: what a socket's end
// and a lost pod owe (and, in resume.go, a pod's death mid-call for a
// socket that may move), never per message.
type relayHost Proxy

// Ended finishes the socket: see finish.
func (h *relayHost) Ended(rs *relay.Socket, c relay.Counts) {
	p := (*Proxy)(h)
	p.finish(p.socketOf(rs), c)
}

// PodLost logs the pod's end mid-call and says in the client's 1014 how
// the pod was lost and why the call did not move; the socket's end
// reports it to the pod's failures (finish).
func (h *relayHost) PodLost(rs *relay.Socket, cause error) {
	p := (*Proxy)(h)
	s := p.socketOf(rs)
	how := lossCause(cause)
	outcome := s.moveOutcome
	if outcome == "" {
		// Not a failed move: this socket may not move at all.
		p.metrics.podsLost.WithLabelValues(how).Inc()
		outcome = "not_enabled"
		p.metrics.resumptions.WithLabelValues(outcome).Inc()
	}
	rs.LostReason("pod lost: " + how + ", " + outcome)
	p.log.Warn("pod's side of a media socket died mid-call", append(s.attrs(), "cause", how, "outcome", outcome, "err", cause)...)
}

// lossCause is a bounded label for how a pod was lost mid-call: reset
// (its connection failed), eof (FIN without a close frame), stalled (it
// took no writes for proxy.pod_write_timeout), hung (it answered no ping
// for proxy.pod_silence) or left (it left the registry).
func lossCause(err error) string {
	switch {
	case errors.Is(err, relay.ErrPodHung):
		return "hung"
	case errors.Is(err, relay.ErrPodStalled):
		return "stalled"
	case errors.Is(err, relay.ErrPodLeft):
		return "left"
	case errors.Is(err, relay.ErrPodEOF), errors.Is(err, io.EOF):
		return "eof"
	}
	return "reset"
}

// socketOf is the open socket a relay knows as rs.
func (p *Proxy) socketOf(rs *relay.Socket) *socket {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.sockets[rs]
}

// finish does what every socket's end owes, whichever relay carried it:
// metrics, log, release of the call, and leaving the registry.
// c is what the relay relayed.
func (p *Proxy) finish(s *socket, c relay.Counts) {
	defer p.handlers.Done()
	p.metrics.active.Dec()
	now := time.Now()
	p.metrics.duration.Observe(now.Sub(s.Started).Seconds())
	r := s.Result()
	initiator, code := closeOrigin(r)
	p.metrics.closes.WithLabelValues(initiator, code).Inc()
	end := mediacontract.SocketEnd{Ended: endedHow(r), ClosedBy: initiator, CloseCode: code, Reason: r.Reason, Closed: now,
		BytesIn: c.BytesIn, BytesOut: c.BytesOut, MessagesIn: c.MessagesIn, MessagesOut: c.MessagesOut}
	endSocketSpan(s, initiator, code, end.BytesIn, end.BytesOut)
	// Release before forgetting the socket: a drain, or a test, that sees
	// the socket gone knows its call is released.
	outcome := p.release(s, end)
	// The socket's one line at its end: nothing is logged per message,
	// its counts are the relay's own.
	p.log.Info("media socket closed", append(s.attrs(), "by", initiator, "code", code,
		"duration", now.Sub(s.Started).Round(time.Millisecond),
		"messages_in", end.MessagesIn, "messages_out", end.MessagesOut,
		"bytes_in", end.BytesIn, "bytes_out", end.BytesOut,
		"released", end.Ended, "release", outcome, "resumptions", s.resumes)...)
	if r.Lost && !s.lossRecorded && !s.podGone.Load() && p.sameInstance(s.podName(), s.addr) {
		p.podFailed(s.podName(), s.addr, "lost")
	}
	p.forget(s)
}

// closeOrigin labels who ended the socket and with which code: edge's own
// stop code, else the first close frame seen, else the side whose TCP
// connection ended first with code "none" (a crash or a network failure).
func closeOrigin(r relay.Result) (initiator, code string) {
	initiator = r.By.String()
	if r.By == relay.None {
		initiator = "client" // torn down before either side did anything
	}
	if r.Code == 0 {
		return initiator, "none"
	}
	if r.By == relay.Edge {
		return initiator, fmt.Sprint(r.Code)
	}
	return initiator, codeLabel(r.Code)
}

// codeLabel bounds the close-code label a peer chooses: the registered codes
// and the application range 4000-4999 stay exact, 3000-3999 (library codes)
// become "3xxx", anything else "invalid", so no peer can mint thousands of
// metric series.
func codeLabel(c int) string {
	switch {
	case c >= 1000 && c <= 1015, c >= 4000 && c <= 4999:
		return fmt.Sprint(c)
	case c >= 3000 && c <= 3999:
		return "3xxx"
	default:
		return "invalid"
	}
}

// release ends the call: the socket is gone, so is the call's media. It
// returns the release's outcome.
func (p *Proxy) release(s *socket, end mediacontract.SocketEnd) string {
	outcome, err := p.releaseCall(s.CallID, end)
	if err != nil {
		p.log.Warn("release after media socket closed failed; the lease will expire", "call_sid", s.CallID, "pod", s.podName(), "err", err)
	}
	return outcome
}

// releaseCall ends callID's allocation, end kept in its record, whoever's
// socket it was (relayed, or one that reached no pod), and counts the
// outcome: released, stale, not_found, retrying (Redis did not answer:
// retried until it does), or error, with the failure.
func (p *Proxy) releaseCall(callID string, end mediacontract.SocketEnd) (string, error) {
	ctx, cancel := owedContext()
	defer cancel()
	outcome, err := p.leases.Release(ctx, callID, end)
	switch {
	case err == nil:
	case errors.Is(err, mediacontract.ErrNoAllocation):
		outcome, err = "not_found", nil
	default:
		outcome = "error"
	}
	p.metrics.releases.WithLabelValues(outcome).Inc()
	return outcome, err
}
