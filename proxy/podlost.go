package proxy

import "errors"

// errPodEOF: the pod ended its TCP stream without a close frame.
var errPodEOF = errors.New("pod closed the connection without a close frame")

// podLost ends s because its pod's side died mid-call:
// the client gets closeBadGateway at once, the call is released as the
// socket ends, and the failure counts toward the pod's ejection.
func (p *Proxy) podLost(s *socket, cause error) {
	if !s.markStop(closeBadGateway, "pod lost") {
		return
	}
	s.lost.Store(true)
	p.log.Warn("pod's side of a media socket died mid-call", append(s.attrs(), "err", cause)...)
	if f := s.interrupt.Load(); f != nil {
		(*f)()
	}
}
