package proxy

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/edge-voice/edge/internal/mediacontract"
	"github.com/edge-voice/edge/proxy/internal/relay"
	"github.com/edge-voice/edge/proxy/internal/wsproto"
)

// A pod lost mid-call, the caller kept (proxy.resume). Edge owns the
// call's allocation and holds the provider's socket: when the pod's side
// dies while the call streams, nothing forces edge to hang up on the
// caller. A call that opted in moves to another pod of its chain in one
// script (Leases.ResumeCall), edge dials it as it dialled the first, with
// ResumedHeader, gives it the stream's opening again (the messages the
// provider's plugin names, as the provider sent them) and relays on. The
// caller hears the gap; the provider's socket never closes. Which bytes
// the new pod gets, and when a move cannot be made cleanly, is the
// relay's (package relay/pump); what is allocated, dialled and replayed
// is decided here.

// ResumedHeader tells a pod that it takes over a call whose earlier pod
// died mid-call: its value counts the call's moves so far, this one
// included. The pod gets the stream's opening messages again, then the
// media from where the provider is now. A client's header of that name
// never reaches a pod.
const ResumedHeader = "Edge-Resumed"

// maxOpeningBytes bounds what a socket keeps of its stream's opening, for
// its whole life: a Twilio start message with custom parameters is a few
// KiB, and a client that sends more cannot make every socket of a full
// replica hold much (10,000 sockets: at most 160 MiB).
const maxOpeningBytes = 16 << 10

// resumeOutcomes label edge_proxy_resumptions_total.
var resumeOutcomes = []string{
	"resumed",          // the call relays on with a new pod
	"no_pod",           // the call's chain has no pod left
	"dial_failed",      // every pod tried could not be reached
	"limit",            // proxy.resume.max_per_call moves already
	"poison",           // the pod moved to died of the replayed stream (proxy.resume.poison_window)
	"rate_limited",     // the merchant's moves on this replica (proxy.resume.max_per_merchant_per_minute)
	"torn",             // the dead pod left the client inside a message
	"no_opening",       // the stream's opening had not all come, or was too big
	"opening_mismatch", // the opening is not the messages the plugin names
	"refused",          // the new pod refused the upgrade (4xx), or its 101 negotiated what the client never agreed to
	"error",            // Redis failed, or the call ended meanwhile
	"not_enabled",      // the call may not move (proxy.resume, its provider's opening): it ends with its pod
}

// redial is what dialling another pod for a socket needs of its client's
// request, kept only for sockets that may move.
type redial struct {
	uri, key string
	header   http.Header
	// protocol is the subprotocol the first pod chose: the client holds
	// it, so every later pod must choose it too.
	protocol string
	// opening names the events of the stream's opening messages.
	opening []string
	// notices are sent to the client after each move (AfterMove).
	notices []string
}

// mayResume decides, at a socket's start, whether it may move, and sets
// it up to (relay.Socket.Resume): the call opted in (proxy.resume), its
// provider names its stream's opening, and the pod's 101 negotiated no
// extension (a new pod's frames could not follow its compression state).
func (p *Proxy) mayResume(s *socket, r *http.Request, uri string, up *upstream) {
	cfg := p.cfg()
	if s.Ext || s.call.provider == "" || p.opening == nil || !cfg.Resume.covers(s.call.merchant, s.call.source) {
		return
	}
	events := p.opening(s.call.provider)
	if len(events) == 0 {
		return
	}
	ctx := context.Background()
	if s.span != nil {
		ctx = trace.ContextWithSpan(ctx, s.span)
	}
	s.redial = &redial{uri: uri, key: r.Header.Get("Sec-WebSocket-Key"), header: podHeader(ctx, r, p.forwarded, p.clientUpgrade(s.call.provider)),
		protocol: up.resp.Header.Get("Sec-WebSocket-Protocol"), opening: events}
	s.Resume, s.Opening, s.OpeningMax = true, len(events), maxOpeningBytes
	if p.afterMove != nil {
		a := p.afterMove(s.call.provider)
		s.redial.notices, s.Legs = a.Notices, relayLegs(a.Legs)
	}
}

// podLeft moves a socket whose pod left the registry (deleted from
// Kubernetes, removed from the static list) while it still flowed, as if
// the pod had died: it reports whether the move began (false: the socket may not
// move, or its end already began, and it ends as a lost lease).
func (p *Proxy) podLeft(s *socket) bool {
	if s.redial == nil {
		return false
	}
	s.podGone.Store(true)
	p.log.Info("media socket's pod left the registry mid-call: moving the call", s.attrs()...)
	return p.relayEnv.PodLeft(&s.Socket, relay.ErrPodLeft)
}

