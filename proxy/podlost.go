package proxy

import (
	"errors"

	"github.com/edge-voice/edge/proxy/internal/relay"
)

// errPodEOF: the pod ended its TCP stream without a close frame.
var errPodEOF = errors.New("pod closed the connection without a close frame")

// podEnded records that the pod's stream ended, how (cause says why, for
// the log), and reports whether that costs the pod (relay.Closing.Ended:
// its own end while the client is still there, before any close frame and
// before edge's stop). If it does, the client gets closeBadGateway at
// once, the call is released as pod_lost when the socket ends, and the
// failure counts toward the pod's ejection.
func (p *Proxy) podEnded(s *socket, how relay.End, cause error) bool {
	if !s.ended(relay.Pod, how) {
		return false
	}
	p.log.Warn("pod's side of a media socket died mid-call", append(s.attrs(), "err", cause)...)
	if f := s.interrupt.Load(); f != nil {
		(*f)()
	}
	return true
}

// sideEnded records that side's stream ended, how: through podEnded for
// the pod. It reports whether that cost the pod.
func (p *Proxy) sideEnded(s *socket, side relay.Side, how relay.End, cause error) bool {
	if side == relay.Pod {
		return p.podEnded(s, how, cause)
	}
	s.ended(side, how)
	return false
}
