package proxy

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/edge-voice/edge/internal/mediacontract"
	"github.com/edge-voice/edge/proxy/internal/tls13"
	"github.com/edge-voice/edge/proxy/internal/wsproto"
	"github.com/edge-voice/edge/proxy/mediaurl"
)

// Refusals, each with its HTTP status and metric reason.
var (
	errNoToken      = errors.New("missing media token")
	errShuttingDown = errors.New("shutting down")
	errOverloaded   = errors.New("too many media sockets")
	errDuplicate    = errors.New("the call already has a media socket on this replica")
	errUnsigned     = errors.New("a query on a media URL edge minted without one")
)

// holderPrefix names this process in media claims: the host name (the pod
// name in Kubernetes) for the operator reading a claim, and a random part
// so that a replica restarted under the same name never takes its previous
// life's claims for its own.
var holderPrefix = func() string {
	host, _ := os.Hostname()
	var b [4]byte
	rand.Read(b[:])
	return host + "-" + hex.EncodeToString(b[:])
}()

var holderSeq atomic.Uint64

// newHolder is a media claim identity unique to one socket of one process.
func newHolder() string { return holderPrefix + "/" + strconv.FormatUint(holderSeq.Add(1), 10) }

func (p *Proxy) refuse(w http.ResponseWriter, status int, reason string, err error, attrs ...any) {
	p.metrics.refused.WithLabelValues(reason).Inc()
	p.log.Debug("media socket refused", append([]any{"reason", reason, "err", err}, attrs...)...)
	http.Error(w, http.StatusText(status), status)
}

// serve admits a socket in order of cost: path, handshake and token (an
// HMAC, constant-time), the pod (memory), then one Redis round trip that
// checks the call is live on the pod and claims its media for this socket
// (one socket per call across every replica: a second one, a replayed URL,
// would outlive the call's release when the first closes), then the pod
// dial.
func (p *Proxy) serve(w http.ResponseWriter, r *http.Request) {
	t, err := mediaurl.ParseTarget(r.URL.EscapedPath(), r.URL.RawQuery)
	if errors.Is(err, mediaurl.ErrBadPath) {
		p.refuse(w, http.StatusBadRequest, "bad_path", err)
		return
	}
	if err != nil {
		p.refuse(w, http.StatusNotFound, "unknown_pod", err)
		return
	}
	// The handshake and the token are checked before the pod is looked
	// up, so that a stranger cannot tell known pod names from unknown ones.
	if err := wsproto.CheckUpgrade(r); err != nil {
		p.refuse(w, http.StatusBadRequest, "not_websocket", err)
		return
	}
	cfg := p.cfg()
	var callID string
	switch {
	case t.Token != "":
		// The token covers the query too when edge minted the URL with
		// provider parameters (mediaurl.URLWithQuery).
		id, err := p.signer.VerifyTarget(&t)
		if err != nil {
			reason := "bad_token"
			if errors.Is(err, mediaurl.ErrExpiredToken) {
				reason = "expired_token"
			}
			p.refuse(w, http.StatusForbidden, reason, err, "pod", t.Pod)
			return
		}
		callID = id
	case cfg.RequireToken:
		p.refuse(w, http.StatusForbidden, "bad_token", errNoToken, "pod", t.Pod)
		return
	}
	// A pod reads only the query edge signed: one a client adds to a URL
	// minted without parameters is refused before Redis, never passed on
	// for the pod to refuse (and be blamed for).
	if t.Query != "" && !t.Signed {
		p.refuse(w, http.StatusBadRequest, "unsigned_query", errUnsigned, "pod", t.Pod, "call_sid", callID)
		return
	}
	// Only edge says which query it signed: a client's header of that
	// name never reaches the pod (dialUpstream copies the rest).
	r.Header.Del(mediaurl.ParamsHeader)
	r.Header.Del(ResumedHeader)
	if t.Signed {
		r.Header.Set(mediaurl.ParamsHeader, t.Query)
	}
	// A pod name edge never learned is refused before Redis; the address
	// dialled is looked up again for the pod the call is on (connect).
	if _, ok := p.lookup(t.Pod); !ok {
		p.refuse(w, http.StatusNotFound, "unknown_pod", mediaurl.ErrUnknownPod, "pod", t.Pod)
		return
	}
	if p.draining() {
		p.refuse(w, http.StatusServiceUnavailable, "shutting_down", errShuttingDown, "pod", t.Pod)
		return
	}

	// One budget for the claim, every dial and every move: the provider
	// waits for one handshake.
	ctx, cancel := context.WithTimeout(r.Context(), cfg.ConnectBudget)
	defer cancel()
	holder := newHolder()
	claimed, err := p.claim(ctx, &callID, t.Pod, holder)
	if err != nil {
		switch {
		case errors.Is(err, mediacontract.ErrNoAllocation):
			p.refuse(w, http.StatusForbidden, "no_allocation", err, "pod", t.Pod, "call_sid", callID)
		case errors.Is(err, mediacontract.ErrClaimed):
			p.refuse(w, http.StatusConflict, "duplicate", err, "pod", t.Pod, "call_sid", callID)
		default:
			p.refusedForRedis(callID, t.Pod, err)
			p.refuse(w, http.StatusServiceUnavailable, "redis_error", err, "pod", t.Pod, "call_sid", callID)
		}
		return
	}

	call := callOf(claimed)
	pod := claimed.Pod
	ctx, span := p.startSocketSpan(ctx, callID, pod, claimed.TraceParent)
	up, pod, err := p.connect(ctx, r, t.URI, callID, pod, holder, &call)
	if code, ok := requestRefused(err); ok {
		endRefusedSpan(span, pod, "pod_refused")
		p.refuse(w, code, "pod_refused", err, "pod", pod, "call_sid", callID)
		return
	}
	if err != nil {
		endRefusedSpan(span, pod, "upstream")
		p.refuse(w, http.StatusBadGateway, "upstream", err, "pod", pod, "call_sid", callID)
		return
	}
	p.relay(w, r, t.URI, up, pod, callID, holder, call, span)
}