// markResumable tells every replica that s moves its call (a pod's removal
// leaves the call to it). Without it a pod death still moves the call;
// only a removal of a live pod from the registry ends it, as it would
// before the mark lands.
func (p *Proxy) markResumable(s *socket) {
	ctx, cancel := context.WithTimeout(context.Background(), p.cfg().Resume.Budget)
	defer cancel()
	if err := p.leases.MarkResumable(ctx, s.CallID, s.holder); err != nil {
		p.log.Warn("marking a call as moving with its socket failed: its pod's removal from the registry will end it", append(s.attrs(), "err", err)...)
	}
}

// Resume moves a socket whose pod died mid-call (relay.Host).
func (h *relayHost) Resume(rs *relay.Socket, m relay.Move) (relay.Moved, error) {
	p := (*Proxy)(h)
	s := p.socketOf(rs)
	start := time.Now()
	p.metrics.podsLost.WithLabelValues(lossCause(m.Cause)).Inc()
	up, outcome, err := p.resume(s, m)
	p.metrics.resumptions.WithLabelValues(outcome).Inc()
	if err != nil {
		s.moveOutcome = outcome
		p.log.Warn("media socket's pod died mid-call and the call could not move: ending it", append(s.attrs(),
			"outcome", outcome, "cause", m.Cause, "err", err)...)
		return relay.Moved{}, err
	}
	s.moveOutcome = ""
	gap := time.Since(start)
	p.metrics.resumeSeconds.Observe(gap.Seconds())
	p.log.Info("media socket's pod died mid-call: the call moved to another pod, the caller stayed", append(s.attrs(),
		"from", s.lostPod, "cause", m.Cause, "resumptions", s.resumes, "took", gap.Round(time.Microsecond))...)
	return relay.Moved{Pod: up.conn, Early: up.early, Notice: up.notice}, nil
}

