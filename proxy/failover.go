package proxy

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"syscall"
	"time"

	"github.com/edge-voice/edge/internal/mediacontract"
	"github.com/edge-voice/edge/proxy/internal/wsproto"
)

// Connect-time failover. A pod can die, hang or
// crash-loop in the second between the webhook's answer and the provider's
// socket; edge owns the allocation, so instead of answering 502 as the
// nginx hop did, it moves the call to another pod of its chain and
// connects there. Nothing has reached the client yet, so the provider sees
// one handshake, and the URL it holds stays valid (Leases.Claim follows a
// moved call).

// errUnknownUpstream: the call's pod is not in this replica's registry
// (the pod source removed it).
var errUnknownUpstream = errors.New("pod not in the pod registry")

// connect dials the call's pod and, when it cannot be reached or refuses
// the upgrade, moves the call (Leases.MoveCall) and dials the next one: at
// most ConnectAttempts dials of DialTimeout each, all within ctx (the
// ConnectBudget). When every attempt fails the call is ended at once (its
// pods back, its tombstone written) rather than left to its lease: the
// provider hangs up on a 502 anyway, unless it retries the handshake
// (giveUp). It returns the pod dialled last;
// call.failovers counts the call's moves; its merchant and provider go on
// the log lines.
func (p *Proxy) connect(ctx context.Context, r *http.Request, uri, callID, pod, holder string, call *callMeta) (*upstream, string, error) {
	key := r.Header.Get("Sec-WebSocket-Key")
	rules := p.clientUpgrade(call.provider)
	cfg := p.cfg()
	ej := cfg.ejection()
	for attempt := 1; ; attempt++ {
		dctx, span := p.startDialSpan(ctx, pod, attempt)
		up, addr, err := p.dialPod(dctx, cfg.DialTimeout, pod, uri, key, podHeader(dctx, r, p.forwarded, rules))
		endDialSpan(span, addr, err)
		if err == nil {
			if attempt > 1 {
				p.metrics.failovers.WithLabelValues("connected").Inc()
			}
			return up, pod, nil
		}
		if code, ok := requestRefused(err); ok {
			// The pod refused the request edge built from the client's:
			// the request's fault, not the pod's. Nothing moves, nothing
			// is ejected; the client hears the pod's status.
			p.log.Warn("pod refused the media upgrade: its status goes to the client, the pod is not blamed", "pod", pod,
				"address", addr, "status", code, "call_sid", callID, "merchant_id", call.merchant, "provider", call.provider,
				"attempt", attempt, "err", err)
			p.giveUp(callID, pod, holder, call, podRefusal(code))
			return nil, pod, err
		}
		reason := dialReason(err)
		p.metrics.dialFailures.WithLabelValues(reason).Inc()
		p.log.Warn("media socket could not reach its pod", "pod", pod, "address", addr, "reason", reason,
			"call_sid", callID, "merchant_id", call.merchant, "provider", call.provider, "attempt", attempt, "err", err)
		if attempt >= cfg.ConnectAttempts || ctx.Err() != nil {
			p.metrics.failovers.WithLabelValues("exhausted").Inc()
			p.podFailed(pod, addr, reason)
			p.giveUp(callID, pod, holder, call, noPodReached())
			return nil, pod, err
		}
		next, ejected, merr := p.leases.MoveCall(ctx, callID, pod, holder, reason, ej)
		if ejected {
			p.ejected(pod, addr, reason)
		}
		switch {
		case errors.Is(merr, mediacontract.ErrNoOtherPod):
			p.metrics.failovers.WithLabelValues("no_pod").Inc()
			p.giveUp(callID, pod, holder, call, noPodReached())
			return nil, pod, errors.Join(err, merr)
		case merr != nil:
			// The call ended or another socket took it meanwhile, or
			// Redis failed: the call is not this socket's to end. Its
			// claim is dropped so that a retry is admitted anywhere.
			p.metrics.failovers.WithLabelValues("error").Inc()
			p.unclaim(callID, holder)
			return nil, pod, errors.Join(err, merr)
		}
		p.log.Info("media socket moved its call to another pod", "call_sid", callID, "merchant_id", call.merchant,
			"provider", call.provider, "pod", next, "from", pod, "reason", reason)
		p.metrics.failovers.WithLabelValues("moved").Inc()
		call.failovers++
		moveEvent(ctx, pod, next, reason)
		pod = next
	}
}

// dialPod dials pod's address from the pod registry (the only source of
// upstream addresses: no request chooses where edge dials) within timeout.
func (p *Proxy) dialPod(ctx context.Context, timeout time.Duration, pod, uri, key string, h http.Header) (*upstream, string, error) {
	addr, ok := p.lookup(pod)
	if !ok {
		return nil, "", errUnknownUpstream
	}
	dctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	up, err := dialUpstream(dctx, addr, uri, key, h)
	if up != nil {
		up.addr = addr
	}
	return up, addr, err
}

// requestRefused reports whether err is a pod's 4xx to the upgrade, and
// its status: a refusal of the request edge built (a header, a query or a
// path the pod does not take), which says nothing of the pod's health.
// Refusals, resets, timeouts and 5xx stay the pod's failures.
func requestRefused(err error) (int, bool) {
	var se *wsproto.StatusError
	if errors.As(err, &se) && se.Code >= 400 && se.Code < 500 {
		return se.Code, true
	}
	return 0, false
}

