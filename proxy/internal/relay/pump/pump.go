package pump

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"time"

	"github.com/edge-voice/edge/proxy/internal/relay"
)

// Relay is the goroutine relay: two copy goroutines per socket on Go's
// netpoller. It holds no sockets of its own; each lives in its goroutines
// until its end, which it reports to the host.
type Relay struct {
	env relay.Env
}

// New returns a goroutine relay serving env's host.
func New(env relay.Env) *Relay { return &Relay{env: env} }

var (
	aLongTimeAgo = time.Unix(1, 0)
	noDeadline   time.Time
)

// Add relays s from now on, until it ends, then calls the host's Ended:
// podEarly are the pod's bytes read behind its 101, early the client's
// behind its handshake.
func (r *Relay) Add(s *relay.Socket, podEarly, early []byte) {
	s.SetInterrupt(func() {
		pod := s.PodConn()
		if s.Resuming() {
			// Both directions stop where they are; the client hears
			// nothing, and a write to the dead pod gives up. A write
			// to a client that does not read is bounded as in a close:
			// the move waits for it.
			s.Client.SetReadDeadline(aLongTimeAgo)
			s.Client.SetWriteDeadline(time.Now().Add(relay.CloseGrace))
			pod.SetReadDeadline(aLongTimeAgo)
			pod.SetWriteDeadline(aLongTimeAgo)
			return
		}
		// A write blocked on a peer that does not read would never see
		// the read deadlines: bound it, as the loops' close grace does.
		grace := time.Now().Add(relay.CloseGrace)
		s.Client.SetWriteDeadline(grace)
		pod.SetWriteDeadline(grace)
		s.Client.SetReadDeadline(aLongTimeAgo)
		pod.SetReadDeadline(aLongTimeAgo)
	})
	go r.bridge(s, podEarly, early)
}

// bridge relays s until it ends, then hands it to the host: one leg per
// pod, more than one when its pod's side dies and the socket moves
// (relay.Socket.Resume). What is relayed, counted and refused is the
// policy's; this file only moves bytes and turns the policy's clock into
// read deadlines.
func (r *Relay) bridge(s *relay.Socket, podEarly, early []byte) {
	lim := s.Limits(r.env.Limits())
	var pol relay.Policy
	pol.Init(lim, &r.env.Dirs, s.Clock(), s.Ext)
	// taps read the messages of a socket whose provider answers its
	// pods' messages by name (relay.Legs), [0] the client's, [1] the pod's.
	var legs *relay.Legs
	var taps [2]*relay.Tap
	if s.Resume {
		pol.Dirs[0].Keep(s.Opening, s.OpeningMax)
		if len(s.Legs) > 0 {
			legs = relay.NewLegs(s.Legs)
			taps = [2]*relay.Tap{relay.NewTap(legs, relay.Client), relay.NewTap(legs, relay.Pod)}
		}
	}
	resumed := false
	var notice []byte
	for {
		pod := s.PodConn()
		toClient := direction{src: pod, dst: s.Client, pol: &pol, d: &pol.Dirs[1], wr: newWriter(s.Client), tap: taps[1], notice: notice}
		toPod := direction{src: s.Client, dst: pod, pol: &pol, d: &pol.Dirs[0], wr: newWriter(pod), tap: taps[0]}
		toPod.wr.stall, toPod.wr.excuse = lim.PodWriteTimeout, &toClient.wr.waiting
		left, moving := r.leg(s, toClient, toPod, podEarly, early, resumed)
		if !moving {
			break
		}
		if f := pol.Dirs[0].LeaveFrame(); f != nil && errors.Is(s.LostCause(), relay.ErrPodLeft) {
			// A pod that left the registry still serves: it hears the
			// socket go away, not a cut.
			pod.SetWriteDeadline(time.Now().Add(relay.CloseGrace))
			pod.Write(f)
		}
		pod.Close()
		var moved relay.Moved
		moved, resumed = r.move(s, &pol)
		podEarly, notice = moved.Early, moved.Notice
		if !resumed {
			r.env.ResumeFailed(s)
			r.injectClose(s, toClient)
			closeWrite(s.Client)
			linger(s.Client, newReader(s.Client))
			s.Client.Close()
			break
		}
		// Client bytes read as the pod died go to the new pod, past the
		// rest of a message the dead one was given part of.
		early = left
		if legs != nil {
			legs.Moved()
			taps[1].Reset()
		}
		pol.Live.Reset(s.Clock())
		s.Client.SetDeadline(noDeadline)
		if s.Stopped() {
			// A stop that came during the move (its interrupt went to
			// the old connections) is delivered on the new leg.
			s.Interrupt()
		}
	}
	r.env.Host.Ended(s, pol.Counts())
}

