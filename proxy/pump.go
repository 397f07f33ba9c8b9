package proxy

import (
	"crypto/rand"
	"errors"
	"io"
	"net"
	"os"
	"syscall"
	"time"
)

// bridge runs both directions of s on Go's netpoller, in goroutines of their
// own (RelayGoroutines), until the socket ends, then releases the call.
func (p *Proxy) bridge(s *socket, up *upstream, early []byte) {
	conn := s.client

	toPod := direction{name: "client_to_pod", src: conn, dst: up.conn, toPod: true, counter: p.metrics.dir["client_to_pod"]}
	toClient := direction{name: "pod_to_client", src: up.conn, dst: conn, counter: p.metrics.dir["pod_to_client"]}
	results := make(chan pumpResult, 1)
	upEarly := up.early
	up = nil // the pod's 101 and its headers are garbage from here on
	go func() {
		r := p.pump(s, toClient, upEarly)
		if s.stopCode.Load() == 0 {
			// The pod's stream ended: so does the socket (no half-close
			// in WebSocket), and the client pump's read returns.
			conn.Close()
		}
		results <- r
	}()
	fromClient := p.pump(s, toPod, early)
	stopped := s.stopCode.Load() != 0
	if stopped {
		// Let the other pump write its close frame too.
		select {
		case fromPod := <-results:
			results <- fromPod
		case <-time.After(time.Second):
		}
	}
	conn.Close()
	s.podConn.Close()
	fromPod := <-results

	p.finish(s, fromClient.bytes, fromPod.bytes)
}

// pumpResult is how one direction ended.
type pumpResult struct {
	// closeCode seen in a close frame of this direction (0: none).
	closeCode int
	bytes     int64
	messages  int64
	err       error
}

// direction is one way of the relay.
type direction struct {
	name    string // for metrics: "client_to_pod" or "pod_to_client"
	src     net.Conn
	dst     net.Conn
	toPod   bool // frames to the pod are masked (edge writes as a client)
	counter *dirCounters
}

// pump copies src to dst until either fails or the socket is stopped,
// following frame headers on the way. Writes block while dst does not read:
// that is the backpressure (one buffer per direction, no queue).
func (p *Proxy) pump(s *socket, d direction, early []byte) (res pumpResult) {
	var sc frameScanner
	limit := uint64(p.cfg().MaxMessageBytes)
	idle := p.cfg().IdleTimeout
	side := sidePod
	if d.toPod {
		side = sideClient
	}
	defer func() {
		res.closeCode, res.messages = sc.CloseCode, sc.Messages
		s.firstEnd.CompareAndSwap(0, side)
	}()
	wr := newWriter(d.dst)
	forward := func(b []byte) error {
		sc.scan(b, limit)
		if sc.CloseCode != 0 && s.firstClose.CompareAndSwap(0, int32(sc.CloseCode)) {
			s.firstCloser.Store(side)
		}
		if err := wr.write(b); err != nil {
			return err
		}
		res.bytes += int64(len(b))
		d.counter.bytes.Add(float64(len(b)))
		return nil
	}
	if len(early) > 0 {
		if res.err = forward(early); res.err != nil {
			return res
		}
	}
	rd := newReader(d.src)
	defer rd.release()
	if !d.toPod {
		idle = 0 // only the client's silence means a dead call: the agent may listen quietly
	} else if idle > 0 {
		s.lastClient.Store(time.Now().UnixNano())
		d.src.SetReadDeadline(time.Now().Add(idle))
	}
	var counted int64
	for {
		b, err := rd.read()
		if len(b) > 0 {
			if idle > 0 {
				// Cheap clock read; the deadline itself is only moved when
				// it fires (below), not on every read.
				s.lastClient.Store(time.Now().UnixNano())
			}
			werr := forward(b)
			rd.release()
			if werr != nil {
				res.err = werr
				return res
			}
			if sc.Messages != counted {
				d.counter.messages.Add(float64(sc.Messages - counted))
				counted = sc.Messages
			}
			if sc.TooBig {
				s.stop(CloseTooBig, "message too big")
			}
		}
		if err == nil {
			continue
		}
		if !errors.Is(err, os.ErrDeadlineExceeded) {
			res.err = err
			return res
		}
		if code := s.stopCode.Load(); code != 0 {
			p.injectClose(s, d, &sc, int(code))
			res.err = errStopped
			return res
		}
		// The idle deadline fired: move it if bytes came meanwhile.
		last := time.Unix(0, s.lastClient.Load())
		if until := time.Until(last.Add(idle)); until > 0 {
			d.src.SetReadDeadline(time.Now().Add(until))
			if s.stopCode.Load() != 0 {
				// stop ran between our read and the re-arm: keep its
				// interrupt.
				d.src.SetReadDeadline(aLongTimeAgo)
			}
			continue
		}
		s.stop(CloseIdleTimeout, "idle timeout")
	}
}

