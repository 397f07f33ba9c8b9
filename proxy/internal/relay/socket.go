package relay

import (
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// Socket is one relayed media stream as its relay sees it: the client's
// connection and the pod's, when it started, and its closing state
// machine. The relay owns the connections; what other goroutines (the
// host's renewal and drain) touch is atomic or under mu. The host keeps
// what the relay does not need (the call, its claim, its span) beside it.
type Socket struct {
	CallID string // for the relays' log lines
	// Client is the provider's connection, the relay's from its start.
	Client  net.Conn
	Started time.Time
	// pod is the pod's connection: set before the relay has the socket
	// (SetPod), changed by a move (Resumed), read under mu (PodConn) since
	// a stop's interrupt on another goroutine may read it as it changes.
	// Ext: the pod's 101 named an extension, whose frames may carry the
	// reserved bits.
	Ext bool
	// Resume: when the pod's side dies mid-call, the relay asks the host
	// for another pod (Host.Resume) instead of ending the socket, and the
	// client never sees the death. Set by the host before the relay has
	// the socket; every relay honours it.
	// Opening is how many of the client's first messages the relay keeps
	// for the new pod, within OpeningMax bytes.
	Resume              bool
	Opening, OpeningMax int
	// Legs, for a socket that may move, are the pod's messages its
	// provider answers by name (legs.go): the answers to a dead pod's
	// are not relayed to the next. None: every message is relayed.
	Legs []LegEvent
	// PodPingInterval and PodSilence, when PodLiveness is set, replace
	// the host's Limits of the same names for this socket (the call's
	// tier has its own).
	PodLiveness                 bool
	PodPingInterval, PodSilence time.Duration

	// closing is the socket's closing state machine: who ended it, with
	// which code, what edge owes each side, whether the pod is to blame.
	// Its events come from the relay's reads and writes and from edge's
	// stops on other goroutines (renewal, drain), on close events only,
	// never per message: mu serialises them.
	mu      sync.Mutex
	pod     net.Conn
	closing Closing
	// stopped mirrors closing.Stopped() for the relays' checks on their
	// paths (a read that raced a stop) without the lock.
	stopped atomic.Bool
	// interrupt tells the relay that the socket has a stop code (set once
	// the relay has the socket).
	interrupt atomic.Pointer[func()]
	// resuming: the pod's side died and the socket is moving to another
	// pod (resume.go); the end that started it, not yet recorded in
	// closing, is lostHow and lostCause.
	resuming  atomic.Bool
	lostHow   End
	lostCause error
}

// LostReason sets the reason of the 1014 a socket whose pod was lost
// sends the client (Closing.Relabel): the host says why the call did not
// move, before the relay writes the close frame.
func (s *Socket) LostReason(reason string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closing.Relabel(reason)
}

// Limits are the host's limits lim as they apply to s.
func (s *Socket) Limits(lim Limits) Limits {
	if s.PodLiveness {
		lim.PodPingInterval, lim.PodSilence = s.PodPingInterval, s.PodSilence
	}
	return lim
}

// Clock is the goroutine relay's policy clock: monotonic nanoseconds since
// the socket started.
func (s *Socket) Clock() int64 { return int64(time.Since(s.Started)) }

// Stopped reports whether the socket has a stop code (edge's, or 1014
// for a lost pod), without the lock.
func (s *Socket) Stopped() bool { return s.stopped.Load() }

// Stop asks the relay to close both sides with code, at a frame boundary.
// The first code wins. Safe from any goroutine.
func (s *Socket) Stop(code int, reason string) {
	if !s.MarkStop(code, reason) {
		return
	}
	s.Interrupt()
}

// MarkStop records edge's stop code unless another came first (or the
// pod was lost): the relay's own verdicts, which it acts on at once.
func (s *Socket) MarkStop(code int, reason string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.closing.Stop(code, reason) {
		return false
	}
	s.stopped.Store(true)
	return true
}

// SetInterrupt installs the relay's wake-up; a stop that came before it
// (a drain racing the handshake) is delivered now. Calling f twice is
// harmless for every relay.
func (s *Socket) SetInterrupt(f func()) {
	s.interrupt.Store(&f)
	if s.stopped.Load() {
		f()
	}
}

// Interrupt wakes the relay up, if it has installed its wake-up.
func (s *Socket) Interrupt() {
	if f := s.interrupt.Load(); f != nil {
		(*f)()
	}
}

// Ended records that side's stream ended, how, and reports whether that
// costs the pod (Closing.Ended): the socket then has 1014 as its stop
// code.
func (s *Socket) Ended(side Side, how End) (lost bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	lost = s.closing.Ended(side, how)
	if lost {
		s.stopped.Store(true)
	}
	return lost
}

// TornDown records that the relay closed both connections, by's failure
// ending the socket (None: none, or edge's): an end found then costs no
// pod.
func (s *Socket) TornDown(by Side) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closing.TornDown()
	s.closing.Ended(by, Failed)
}

// Begin, Shut and Over are the close's stages on a loop's clock
// (Closing's Begin, Shut, Over).
func (s *Socket) Begin(now int64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closing.Begin(now)
}

func (s *Socket) Shut(now int64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closing.Shut(now)
}

func (s *Socket) Over(now int64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closing.Over(now)
}

// CloseFrame records a close frame from side from, with code.
func (s *Socket) CloseFrame(from Side, code int) {
	s.mu.Lock()
	s.closing.CloseFrame(from, code)
	s.mu.Unlock()
}

// Owes is the close code, and its reason, edge owes side to (0: none).
func (s *Socket) Owes(to Side) (int, string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closing.Owes(to)
}

// Result is how the socket ended, as far as its relay told.
func (s *Socket) Result() Result {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closing.Result()
}