// move asks the host for another pod for s, whose pod's side died, and
// reports whether s relays on there, with the pod's bytes behind its 101
// and the frames the client gets first.
func (r *Relay) move(s *relay.Socket, pol *relay.Policy) (relay.Moved, bool) {
	if !s.CanResume() {
		return relay.Moved{}, false // a stop, or the client's end, came first
	}
	opening, _ := pol.Dirs[0].Kept()
	m := relay.Move{Opening: opening, Torn: !pol.Dirs[1].BetweenMessages(), Cause: s.LostCause(), Relayed: pol.Counts()}
	moved, err := r.env.Host.Resume(s, m)
	if err != nil {
		return relay.Moved{}, false
	}
	s.Resumed(moved.Pod)
	return moved, true
}

// leg relays s between its client and its pod of now, until the socket
// ends or the pod's side dies and the socket moves (moving: both
// directions stopped where they were, nothing closed but what the dead
// pod did; left are client bytes read and not relayed). resumed: the pod
// is one the socket moved to, which must not get the rest of a message
// its predecessor was given part of.
func (r *Relay) leg(s *relay.Socket, toClient, toPod direction, podEarly, early []byte, resumed bool) (left []byte, moving bool) {
	conn := s.Client
	done := make(chan struct{})
	go func() {
		defer close(done)
		err := r.pump(s, toClient, podEarly, false, nil)
		if errors.Is(err, errStopped) || s.Resuming() {
			return // edge's close frame is written, or the socket moves
		}
		if code, _ := s.Owes(relay.Client); code != 0 {
			// The pod's stream ended while the client was still there
			// and edge owes the client a close: 1014 when that end cost
			// the pod (relay.Closing decides, see pump's end), or the
			// code of a stop that came first (the other pump's read may
			// have been cut by it while this one saw the reset). A read
			// cut by the client's end (its pump closes the pod's
			// connection) is the client's doing and owes nothing.
			r.injectClose(s, toClient)
			closeWrite(conn)
			return
		}
		// The pod's stream ended: so does the socket (no half-close in
		// WebSocket), and the client pump's read returns.
		conn.Close()
	}()
	err := r.pump(s, toPod, early, resumed, &left)
	if s.Resuming() {
		<-done
		return left, true
	}
	if s.Stopped() || errors.Is(err, errWrite) {
		// Let the other pump write its close frame and drain its peer
		// too. A write to the pod that failed (a reset pod) is heard by
		// that pump as its read fails: closing the pod's conn now
		// would hide the reset from it, and closing the client's would
		// reset the close frame it is about to write.
		select {
		case <-done:
		case <-time.After(relay.CloseGrace + relay.LingerTime):
		}
		if errors.Is(err, errWrite) {
			// The client may still be sending, as this pump was:
			// drain it while it reads the close frame.
			linger(conn, newReader(conn))
		}
	}
	conn.Close()
	toPod.dst.Close()
	<-done
	if s.Resuming() {
		// The pod died as this leg ended for another reason (the
		// client's end, a stop): nothing moves; the end is recorded.
		r.env.ResumeFailed(s)
	}
	return nil, false
}

// direction is one way of the relay.
type direction struct {
	src, dst net.Conn
	wr       *writer // of dst
	pol      *relay.Policy
	d        *relay.DirPolicy // pol's share of this direction, owned by its pump
	// tap reads the direction's messages for the socket's legs (nil: none
	// declared, or the socket may not move).
	tap *relay.Tap
	// notice, toward the client after a move, is written before anything
	// of the new pod: whole frames, where the client's stream is between
	// messages. Not relayed bytes: the policy never sees them.
	notice []byte
}

