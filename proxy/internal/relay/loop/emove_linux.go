//go:build linux

package loop

import (
	"errors"
	"net"

	"golang.org/x/sys/unix"

	"github.com/edge-voice/edge/proxy/internal/relay"
)

// A socket that may move (relay.Socket.Resume) moves on its loop when its
// pod's side dies mid-call: the loop takes both connections out of its
// epoll set, closes the dead pod's, and hands the move (Host.Resume, which
// waits on Redis and dials) to a goroutine of its own, so that the loop's
// other sockets never wait on it. The provider's connection stays open and
// unread meanwhile (TCP holds what it sends; bytes still owed to it wait
// in its direction). The goroutine sends the outcome back through the
// loop's inbox, and the loop, at a message boundary of the provider's
// stream, either relays on to the new pod (the provider told first what
// the plugin declares, then the new pod's early bytes) or ends the socket
// as the pod's loss.

// moved is a move's outcome, sent back to the loop.
type moved struct {
	fd     int // the new pod's, off Go's netpoller (-1: no move)
	early  []byte
	notice []byte
}

// startMove begins the move of e, whose pod's side died (or left the
// registry): the dead pod's connection is closed, the provider's is out
// of the set, and the host is asked for another pod off the loop.
func (l *eloop) startMove(e *esock) {
	if e.moving || e.done {
		return
	}
	e.moving = true
	pfd := e.fds[1]
	if f := e.pol.Dirs[0].LeaveFrame(); f != nil && e.dirs[0].pend == nil && errors.Is(e.s.LostCause(), relay.ErrPodLeft) {
		// A pod that left the registry still serves: it hears the socket
		// go away, not a cut (best effort: a close frame fits any
		// socket buffer that is not full).
		relay.RawWrite(pfd, f)
	}
	for _, fd := range e.fds {
		if fd >= 0 && l.socks[int32(fd)] == e {
			delete(l.socks, int32(fd))
			unix.EpollCtl(l.epfd, unix.EPOLL_CTL_DEL, fd, nil)
		}
	}
	if pfd >= 0 {
		unix.Close(pfd)
	}
	e.fds[1], e.mask = -1, [2]uint32{}
	// What the dead pod was not given is lost with it, as a write that
	// failed; the rest of its message is not the new pod's (drop).
	e.dirs[0].pend, e.dirs[0].owed = nil, false
	e.dirs[1].eof = false
	if !e.s.CanResume() {
		// A stop, or the client's end, came first: nothing moves.
		l.moveDone(e, moved{fd: -1})
		return
	}
	m := moveOf(e.s, &e.pol)
	go func() {
		out := resumeOff(l.o.Host, e.s, m)
		if !l.send(ecmd{e: e, moved: &out}) && out.fd >= 0 {
			// The loop stopped under us (cannot happen while the socket
			// is admitted): do not leak the fd.
			unix.Close(out.fd)
		}
	}()
}

// moveOf is how s stands for the host's move, p its policy.
func moveOf(s *relay.Socket, p *relay.Policy) relay.Move {
	opening, _ := p.Dirs[0].Kept()
	return relay.Move{Opening: opening, Torn: !p.Dirs[1].BetweenMessages(), Cause: s.LostCause(), Relayed: p.Counts()}
}

// resumeOff asks h for another pod for s, off the loop (either loop's),
// and returns the new pod's connection out of Go's netpoller (fd -1: no
// move).
func resumeOff(h relay.Host, s *relay.Socket, m relay.Move) moved {
	mv, err := h.Resume(s, m)
	if err != nil {
		return moved{fd: -1}
	}
	tc, ok := mv.Pod.(*net.TCPConn)
	if !ok {
		mv.Pod.Close()
		return moved{fd: -1}
	}
	fd, err := detach(tc)
	if err != nil {
		tc.Close() // detach leaves it open on failure
		return moved{fd: -1}
	}
	return moved{fd: fd, early: mv.Early, notice: mv.Notice}
}

// moveDone ends e's move: on to the new pod when there is one, else the
// dead pod's end is recorded after all and the socket ends as it would
// have (1014 to the provider when that end costs the pod).
func (l *eloop) moveDone(e *esock, m moved) {
	e.moving = false
	cfd := e.fds[0]
	if m.fd < 0 {
		l.o.ResumeFailed(e.s)
		e.dirs[1].eof = true // the pod's stream is over
		if !l.watch(e, cfd, 0) {
			return
		}
		if e.s.Stopped() {
			l.beginClose(e)
			return
		}
		// The dead pod's end cost nobody (the client's end came first):
		// the socket ends as that side's end, without a close frame.
		e.s.Begin(l.now)
		e.closing = true
		l.settle(e)
		return
	}
	e.s.Resumed(nil)
	e.fds[1] = m.fd
	e.mover.moved(&e.pol, l.now)
	d := &e.dirs[1]
	if len(m.notice) > 0 {
		// Whole frames, between messages of the provider's stream (a
		// torn stream never moves); not relayed bytes: the policy never
		// sees them.
		d.pend = e.wire(1, d.pend, m.notice)
	}
	if len(m.early) > 0 {
		d.pend = l.relayEarly(e, 1, d.pend, m.early)
	}
	if len(d.pend) == 0 {
		d.pend = nil
	} else {
		d.since = l.now
	}
	if !l.watch(e, cfd, 0) || !l.watch(e, m.fd, 1) {
		return
	}
	if e.s.Stopped() {
		// A stop that came during the move is delivered on the new leg.
		l.beginClose(e)
		return
	}
	if d.pend != nil {
		l.flush(e, d)
	}
}

// watch puts fds[i] back in the loop's set, with the interest e wants now;
// false when it could not, and the socket ended.
func (l *eloop) watch(e *esock, fd, i int) bool {
	e.mask[i] = e.want(i)
	l.socks[int32(fd)] = e
	if err := unix.EpollCtl(l.epfd, unix.EPOLL_CTL_ADD, fd, &unix.EpollEvent{Events: e.mask[i], Fd: int32(fd)}); err != nil {
		l.o.Log.Warn("epoll relay: cannot watch a media socket", "err", err, "call_sid", e.s.CallID)
		l.teardown(e, relay.None)
		return false
	}
	return true
}
