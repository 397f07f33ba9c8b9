package proxy

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/edge-voice/edge/internal/mediacontract"
	"github.com/edge-voice/edge/proxy/internal/relay"
)

var (
	aLongTimeAgo = time.Unix(1, 0)
	noDeadline   time.Time
)

// Relay names a relay mechanism, the way a socket's bytes move; what is
// decided about them is the same for all (policy.go). Config.Relay
// (proxy.relay) picks one.
type Relay string

const (
	// relayEpoll serves every relayed pair from a few event loops, one
	// epoll set each, outside Go's netpoller (eloop_linux.go,
	// esock_linux.go): no goroutine wake-up per message. It carries plain
	// TCP clients and the TLS 1.3 clients of edge's own listener, whose
	// records the loop opens and seals (package tls13). The default on
	// Linux, measured in docs/bench-media.md.
	relayEpoll Relay = "epoll"
	// relayGoroutines runs two copy goroutines per socket on Go's netpoller
	// (pump.go). Used where epoll cannot be: other systems, a TLS client
	// whose records the loops cannot take over (TLS 1.2, or a state
	// package tls13 cannot account for), another kind of client connection,
	// or Run not started.
	relayGoroutines Relay = "goroutines"
	// relayUring serves what relayEpoll does from loops that submit their
	// receives and sends through io_uring, batched across sockets
	// (uloop_linux.go); where io_uring is refused the epoll loops take
	// every socket. Opt-in: it needs io_uring, and trades a batch window's
	// latency for CPU (docs/bench-media.md).
	relayUring Relay = "uring"
)

// bufSize is one goroutine-relay buffer: a Twilio media frame is ~300
// bytes; a bigger message just takes more reads. A buffer is taken from the
// pool only when bytes are ready (see reader), so idle streams hold none.
const bufSize = 8 << 10

var bufPool = sync.Pool{New: func() any { b := make([]byte, bufSize); return &b }}

// socket is one relayed media stream: a hijacked client conn and its pod
// conn, with the call it belongs to. The relay mechanism owns the
// connections; what other goroutines (renewal, drain) touch is atomic or
// under mu.
type socket struct {
	callID, pod     string
	holder          string // the socket's media claim (Leases.Claim)
	client, podConn net.Conn
	started         time.Time
	call            callMeta   // for the socket's log lines
	span            trace.Span // the socket's span; nil when tracing is off
	// ext: the pod's 101 named an extension, whose frames may carry the
	// reserved bits.
	ext bool

	// closing is the socket's closing state machine (package relay): who
	// ended it, with which code, what edge owes each side, whether the
	// pod is to blame. Its events come from the relay's reads and writes
	// and from edge's stops on other goroutines (renewal, drain), on
	// close events only, never per message: mu serialises them.
	mu      sync.Mutex
	closing relay.Closing
	// stopped mirrors closing.Stopped() for the relays' checks on their
	// paths (a read that raced a stop) without the lock.
	stopped atomic.Bool
	// interrupt tells the relay that the socket has a stop code (set once
	// the mechanism is chosen).
	interrupt atomic.Pointer[func()]
}

// stop asks the relay to close both sides with code, at a frame boundary.
// The first code wins. Safe from any goroutine.
func (s *socket) stop(code int, reason string) {
	if !s.markStop(code, reason) {
		return
	}
	if f := s.interrupt.Load(); f != nil {
		(*f)()
	}
}

// markStop records edge's stop code unless another came first (or the
// pod was lost): the relay's own verdicts, which it acts on at once.
func (s *socket) markStop(code int, reason string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.closing.Stop(code, reason) {
		return false
	}
	s.stopped.Store(true)
	return true
}

// setInterrupt installs the relay's wake-up; a stop that came before it
// (a drain racing the handshake) is delivered now. Calling f twice is
// harmless for both relays.
func (s *socket) setInterrupt(f func()) {
	s.interrupt.Store(&f)
	if s.stopped.Load() {
		f()
	}
}

// ended records that side's stream ended, how, and reports whether that
// costs the pod (relay.Closing.Ended): the socket then has 1014 as its
// stop code.
func (s *socket) ended(side relay.Side, how relay.End) (lost bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	lost = s.closing.Ended(side, how)
	if lost {
		s.stopped.Store(true)
	}
	return lost
}

// tornDown records that the relay closed both connections, by's failure
// ending the socket (relay.None: none, or edge's): an end found then
// costs no pod.
func (s *socket) tornDown(by relay.Side) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closing.TornDown()
	s.closing.Ended(by, relay.Failed)
}

// begin, shut and over are the close's stages on a loop's clock
// (relay.Closing's Begin, Shut, Over).
func (s *socket) begin(now int64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closing.Begin(now)
}

func (s *socket) shut(now int64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closing.Shut(now)
}

func (s *socket) over(now int64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closing.Over(now)
}

// closeFrame records a close frame from side from, with code.
func (s *socket) closeFrame(from relay.Side, code int) {
	s.mu.Lock()
	s.closing.CloseFrame(from, code)
	s.mu.Unlock()
}

// owes is the close code, and its reason, edge owes side to (0: none).
func (s *socket) owes(to relay.Side) (int, string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closing.Owes(to)
}

// result is how the socket ended, as far as its relay told.
func (s *socket) result() relay.Result {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closing.Result()
}

// finish does what every socket's end owes, whichever relay carried it:
// metrics, log, release of the call, and leaving the registry.
// pol is the relay's policy, with the socket's counts (nil: none relayed).
func (p *Proxy) finish(s *socket, pol *policy) {
	defer p.handlers.Done()
	p.metrics.active.Dec()
	now := time.Now()
	p.metrics.duration.Observe(now.Sub(s.started).Seconds())
	r := s.result()
	initiator, code := closeOrigin(r)
	p.metrics.closes.WithLabelValues(initiator, code).Inc()
	end := mediacontract.SocketEnd{Ended: endedHow(r), ClosedBy: initiator, CloseCode: code, Closed: now}
	if pol != nil {
		end.BytesIn, end.BytesOut = pol.dirs[0].bytes, pol.dirs[1].bytes
		end.MessagesIn, end.MessagesOut = pol.dirs[0].sc.Messages, pol.dirs[1].sc.Messages
	}
	endSocketSpan(s, initiator, code, end.BytesIn, end.BytesOut)
	// Release before forgetting the socket: a drain, or a test, that sees
	// the socket gone knows its call is released.
	outcome := p.release(s, end)
	// The socket's one line at its end: nothing is logged per message,
	// its counts are the relay's own.
	p.log.Info("media socket closed", append(s.attrs(), "by", initiator, "code", code,
		"duration", now.Sub(s.started).Round(time.Millisecond),
		"messages_in", end.MessagesIn, "messages_out", end.MessagesOut,
		"bytes_in", end.BytesIn, "bytes_out", end.BytesOut,
		"released", end.Ended, "release", outcome)...)
	if r.Lost {
		addr, _ := p.lookup(s.pod)
		p.podFailed(s.pod, addr, "lost")
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
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	outcome, err := p.leases.Release(ctx, s.callID, end)
	if err != nil {
		if errors.Is(err, mediacontract.ErrNoAllocation) {
			outcome = "not_found"
		} else {
			outcome = "error"
			p.log.Warn("release after media socket closed failed; the lease will expire", "call_sid", s.callID, "pod", s.pod, "err", err)
		}
	}
	p.metrics.releases.WithLabelValues(outcome).Inc()
	return outcome
}
