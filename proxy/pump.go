package proxy

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"time"

	"github.com/edge-voice/edge/proxy/internal/relay"
)

// bridge runs both directions of s on Go's netpoller, in goroutines of their
// own (relayGoroutines), until the socket ends, then releases the call.
// What is relayed, counted and refused is the policy's; this file only
// moves bytes and turns the policy's clock into read deadlines.
func (p *Proxy) bridge(s *socket, up *upstream, early []byte) {
	conn := s.client
	var pol policy
	pol.init(p.cfg(), p.metrics, s.clock(), s.ext)

	toClient := direction{src: up.conn, dst: conn, pol: &pol, d: &pol.dirs[1], wr: newWriter(conn)}
	toPod := direction{src: conn, dst: up.conn, pol: &pol, d: &pol.dirs[0], wr: newWriter(up.conn)}
	toPod.wr.stall, toPod.wr.excuse = p.cfg().PodWriteTimeout, &toClient.wr.waiting
	done := make(chan struct{})
	upEarly := up.early
	up = nil // the pod's 101 and its headers are garbage from here on
	go func() {
		defer close(done)
		err := p.pump(s, toClient, upEarly)
		if errors.Is(err, errStopped) {
			return // the pump wrote edge's close frame itself
		}
		if code, _ := s.owes(relay.Client); code != 0 {
			// The pod's stream ended while the client was still there
			// and edge owes the client a close: 1014 when that end cost
			// the pod (relay.Closing decides, see pump's end), or the
			// code of a stop that came first (the other pump's read may
			// have been cut by it while this one saw the reset). A read
			// cut by the client's end (its pump closes the pod's
			// connection) is the client's doing and owes nothing.
			p.injectClose(s, toClient)
			closeWrite(conn)
			return
		}
		// The pod's stream ended: so does the socket (no half-close in
		// WebSocket), and the client pump's read returns.
		conn.Close()
	}()
	err := p.pump(s, toPod, early)
	if s.stopped.Load() || errors.Is(err, errWrite) {
		// Let the other pump write its close frame and drain its peer
		// too. A write to the pod that failed (a reset pod) is heard by
		// that pump as its read fails: closing the pod's conn now
		// would hide the reset from it, and closing the client's would
		// reset the close frame it is about to write.
		select {
		case <-done:
		case <-time.After(closeGrace + lingerTime):
		}
		if errors.Is(err, errWrite) {
			// The client may still be sending, as this pump was:
			// drain it while it reads the close frame.
			linger(conn, newReader(conn))
		}
	}
	conn.Close()
	s.podConn.Close()
	<-done

	p.finish(s, &pol)
}

// clock is the goroutine relay's policy clock: monotonic nanoseconds since
// the socket started.
func (s *socket) clock() int64 { return int64(time.Since(s.started)) }

// direction is one way of the relay.
type direction struct {
	src, dst net.Conn
	wr       *writer // of dst
	pol      *policy
	d        *dirPolicy // pol's share of this direction, owned by its pump
}