func (p *Proxy) draining() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.closing
}

// claim confirms that *callID holds pod (or held it before a failover)
// and claims its media for holder, finding the call first when the socket
// came without a token. It returns the pod the call is on.
func (p *Proxy) claim(ctx context.Context, callID *string, pod, holder string) (mediacontract.Claimed, error) {
	if *callID == "" {
		id, err := p.leases.PodCall(ctx, pod)
		if err != nil {
			return mediacontract.Claimed{}, err
		}
		*callID = id
	}
	// The claim's one round trip also brings the webhook's traceparent
	// (kept only when tracing is on) and the call's log fields. A Redis
	// that does not answer (a Sentinel failover takes a few seconds) is
	// asked again within the connect budget: the provider opens the
	// stream once, and a refusal would cut a call edge answered. The
	// same holder asks, so a claim that did land counts as this one.
	for {
		c, err := p.leases.Claim(ctx, *callID, pod, holder)
		if err == nil || errors.Is(err, mediacontract.ErrNoAllocation) || errors.Is(err, mediacontract.ErrClaimed) {
			return c, err
		}
		t := time.NewTimer(claimRetryEvery)
		select {
		case <-ctx.Done():
			t.Stop()
			return c, err
		case <-t.C:
		}
	}
}

// claimRetryEvery paces the claims of a socket whose claim found Redis not
// answering (no event tells when it is back).
const claimRetryEvery = 100 * time.Millisecond

// unclaim drops the claim of a socket that ends before it is relayed: its
// call lives on, and the provider's retry may reach any replica. It runs
// before the refusal is answered, so that the retry cannot find it held.
// On failure the claim ends with the call (release or lease expiry).
func (p *Proxy) unclaim(callID, holder string) {
	ctx, cancel := owedContext()
	defer cancel()
	if err := p.leases.Unclaim(ctx, callID, holder); err != nil {
		p.log.Warn("dropping the media claim of a socket that never opened failed; it ends with the call",
			"call_sid", callID, "err", err)
	}
}