var errStopped = errors.New("stopped by edge")

// injectClose writes edge's close frame into dst if the stream is between
// frames; in the middle of a frame it cannot, and the TCP close follows.
func (p *Proxy) injectClose(s *socket, d direction, sc *frameScanner, code int) {
	if !sc.atBoundary() {
		return
	}
	reason := s.reason()
	var mask *[4]byte
	if d.toPod {
		mask = new([4]byte)
		rand.Read(mask[:])
	}
	d.dst.SetWriteDeadline(time.Now().Add(time.Second))
	d.dst.Write(closeFrame(code, reason, mask))
}

// reader reads a conn into pooled buffers taken only once the socket is
// readable: a blocking Read would pin a buffer per direction for the whole
// call, which is most of a relayed stream's memory. It waits for
// readiness through syscall.RawConn, which keeps the runtime poller and the
// conn's deadlines.
type reader struct {
	conn net.Conn
	rc   syscall.RawConn // nil: not a socket, plain Read
	buf  *[]byte
}

func newReader(c net.Conn) *reader {
	r := &reader{conn: c}
	if sc, ok := c.(syscall.Conn); ok {
		if rc, err := sc.SyscallConn(); err == nil {
			r.rc = rc
		}
	}
	return r
}

// read returns the next bytes, valid until release.
func (r *reader) read() ([]byte, error) {
	if r.rc == nil {
		if r.buf == nil {
			r.buf = bufPool.Get().(*[]byte)
		}
		n, err := r.conn.Read(*r.buf)
		return (*r.buf)[:n], err
	}
	var n int
	var rerr error
	err := r.rc.Read(func(fd uintptr) bool {
		bp := bufPool.Get().(*[]byte)
		rerr = nil
		for {
			var errno syscall.Errno
			n, errno = rawRead(int(fd), *bp)
			if errno != syscall.EINTR {
				if errno != 0 {
					rerr = errno
				}
				break
			}
		}
		if rerr == syscall.EAGAIN {
			bufPool.Put(bp)
			return false // wait until readable
		}
		r.buf = bp
		return true
	})
	switch {
	case err != nil:
		r.release()
		return nil, err
	case rerr != nil:
		r.release()
		return nil, rerr
	case n <= 0:
		r.release()
		return nil, io.EOF
	}
	return (*r.buf)[:n], nil
}

func (r *reader) release() {
	if r.buf != nil && r.rc != nil {
		bufPool.Put(r.buf)
		r.buf = nil
	}
}

// writer writes a whole buffer to a conn with raw non-blocking writes,
// waiting for writability (and honouring the write deadline) through
// syscall.RawConn when the socket is full.
type writer struct {
	conn net.Conn
	rc   syscall.RawConn // nil: not a socket, plain Write
}

func newWriter(c net.Conn) *writer {
	w := &writer{conn: c}
	if sc, ok := c.(syscall.Conn); ok {
		if rc, err := sc.SyscallConn(); err == nil {
			w.rc = rc
		}
	}
	return w
}

func (w *writer) write(b []byte) error {
	if w.rc == nil {
		_, err := w.conn.Write(b)
		return err
	}
	var werr error
	err := w.rc.Write(func(fd uintptr) bool {
		for len(b) > 0 {
			n, errno := rawWrite(int(fd), b)
			switch errno {
			case 0:
				b = b[n:]
			case syscall.EINTR:
			case syscall.EAGAIN:
				return false // wait until writable
			default:
				werr = errno
				return true
			}
		}
		return true
	})
	if err != nil {
		return err
	}
	return werr
}
