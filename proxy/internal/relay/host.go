package relay

import (
	"errors"
	"log/slog"
	"net"
)

// Host is what a relay needs of the component that hands it sockets,
// called on a socket's end and on its pod's death (to report it, or to
// move the socket to another pod), never per message.
type Host interface {
	// Ended is called once per socket, when its relay is done with it
	// and has closed both connections: the closing machine's Result is
	// final, c is what was relayed (zero when the relay never started).
	Ended(s *Socket, c Counts)
	// PodLost is called when the pod's side of s died mid-call, cause
	// saying why, and that end costs the pod (Closing.Ended): for the
	// socket's log line. Ended follows later.
	PodLost(s *Socket, cause error)
	// Resume moves s, whose pod's side died mid-call, to another pod
	// (Socket.Resume), as m says it stands: it returns the new pod's
	// connection, past its 101 and with the stream's opening replayed to
	// it, and what the relay writes first. An error ends the socket as
	// the pod's loss. Called on the relay's goroutine for the socket,
	// which waits.
	Resume(s *Socket, m Move) (Moved, error)
}

// Moved is where a socket relays on after a move (Host.Resume).
type Moved struct {
	// Pod is the new pod's connection.
	Pod net.Conn
	// Early are the bytes the pod sent behind its 101.
	Early []byte
	// Notice are whole frames for the client, written before anything of
	// the new pod (the provider told to drop what it holds of the dead
	// one; plugins.Description.ResumeNotice). The client's direction is
	// between messages after any move, so they may go there.
	Notice []byte
}

// Move is how a socket whose pod died stands, for Host.Resume.
type Move struct {
	// Opening is the client's first bytes as DirPolicy.Keep kept them,
	// nil when they are not whole (not all come yet, or too big).
	Opening []byte
	// Torn: the dead pod left the client inside a message; no other
	// pod's messages may follow (RFC 6455 5.4).
	Torn bool
	// Cause is how the pod's side ended.
	Cause error
	// Relayed is what the socket relayed so far, every pod's share
	// included: whether the dead pod ever answered.
	Relayed Counts
}

// Env is what the host gives a relay at construction.
type Env struct {
	Host Host
	// Limits reads the host's limits for a socket that starts now.
	Limits func() Limits
	// Dirs are the per-direction counters, client_to_pod then
	// pod_to_client.
	Dirs [2]Counters
	Log  *slog.Logger
}

// ErrPodEOF: the pod ended its TCP stream without a close frame.
var ErrPodEOF = errors.New("pod closed the connection without a close frame")

// ErrPodStalled: a write to the pod made no progress for
// proxy.pod_write_timeout while the client read.
var ErrPodStalled = errors.New("pod stopped reading")

// PodEnded records that the pod's stream ended, how (cause says why, for
// the log), and reports whether that costs the pod (Closing.Ended: its
// own end while the client is still there, before any close frame and
// before edge's stop). If it does, the host hears of it, and the relay is
// interrupted: the client gets 1014 at once, and the host releases the
// call as pod_lost when the socket ends.
func (e *Env) PodEnded(s *Socket, how End, cause error) bool {
	if s.Resume {
		if moving, started := s.beginResume(how, cause); moving {
			// Moving to another pod: nothing is owed, nobody blamed yet.
			if started {
				s.Interrupt()
			}
			return false
		}
	}
	if !s.Ended(Pod, how) {
		return false
	}
	e.Host.PodLost(s, cause)
	s.Interrupt()
	return true
}

// SideEnded records that side's stream ended, how: through PodEnded for
// the pod. It reports whether that cost the pod.
func (e *Env) SideEnded(s *Socket, side Side, how End, cause error) bool {
	if side == Pod {
		return e.PodEnded(s, how, cause)
	}
	s.Ended(side, how)
	return false
}
