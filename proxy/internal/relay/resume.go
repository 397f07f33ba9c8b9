package relay

import (
	"crypto/rand"
	"errors"
	"net"

	"github.com/edge-voice/edge/proxy/internal/wsproto"
)

// ErrPodLeft is the cause of a move whose pod left the registry while it
// still served (Env.PodLeft): that pod is told the socket goes away
// (LeaveFrame) rather than cut off.
var ErrPodLeft = errors.New("the pod left the registry")

// A socket that may move (Socket.Resume) does, when its pod's own end
// would cost the pod (Closing.WouldCost): the relay stops both directions
// at once, without a close frame or a FIN to anybody, asks the host for
// another pod (Host.Resume) and relays on. The dead pod's end is never
// recorded in the closing machine: for the client, and for who ends the
// socket later, the new pod is the same side. When the move fails the end
// is recorded after all (ResumeFailed) and the socket ends as it would
// have.

// beginResume starts the move for the pod's end, how and why (started),
// unless one is under way already (a second report of the same death:
// moving, nothing more to do) or that end would not cost the pod (neither:
// record it as usual). The caller interrupts the relay once started.
func (s *Socket) beginResume(how End, cause error) (moving, started bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.resuming.Load() {
		return true, false
	}
	if !s.closing.WouldCost(Pod) {
		return false, false
	}
	s.lostHow, s.lostCause = how, cause
	s.resuming.Store(true)
	return true, true
}

// Resuming reports whether the socket is moving to another pod: its
// directions stop where they are, without ending it.
func (s *Socket) Resuming() bool { return s.resuming.Load() }

// LostCause is why the pod's side ended, for a socket that is moving.
func (s *Socket) LostCause() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lostCause
}

// Resumed puts the new pod's connection in place: the socket relays on.
// A stop that came during the move is the relay's to deliver (Stopped).
func (s *Socket) Resumed(pod net.Conn) {
	s.SetPod(pod)
	s.resuming.Store(false)
}

// SetPod sets the pod's connection: the host's, before the relay has the
// socket; a loop's (nil: its own fd carries the pod), as it takes it.
func (s *Socket) SetPod(pod net.Conn) {
	s.mu.Lock()
	s.pod = pod
	s.mu.Unlock()
}

// ResumeFailed records the dead pod's end after all: when it costs the
// pod (a stop that came during the move takes the blame away,
// Closing.Ended) the host hears of it, and the socket has 1014 as its stop
// code. The socket ends from here as any other.
func (e *Env) ResumeFailed(s *Socket) (lost bool) {
	s.mu.Lock()
	how, cause := s.lostHow, s.lostCause
	s.mu.Unlock()
	s.resuming.Store(false)
	if !s.Ended(Pod, how) {
		return false
	}
	e.Host.PodLost(s, cause)
	return true
}

// PodConn is the pod's connection now (it changes when the socket moves).
func (s *Socket) PodConn() net.Conn {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.pod
}

// CanResume reports whether the socket may still move: the client is still
// there and nothing ended the socket meanwhile (the dead pod's end would
// still cost it).
func (s *Socket) CanResume() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.resuming.Load() && s.closing.WouldCost(Pod)
}

// PodLeft moves s as if its pod had died, for a pod that left the registry
// while the socket still flowed (the pod is not to blame: the host knows).
// It reports whether the move began: false when s may not move or its end
// already began.
func (e *Env) PodLeft(s *Socket, cause error) bool {
	if !s.Resume {
		return false
	}
	moving, started := s.beginResume(Failed, cause)
	if started {
		s.Interrupt()
	}
	return moving
}

// LeaveFrame is the close frame (1001) edge sends a pod it leaves while the
// pod still serves, for a socket whose call moved away (ErrPodLeft); nil
// when d, the client's direction, left the pod inside a frame.
func (d *DirPolicy) LeaveFrame() []byte {
	if d.src != Client || !d.atBoundary() {
		return nil
	}
	mask := new([4]byte)
	rand.Read(mask[:])
	return wsproto.CloseFrame(wsproto.CloseGoingAway, "call moved to another pod", mask)
}
