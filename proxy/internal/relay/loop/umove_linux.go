//go:build linux

package loop

import (
	"errors"

	"golang.org/x/sys/unix"

	"github.com/edge-voice/edge/proxy/internal/relay"
)

// A socket that may move (relay.Socket.Resume) moves on its uring loop as
// on an epoll loop (emove_linux.go), with the kernel's operations in
// between: when its pod's side dies, the dead pod's connection is shut
// down (its receive and send in the kernel complete) and the provider's
// receive is cancelled; what the dead pod sent and the provider has not
// taken yet still goes to the provider. Once none of the socket's
// operations is left in the kernel (quiet), the host is asked for another
// pod off the loop, and its answer comes back through the loop's inbox:
// the loop relays on to the new pod, the provider's bytes that came
// during the move first, or ends the socket as the pod's loss.

// startMove begins the move of e, whose pod's side died (or left the
// registry).
func (l *uloop) startMove(e *usock) {
	if e.moving || e.done {
		return
	}
	e.moving, e.movedAt = true, l.now
	pfd := e.fds[1]
	d0 := &e.dirs[0]
	// What the dead pod was not given is lost with it, as a write that
	// failed; nothing more is received from it.
	d0.next, d0.recvAfter, d0.owed = nil, false, false
	e.dirs[1].recvAfter = false
	how := unix.SHUT_RDWR
	if f := e.pol.Dirs[0].LeaveFrame(); f != nil && errors.Is(e.s.LostCause(), relay.ErrPodLeft) {
		// A pod that left the registry still serves: it hears the socket
		// go away, not a cut, behind the send in flight if there is one
		// (its connection is shut for writing once that is out, quiet).
		if d0.sending {
			d0.next, how = f, unix.SHUT_RD
		} else {
			relay.RawWrite(pfd, f)
		}
	}
	unix.Shutdown(pfd, how)
	if d0.recving && !d0.sending {
		// The provider's receive waits for its next message: cancelled,
		// so that the move need not wait for it. (One linked behind a
		// send to the dead pod is cancelled by that send's failure.)
		l.sqe().Cancel(e.ud(udRecv), udCancel)
	}
	l.quiet(e)
}

// quiet starts the host's part of e's move once none of e's operations is
// left in the kernel: a completion for the dead pod can then no longer be
// taken for the new pod's.
func (l *uloop) quiet(e *usock) {
	if !e.moving || e.resuming || e.done || e.inflight > 0 {
		return
	}
	unix.Close(e.fds[1])
	e.fds[1] = -1
	e.dirs[1].eof, e.dirs[1].next = false, nil
	if !e.s.CanResume() {
		// A stop, or the client's end, came first: nothing moves.
		l.moveDone(e, moved{fd: -1})
		return
	}
	e.resuming = true
	m := moveOf(e.s, &e.pol)
	go func() {
		out := resumeOff(l.o.Host, e.s, m)
		if !l.send(ucmd{e: e, moved: &out}) && out.fd >= 0 {
			unix.Close(out.fd) // the loop stopped under us, as on the epoll loops
		}
	}()
}

// movingReceived handles a receive's bytes b (res its result) on a moving
// socket: the provider's are kept for the next pod, within one receive
// (no other is made during the move); the dead pod's are dropped. An end
// of the provider's stream ends the move.
func (l *uloop) movingReceived(e *usock, i int, res int32, b []byte, peerEnd bool) {
	if i != 0 {
		return
	}
	e.left = append(e.left, b...)
	switch {
	case res == 0 || peerEnd:
		l.gone(e, 0, relay.EOF)
	case res < 0:
		l.gone(e, 0, relay.Failed)
	}
}

// movingSent handles a send's completion on a moving socket: the dead
// pod's is over; the provider's goes on with what else the dead pod sent
// it, or, failed, is the provider's end.
func (l *uloop) movingSent(e *usock, i int, failed bool) {
	d := &e.dirs[i]
	if i == 0 {
		if b := d.next; b != nil && !failed {
			d.next = nil
			l.sendOut(e, 0, b, false) // the leave frame, startMove
		}
		d.next = nil
		if !failed && d.recving {
			// The send went out before the shutdown: the provider's
			// receive linked behind it runs, and is cancelled as in
			// startMove.
			l.sqe().Cancel(e.ud(udRecv), udCancel)
		}
		return
	}
	if failed {
		d.next = nil
		l.gone(e, 0, relay.Failed)
		return
	}
	if b := d.next; b != nil {
		d.next = nil
		l.sendOut(e, 1, b, false)
	}
}

// moveDone ends e's move: on to the new pod when there is one, else the
// dead pod's end is recorded after all and the socket ends as it would
// have (1014 to the provider when that end costs the pod).
func (l *uloop) moveDone(e *usock, m moved) {
	e.moving, e.resuming = false, false
	left := e.left
	e.left = nil
	if m.fd < 0 {
		l.o.ResumeFailed(e.s)
		e.dirs[1].eof = true // the pod's stream is over
		if e.s.Stopped() {
			l.beginClose(e)
			return
		}
		e.s.Begin(l.now)
		e.closing = true
		l.settle(e)
		return
	}
	e.s.Resumed(nil)
	e.fds[1] = m.fd
	e.mover.moved(&e.pol, l.now)
	// The provider hears the notice first, then the new pod's early
	// bytes; the new pod's receive follows them.
	out := e.wire(1, m.notice)
	if len(m.early) > 0 {
		if b := e.look(&e.pol, 1, m.early); len(b) > 0 {
			n, v := e.pol.Dirs[1].Relayed(e.s, b)
			out = append(out, e.wire(1, b[:n])...)
			if v.Code != 0 {
				e.s.MarkStop(v.Code, v.Reason)
			}
		}
	}
	if len(out) > 0 {
		l.sendOut(e, 1, out, true)
	} else {
		l.recv(e, 1, false)
	}
	// The provider's bytes that came during the move go to the new pod.
	n, v := 0, relay.Verdict{}
	if b := e.look(&e.pol, 0, left); len(b) > 0 {
		n, v = e.pol.Dirs[0].Relayed(e.s, b)
		left = b
	}
	if v.Code != 0 {
		e.s.MarkStop(v.Code, v.Reason)
	}
	if n > 0 {
		l.sendOut(e, 0, left[:n], v.Code == 0)
	} else if v.Code == 0 {
		l.recv(e, 0, false)
	}
	if e.s.Stopped() {
		// A stop that came during the move is delivered on the new leg.
		l.beginClose(e)
	}
}