// resume allocates another pod for s's call, dials it and replays the
// stream's opening to it; the outcome labels the metric.
func (p *Proxy) resume(s *socket, m relay.Move) (*upstream, string, error) {
	cfg := p.cfg()
	switch {
	case s.redial == nil:
		return nil, "error", errors.New("socket was not set up to move")
	case m.Torn:
		return nil, "torn", errors.New("the dead pod left the client inside a message")
	case m.Opening == nil:
		return nil, "no_opening", errors.New("the stream's opening messages had not all come, or were too big to keep")
	case s.resumes > 0 && m.Relayed.BytesOut == s.outAtResume && time.Since(s.resumedAt) < cfg.Resume.PoisonWindow &&
		!errors.Is(m.Cause, relay.ErrPodLeft):
		// A circuit, not a loop: the stream's opening is the likely
		// killer, and another pod would die of it too.
		return nil, "poison", fmt.Errorf("the pod the call moved to died %v after the replay, having sent nothing (proxy.resume.poison_window)",
			time.Since(s.resumedAt).Round(time.Millisecond))
	case s.resumes >= cfg.Resume.MaxPerCall:
		return nil, "limit", fmt.Errorf("the call moved %d times already (proxy.resume.max_per_call)", s.resumes)
	case !p.moves.take(s.call.merchant, cfg.Resume.MaxPerMerchantPerMinute):
		return nil, "rate_limited", fmt.Errorf("the merchant's calls moved %d times in the last minute on this replica (proxy.resume.max_per_merchant_per_minute)",
			cfg.Resume.MaxPerMerchantPerMinute)
	}
	replay, msgs, err := openingFrames(m.Opening, s.redial.opening)
	if err != nil {
		return nil, "opening_mismatch", err
	}
	notice, missing := noticeFrames(s.redial.notices, msgs, s.redial.opening)
	if len(missing) > 0 {
		p.log.Warn("a notice the provider's plugin declares for a move names what the stream's opening lacks: it is not sent",
			append(s.attrs(), "missing", missing)...)
	}
	ctx, cancel := context.WithTimeout(context.Background(), cfg.Resume.Budget)
	defer cancel()
	if s.span != nil {
		ctx = trace.ContextWithSpan(ctx, s.span)
	}
	dead := s.podName()
	ej := cfg.ejection()
	// The death is the dialled instance's: a replacement the name stands
	// for by now is not blamed.
	pod, ejected, err := p.leases.ResumeCall(ctx, s.CallID, dead, s.holder, ej, p.sameInstance(dead, s.addr))
	// The dead pod's failure is recorded whatever became of the move (of
	// a pod that left the registry, or an instance replaced, nothing is):
	// the socket's end must not count it again.
	s.lossRecorded = err == nil || errors.Is(err, mediacontract.ErrNoOtherPod)
	if ejected {
		p.ejected(dead, s.addr, "lost")
	}
	switch {
	case errors.Is(err, mediacontract.ErrNoOtherPod):
		return nil, "no_pod", err
	case err != nil:
		return nil, "error", err
	}
	moveEvent(ctx, dead, pod, "lost")
	s.lostPod = dead
	s.setPod(pod)
	s.resumes++
	h := s.redial.header.Clone()
	h.Set(ResumedHeader, fmt.Sprint(s.resumes))
	for attempt := 1; ; attempt++ {
		up, addr, err := p.dialPod(ctx, cfg.DialTimeout, pod, s.redial.uri, s.redial.key, h)
		if err == nil {
			if err := p.startResumed(up, s, replay); err != nil {
				up.conn.Close()
				return nil, "refused", err
			}
			s.addr = up.addr
			s.resumedAt, s.outAtResume = time.Now(), m.Relayed.BytesOut
			up.notice = notice
			return up, "resumed", nil
		}
		if code, ok := requestRefused(err); ok {
			// The request edge built is refused: another pod would
			// refuse it too, and this one is not to blame.
			return nil, "refused", fmt.Errorf("the new pod refused the upgrade (%d): %w", code, err)
		}
		reason := dialReason(err)
		p.metrics.dialFailures.WithLabelValues(reason).Inc()
		p.log.Warn("media socket could not reach the pod its call moved to", append(s.attrs(),
			"address", addr, "reason", reason, "attempt", attempt, "err", err)...)
		if attempt >= cfg.ConnectAttempts || ctx.Err() != nil {
			p.podFailed(pod, addr, reason)
			return nil, "dial_failed", err
		}
		next, ejected, merr := p.leases.MoveCall(ctx, s.CallID, pod, s.holder, reason, ej)
		if ejected {
			p.ejected(pod, addr, reason)
		}
		if merr != nil {
			return nil, "dial_failed", errors.Join(err, merr)
		}
		moveEvent(ctx, pod, next, reason)
		pod = next
		s.setPod(pod)
	}
}

// startResumed checks the new pod's 101 against what the client agreed to
// with the first pod, and gives the pod the stream's opening.
func (p *Proxy) startResumed(up *upstream, s *socket, replay []byte) error {
	if up.resp.Header.Get("Sec-WebSocket-Extensions") != "" {
		return errors.New("the new pod negotiated an extension the client never agreed to")
	}
	if got := up.resp.Header.Get("Sec-WebSocket-Protocol"); got != s.redial.protocol {
		return fmt.Errorf("the new pod chose subprotocol %q, the client holds %q", got, s.redial.protocol)
	}
	up.conn.SetWriteDeadline(time.Now().Add(p.cfg().DialTimeout))
	defer up.conn.SetWriteDeadline(noDeadline)
	if _, err := up.conn.Write(replay); err != nil {
		return fmt.Errorf("replay the stream's opening to the new pod: %w", err)
	}
	return nil
}

// openingFrames are the stream's opening messages, read from opening (the
// client's first bytes as the relay kept them), checked against the
// events the provider's plugin names, and framed again for a new pod
// (masked afresh, as a client's frames are).
func openingFrames(opening []byte, events []string) ([]byte, []wsproto.Message, error) {
	msgs, err := wsproto.FirstMessages(opening, len(events))
	if err != nil {
		return nil, nil, fmt.Errorf("read the stream's opening: %w", err)
	}
	var out []byte
	for i, m := range msgs {
		var head struct {
			Event string `json:"event"`
		}
		if m.Opcode != wsproto.OpText || json.Unmarshal(m.Payload, &head) != nil || head.Event != events[i] {
			return nil, nil, fmt.Errorf("the stream's message %d is not the %q event its provider opens with", i+1, events[i])
		}
		var mask [4]byte
		rand.Read(mask[:])
		out = append(out, wsproto.Frame(true, wsproto.OpText, m.Payload, &mask)...)
	}
	return out, msgs, nil
}