// pump copies src to dst until either fails or the socket is stopped,
// showing the policy every byte on the way. Writes block while dst does
// not read: that is the backpressure (one buffer per direction, no queue).
//
// drop: d's destination is a pod the socket moved to, which gets nothing
// of a message its predecessor had part of. left, toward the pod only,
// takes client bytes read as the socket began to move (the next pod's).
func (r *Relay) pump(s *relay.Socket, d direction, early []byte, drop bool, left *[]byte) (err error) {
	defer func() {
		// The side whose stream ended: the source, unless a write to
		// the destination failed (a pod that reset shows first in the
		// client pump's write to it). A cut of edge's own making (a
		// connection edge closed, a stop's deadline) ends neither.
		side, how := d.d.Src(), relay.Failed
		switch {
		case errors.Is(err, net.ErrClosed), errors.Is(err, errStopped), errors.Is(err, errResume):
			return
		case errors.Is(err, relay.ErrPodStalled), errors.Is(err, relay.ErrPodHung):
			side, how = relay.Pod, relay.Stalled
		case errors.Is(err, errWrite):
			side = side.Other()
		case errors.Is(err, io.EOF):
			how = relay.EOF
		}
		r.env.SideEnded(s, side, how, err)
	}()
	wr := d.wr
	// ping writes edge's ping to the pod when one is asked for and the
	// client's direction is between frames (the client's pump is the
	// pod's only writer).
	ping := func() error {
		if d.d.Src() != relay.Client {
			return nil
		}
		f := d.pol.PingFrame()
		if f == nil {
			return nil
		}
		// Before the write: the pod's answer may be read before the
		// write returns.
		d.pol.Live.Pinged(s.Clock())
		if err := wr.write(f); err != nil {
			return fmt.Errorf("%w: %w", errWrite, err)
		}
		return nil
	}
	forward := func(b []byte) error {
		switch {
		case d.tap == nil:
		case d.d.Src() == relay.Client:
			// The provider's answers to a dead pod's messages go no
			// further; a frame the tap reads is held until whole.
			if b = d.tap.Filter(b); len(b) == 0 {
				return ping()
			}
		default:
			d.tap.Look(b)
		}
		if drop {
			k := d.d.DropPartial(b)
			drop = k == len(b) && !d.d.BetweenMessages()
			if b = b[k:]; len(b) == 0 {
				return nil
			}
		}
		n, v := d.d.Relayed(s, b)
		if err := wr.write(b[:n]); err != nil {
			return fmt.Errorf("%w: %w", errWrite, err)
		}
		if v.Code != 0 {
			s.Stop(v.Code, v.Reason)
		}
		return ping()
	}
	if len(d.notice) > 0 {
		if err := wr.write(d.notice); err != nil {
			return fmt.Errorf("%w: %w", errWrite, err)
		}
	}
	if len(early) > 0 {
		if err := forward(early); err != nil {
			return err
		}
	}
	rd := newReader(d.src)
	defer rd.release()
	// Only the client's silence is watched (policy.idle). Its deadline is
	// armed once and, when it fires, moved by what the policy says is
	// left: not a timer operation per message.
	idle := d.d.Src() == relay.Client && d.pol.IdleTimeout() > 0
	if idle {
		armRead(s, d.src, time.Now().Add(d.pol.IdleTimeout()))
	}
	// The pod's reader watches its silence (Liveness): its deadline is
	// armed for the next check and moved when it fires, not per message.
	live := d.d.Src() == relay.Pod && d.pol.Live.On()
	if live {
		_, _, next := d.pol.Live.Check(s.Clock())
		armRead(s, d.src, s.Started.Add(time.Duration(next)))
	}
	for {
		b, err := rd.read()
		if s.Resuming() {
			// The pod died (this pump's write, or the other pump's
			// read, saw it): the client's bytes read meanwhile are the
			// next pod's; the dead pod's are dropped.
			if left != nil {
				*left = append(*left, b...)
			}
			return errResume
		}
		if len(b) > 0 && s.Stopped() {
			// A read that raced edge's stop: the poller may hand it data
			// that came after the stop's deadline was set (measured:
			// the pod's answer to edge's own close frame). It goes no
			// further than the frame in flight, as after the deadline.
			return r.stopped(s, d, rd, b)
		}
		if len(b) > 0 {
			if idle {
				d.pol.ClientSent(s.Clock())
			}
			if live {
				d.pol.Live.Heard(s.Clock())
			}
			werr := forward(b)
			rd.release()
			if errors.Is(werr, relay.ErrPodStalled) && r.env.PodEnded(s, relay.Stalled, werr) {
				// The pod is hung: the client hears 1014 from the
				// other pump, and is drained here meanwhile.
				linger(d.src, rd)
			}
			if werr != nil {
				return werr
			}
		}
		if err == nil {
			continue
		}
		if !errors.Is(err, os.ErrDeadlineExceeded) {
			return err
		}
		if s.Stopped() {
			return r.stopped(s, d, rd, nil)
		}
		until := noDeadline // a deadline this direction did not ask for
		if live {
			ping, hung, next := d.pol.Live.Check(s.Clock())
			if hung {
				return fmt.Errorf("%w (%v since the last ping)", relay.ErrPodHung, time.Duration(s.Clock()-d.pol.Live.PingedAt()))
			}
			if ping && !s.Stopped() && !s.Resuming() {
				// The client's pump writes it: woken like a stop, so
				// that its own deadline cannot hide the wake-up.
				s.Client.SetReadDeadline(aLongTimeAgo)
			}
			until = s.Started.Add(time.Duration(next))
		}
		if d.d.Src() == relay.Client {
			if err := ping(); err != nil {
				return err
			}
		}
		if idle {
			left, v := d.pol.IdleLeft(s.Clock())
			if v.Code != 0 {
				s.Stop(v.Code, v.Reason)
				continue
			}
			until = time.Now().Add(left)
		}
		if d.d.Src() == relay.Client {
			armRead(s, d.src, until, d.pol) // the client's direction is this pump's
		} else {
			armRead(s, d.src, until)
		}
	}
}