// relay hijacks the client, answers it the pod's 101 and runs the two pumps
// until the socket ends, then releases the call.
func (p *Proxy) relay(w http.ResponseWriter, r *http.Request, uri string, up *upstream, pod, callID, holder string, call callMeta, span trace.Span) {
	s := &socket{pod: pod, addr: up.addr, holder: holder, call: call, span: span}
	s.CallID, s.Started = callID, time.Now()
	s.SetPod(up.conn)
	s.Ext = up.resp.Header.Get("Sec-WebSocket-Extensions") != ""
	if l, ok := p.cfg().tierLiveness(call.source); ok {
		s.PodLiveness, s.PodPingInterval, s.PodSilence = true, l.PingInterval, l.Silence
	}
	p.mayResume(s, r, uri, up)
	conn, brw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		up.conn.Close()
		p.unclaim(callID, holder)
		endRefusedSpan(span, pod, "hijack")
		p.refuse(w, http.StatusInternalServerError, "hijack", err)
		return
	}
	s.Client = conn
	if err := p.admit(s); err != nil {
		up.conn.Close()
		p.unclaim(callID, holder)
		status, reason := http.StatusServiceUnavailable, "overloaded"
		switch {
		case errors.Is(err, errShuttingDown):
			reason = "shutting_down"
		case errors.Is(err, errDuplicate):
			status, reason = http.StatusConflict, "duplicate"
		}
		fmt.Fprintf(conn, "HTTP/1.1 %d %s\r\nConnection: close\r\nContent-Length: 0\r\n\r\n", status, http.StatusText(status))
		conn.Close()
		endRefusedSpan(span, pod, reason)
		p.metrics.refused.WithLabelValues(reason).Inc()
		return
	}
	if err := wsproto.WriteSwitching(brw.Writer, up.resp); err != nil {
		conn.Close()
		up.conn.Close()
		endRefusedSpan(span, pod, "client_gone")
		p.release(s, mediacontract.SocketEnd{Ended: "socket_close", ClosedBy: "client", CloseCode: "none", Closed: time.Now()})
		p.forget(s)
		p.handlers.Done()
		return
	}
	// Frames the client sent right behind its handshake sit in the server's
	// read buffer.
	var early []byte
	if n := brw.Reader.Buffered(); n > 0 {
		early, _ = brw.Reader.Peek(n)
		early = append([]byte(nil), early...)
	}
	p.metrics.active.Inc()
	p.log.Info("media socket opened", append(s.attrs(), "failovers", call.failovers, "may_resume", s.Resume)...)
	// Either way this handler, and net/http's connection goroutine with its
	// grown stack and buffers, return now.
	if s.Resume {
		// Off the media's path: a slow Redis must not hold the call's
		// first frames. Counted, so that Redis outlives it at shutdown.
		p.handlers.Add(1)
		go func() {
			defer p.handlers.Done()
			p.markResumable(s)
		}()
	}
	if p.cfg().Relay != relayGoroutines && p.loops.Running() {
		var t *tls13.Takeover
		if tc, ok := conn.(*tls.Conn); ok {
			// A TLS client's records go to the loop when crypto/tls
			// gives them up cleanly (package tls13); what tc held is
			// the client's next bytes either way.
			var held []byte
			t, held = tls13.Take(tc)
			early = append(early, held...)
		}
		if p.loops.Add(&s.Socket, up.early, early, t) {
			return
		}
		if t != nil {
			t.GiveBack()
		}
	}
	tc, isTLS := conn.(*tls.Conn)
	if isTLS {
		// crypto/tls keeps this socket: its record watch ends.
		tls13.StopWatch(tc)
	}
	p.countRelayed(relayGoroutines, isTLS)
	p.pump.Add(&s.Socket, up.early, early)
}

// runningRelay is the relay new sockets take: what proxy.relay asks for,
// or the one edge fell back to where it is refused (io_uring by seccomp or
// the kernel, epoll off Linux).
func (p *Proxy) runningRelay() Relay {
	switch {
	case p.cfg().Relay == relayGoroutines || !p.loops.Running():
		return relayGoroutines
	case p.loops.UringRunning():
		return relayUring
	}
	return relayEpoll
}

// countRelayed counts a socket by the relay that carries it and whether its
// client speaks TLS: the share of TLS sockets on the goroutine relay shows
// clients that the loops cannot serve (TLS 1.2). Each relay counts before
// it can move a byte, so that whoever sees the socket's traffic or its end
// sees it counted.
func (p *Proxy) countRelayed(r Relay, tls bool) {
	transport := "tcp"
	if tls {
		transport = "tls"
	}
	p.metrics.relayed.WithLabelValues(string(r), transport).Inc()
}