// pump copies src to dst until either fails or the socket is stopped,
// showing the policy every byte on the way. Writes block while dst does
// not read: that is the backpressure (one buffer per direction, no queue).
func (p *Proxy) pump(s *socket, d direction, early []byte) (err error) {
	defer func() {
		// The side whose stream ended: the source, unless a write to
		// the destination failed (a pod that reset shows first in the
		// client pump's write to it). A cut of edge's own making (a
		// connection edge closed, a stop's deadline) ends neither.
		side, how := d.d.src, relay.Failed
		switch {
		case errors.Is(err, net.ErrClosed), errors.Is(err, errStopped):
			return
		case errors.Is(err, errPodStalled):
			side, how = relay.Pod, relay.Stalled
		case errors.Is(err, errWrite):
			side = side.Other()
		case errors.Is(err, io.EOF):
			how = relay.EOF
		}
		p.sideEnded(s, side, how, err)
	}()
	wr := d.wr
	forward := func(b []byte) error {
		n, v := d.d.relayed(s, b)
		if err := wr.write(b[:n]); err != nil {
			return fmt.Errorf("%w: %w", errWrite, err)
		}
		if v.code != 0 {
			s.stop(v.code, v.reason)
		}
		return nil
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
	idle := d.d.src == relay.Client && d.pol.idle > 0
	if idle {
		armRead(s, d.src, time.Now().Add(time.Duration(d.pol.idle)))
	}
	for {
		b, err := rd.read()
		if len(b) > 0 && s.stopped.Load() {
			// A read that raced edge's stop: the poller may hand it data
			// that came after the stop's deadline was set (measured:
			// the pod's answer to edge's own close frame). It goes no
			// further than the frame in flight, as after the deadline.
			return p.stopped(s, d, rd, b)
		}
		if len(b) > 0 {
			if idle {
				d.pol.clientSent(s.clock())
			}
			werr := forward(b)
			rd.release()
			if errors.Is(werr, errPodStalled) && p.podEnded(s, relay.Stalled, werr) {
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
		if s.stopped.Load() {
			return p.stopped(s, d, rd, nil)
		}
		until := noDeadline // a deadline this direction did not ask for
		if idle {
			left, v := d.pol.idleLeft(s.clock())
			if v.code != 0 {
				s.stop(v.code, v.reason)
				continue
			}
			until = time.Now().Add(left)
		}
		armRead(s, d.src, until)
	}
}

// armRead sets c's read deadline to until, unless s was stopped meanwhile
// (by this pump, e.g. for a frame over the limit in the early bytes, or by
// a drain or a lost lease): stop's interrupt is a deadline in the past,
// which this one must not replace. stop sets its code before it
// interrupts, so either the load here sees the code or the interrupt
// comes after this deadline.
func armRead(s *socket, c net.Conn, until time.Time) {
	c.SetReadDeadline(until)
	if s.stopped.Load() {
		c.SetReadDeadline(aLongTimeAgo)
	}
}

var (
	errStopped = errors.New("stopped by edge")
	// errWrite marks a pump's end by its destination (a failed write), not
	// its source.
	errWrite = errors.New("write to the peer")
)

// stopped ends d for edge's stop code: b (read, not yet relayed) and what
// follows as far as the end of the frame in flight, edge's close frame,
// FIN, and the lingering close.
func (p *Proxy) stopped(s *socket, d direction, rd *reader, b []byte) error {
	if n := d.d.untilBoundary(b); n > 0 && d.d.finishing() {
		d.d.relayed(s, b[:n])
		d.wr.write(b[:n]) // a failure fails the close frame's write too
	}
	rd.release()
	finishFrame(s, d, rd)
	p.injectClose(s, d)
	closeWrite(d.dst)
	linger(d.src, rd)
	return errStopped
}

// finishFrame forwards the rest of the frame in flight, if any, within
// closeGrace, so that edge's close frame can follow it; what comes after
// it is dropped (the lingering close drains it).
func finishFrame(s *socket, d direction, rd *reader) {
	if !d.d.finishing() {
		return
	}
	d.src.SetReadDeadline(time.Now().Add(closeGrace))
	for d.d.finishing() {
		b, err := rd.read()
		if n := d.d.untilBoundary(b); n > 0 {
			d.d.relayed(s, b[:n])
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
// lingerTime passes (nginx's lingering_close): closing a socket with unread
// bytes resets it, and a reset can destroy the close frame edge just
// wrote before the peer reads it (RFC 6455 7.1.1; a client still sending
// would see 1006 instead of edge's code).
func linger(src net.Conn, rd *reader) {
	src.SetReadDeadline(time.Now().Add(lingerTime))
	for {
		_, err := rd.read()
		rd.release()
		if err != nil {
			return
		}
	}
}

// injectClose writes the policy's close frame, if any may go, into dst.
func (p *Proxy) injectClose(s *socket, d direction) {
	f := d.d.closeFrame(s)
	if f == nil {
		return
	}
	d.dst.SetWriteDeadline(time.Now().Add(closeGrace))
	d.dst.Write(f)
}