// armRead sets c's read deadline to until, unless s was stopped meanwhile
// (by this pump, e.g. for a frame over the limit in the early bytes, or by
// a drain or a lost lease): stop's interrupt is a deadline in the past,
// which this one must not replace. stop sets its code before it
// interrupts, so either the load here sees the code or the interrupt
// comes after this deadline. The same holds for a ping the pod's pump
// asks the client's pump for (pol, for the client's reader): it sets
// Live's due before its wake-up.
func armRead(s *relay.Socket, c net.Conn, until time.Time, pol ...*relay.Policy) {
	c.SetReadDeadline(until)
	if s.Stopped() || len(pol) > 0 && pol[0].PingFrameDue() {
		c.SetReadDeadline(aLongTimeAgo)
	}
}

var (
	errStopped = errors.New("stopped by edge")
	// errResume: the socket is moving to another pod (relay.Socket.Resume).
	errResume = errors.New("moving to another pod")
	// errWrite marks a pump's end by its destination (a failed write), not
	// its source.
	errWrite = errors.New("write to the peer")
)

// stopped ends d for edge's stop code: b (read, not yet relayed) and what
// follows as far as the end of the frame in flight, edge's close frame,
// FIN, and the lingering close.
func (r *Relay) stopped(s *relay.Socket, d direction, rd *reader, b []byte) error {
	if n := d.d.UntilBoundary(b); n > 0 && d.d.Finishing() {
		d.d.Relayed(s, b[:n])
		d.wr.write(b[:n]) // a failure fails the close frame's write too
	}
	rd.release()
	finishFrame(s, d, rd)
	r.injectClose(s, d)
	closeWrite(d.dst)
	linger(d.src, rd)
	return errStopped
}

// finishFrame forwards the rest of the frame in flight, if any, within
// relay.CloseGrace, so that edge's close frame can follow it; what comes after
// it is dropped (the lingering close drains it).
func finishFrame(s *relay.Socket, d direction, rd *reader) {
	if !d.d.Finishing() {
		return
	}
	d.src.SetReadDeadline(time.Now().Add(relay.CloseGrace))
	for d.d.Finishing() {
		b, err := rd.read()
		if n := d.d.UntilBoundary(b); n > 0 {
			d.d.Relayed(s, b[:n])
			if werr := d.wr.write(b[:n]); werr != nil {
				rd.release()
				return
			}
		}
		rd.release()
		if err != nil {
			return
		}
	}
}

// closeWrite sends FIN after edge's close frame: the peer reads the close,
// then the end of the stream, and answers with its own FIN.
func closeWrite(c net.Conn) {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		cw.CloseWrite()
	}
}

// linger reads and drops what src still sends, until it ends its stream or
// relay.LingerTime passes (nginx's lingering_close): closing a socket with unread
// bytes resets it, and a reset can destroy the close frame edge just
// wrote before the peer reads it (RFC 6455 7.1.1; a client still sending
// would see 1006 instead of edge's code).
func linger(src net.Conn, rd *reader) {
	src.SetReadDeadline(time.Now().Add(relay.LingerTime))
	for {
		_, err := rd.read()
		rd.release()
		if err != nil {
			return
		}
	}
}

// injectClose writes the policy's close frame, if any may go, into dst.
func (r *Relay) injectClose(s *relay.Socket, d direction) {
	f := d.d.CloseFrame(s)
	if f == nil {
		return
	}
	d.dst.SetWriteDeadline(time.Now().Add(relay.CloseGrace))
	d.dst.Write(f)
}