// noPodReached is how a call whose socket reached no pod ends, in its
// record.
func noPodReached() mediacontract.SocketEnd {
	return mediacontract.SocketEnd{Ended: "failover", ClosedBy: "edge"}
}

// podRefusal is how a call ends whose pod refused its upgrade with
// status: the pod's status in the record's close code.
func podRefusal(status int) mediacontract.SocketEnd {
	return mediacontract.SocketEnd{Ended: "pod_refused", ClosedBy: "pod", CloseCode: strconv.Itoa(status)}
}

// dialReason is a bounded label for a failed dial: refused, reset,
// timeout, status (an answer other than 101), handshake (a broken 101),
// unknown (not in the registry) or other.
func dialReason(err error) string {
	var ne net.Error
	switch {
	case errors.Is(err, errUnknownUpstream):
		return "unknown"
	case errors.Is(err, wsproto.ErrUpgradeStatus):
		return "status"
	case errors.Is(err, wsproto.ErrBadUpgrade):
		return "handshake"
	case errors.Is(err, syscall.ECONNREFUSED):
		return "refused"
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE),
		errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return "reset"
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, os.ErrDeadlineExceeded),
		errors.As(err, &ne) && ne.Timeout():
		return "timeout"
	}
	return "other"
}

// giveUp settles the call of a socket that reached no pod, before its 502
// is answered. A provider that opens the media WebSocket again on its own
// after a failed handshake (Exotel, once) would find an ended call and get
// 403: while fewer of the call's sockets failed than the provider retries,
// the call is kept and only the claim dropped, so the retry is admitted on
// any replica and dials again (moving the call if its pod still fails).
// If no retry comes, the call's lease runs out and the sweep ends it.
// Otherwise, and when the claim cannot be dropped, the call ends now.
func (p *Proxy) giveUp(callID, pod, holder string, call *callMeta, end mediacontract.SocketEnd) {
	if call.provider == "" || p.handshakeRetries == nil || call.failedHandshakes >= p.handshakeRetries(call.provider) {
		p.endCall(callID, pod, call, end)
		return
	}
	ctx, cancel := owedContext()
	defer cancel()
	switch err := p.leases.UnclaimFailed(ctx, callID, holder); {
	case errors.Is(err, mediacontract.ErrNoAllocation):
		// The call ended or another socket holds it: not this socket's.
		p.log.Info("media socket reached no pod; its call is no longer its own", "call_sid", callID,
			"merchant_id", call.merchant, "provider", call.provider, "pod", pod, "err", err)
		return
	case err != nil:
		p.log.Warn("keeping a call for its provider's retry failed; ending it", "call_sid", callID,
			"merchant_id", call.merchant, "provider", call.provider, "pod", pod, "err", err)
		p.endCall(callID, pod, call, end)
		return
	}
	p.metrics.failovers.WithLabelValues("kept_for_retry").Inc()
	p.log.Info("media socket reached no pod: call kept for the provider's retry", "call_sid", callID,
		"merchant_id", call.merchant, "provider", call.provider, "pod", pod, "failed_handshakes", call.failedHandshakes+1)
}

// endCall releases a call whose socket was never relayed, recording end.
func (p *Proxy) endCall(callID, pod string, call *callMeta, end mediacontract.SocketEnd) {
	end.Closed = time.Now()
	outcome, err := p.releaseCall(callID, end)
	if err != nil {
		p.log.Warn("ending a call whose pods could not be reached failed; its lease will expire", "call_sid", callID,
			"merchant_id", call.merchant, "provider", call.provider, "pod", pod, "err", err)
	}
	p.log.Info("media socket reached no pod: call ended", "call_sid", callID, "merchant_id", call.merchant,
		"provider", call.provider, "pod", pod, "released", end.Ended, "release", outcome)
}

// podFailed records a failure of pod (a dial, a loss mid-call) toward its
// ejection on every replica; off the call path's budget, bounded.
func (p *Proxy) podFailed(pod, addr, reason string) {
	ctx, cancel := owedContext()
	defer cancel()
	ejected, err := p.leases.PodFailed(ctx, pod, reason, p.cfg().ejection())
	if err != nil {
		p.log.Warn("recording a pod failure failed", "pod", pod, "reason", reason, "err", err)
		return
	}
	if ejected {
		p.ejected(pod, addr, reason)
	}
}

// sameInstance reports whether pod still stands for the instance at addr
// (the one a socket dialled): a failure of an instance the name no longer
// stands for (a StatefulSet's replacement registered before the old
// container died) must not eject its replacement.
func (p *Proxy) sameInstance(pod, addr string) bool {
	cur, ok := p.lookup(pod)
	return ok && cur == addr
}

// ejected logs and counts a pod taken out of allocation.
func (p *Proxy) ejected(pod, addr, reason string) {
	p.metrics.ejections.WithLabelValues(reason).Inc()
	p.log.Warn("pod ejected from allocation on every replica until a health probe succeeds",
		"pod", pod, "address", addr, "reason", reason)
}
