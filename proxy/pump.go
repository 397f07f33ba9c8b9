package proxy

import (
	"crypto/rand"
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

var (
	aLongTimeAgo = time.Unix(1, 0)
	noDeadline   time.Time
)

// bufSize is one relay buffer: a Twilio media frame is ~300 bytes; a
// bigger message just takes more reads. A buffer is taken from the pool only
// when bytes are ready (see reader), so idle streams hold none.
const bufSize = 8 << 10

var bufPool = sync.Pool{New: func() any { b := make([]byte, bufSize); return &b }}

// Close codes edge sends itself (RFC 6455 7.4.1).
const (
	CloseGoingAway   = 1001 // drain deadline passed on shutdown
	ClosePolicy      = 1008 // the call lost its lease (released, swept)
	CloseTooBig      = 1009 // a frame over proxy.max_message_bytes
	CloseIdleTimeout = 4000 // the client sent nothing for proxy.idle_timeout
)

// socket is one relayed media stream: a hijacked client conn and its pod
// conn, with the call it belongs to.
type socket struct {
	callID, pod     string
	client, podConn net.Conn
	started         time.Time

	// stopCode, when set, asks both pumps to end with a close frame carrying
	// it; their reads are interrupted by a past deadline.
	stopCode   atomic.Int32
	stopReason atomic.Pointer[string]
	// lastClient is the unix nanotime of the last bytes from the client.
	lastClient atomic.Int64
	// firstClose is the first close code seen in either direction and
	// firstCloser its side; firstEnd is the side whose pump ended first.
	firstClose, firstCloser, firstEnd atomic.Int32
}

// Sides of a socket, for closeOrigin.
const (
	sideClient int32 = 1
	sidePod    int32 = 2
)

// stop asks the relay to close both sides with code, at a frame boundary.
// The first code wins.
func (s *socket) stop(code int, reason string) {
	if !s.stopCode.CompareAndSwap(0, int32(code)) {
		return
	}
	s.stopReason.Store(&reason)
	s.client.SetReadDeadline(aLongTimeAgo)
	s.podConn.SetReadDeadline(aLongTimeAgo)
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
	forward := func(b []byte) error {
		sc.scan(b, limit)
		if sc.CloseCode != 0 && s.firstClose.CompareAndSwap(0, int32(sc.CloseCode)) {
			s.firstCloser.Store(side)
		}
		if _, err := d.dst.Write(b); err != nil {
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
	reason := ""
	if r := s.stopReason.Load(); r != nil {
		reason = *r
	}
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
		for {
			n, rerr = syscall.Read(int(fd), *bp)
			if rerr != syscall.EINTR {
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
