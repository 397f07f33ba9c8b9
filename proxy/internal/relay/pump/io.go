package pump

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/edge-voice/edge/proxy/internal/relay"
)

// The goroutine relay's reads and writes (pump.go): raw non-blocking
// system calls through syscall.RawConn, which keeps the runtime poller and
// the conns' deadlines.

// bufSize is one buffer: a Twilio media frame is ~300 bytes; a bigger
// message just takes more reads. A buffer is taken from the pool only when
// bytes are ready (see reader), so idle streams hold none.
const bufSize = 8 << 10

var bufPool = sync.Pool{New: func() any { b := make([]byte, bufSize); return &b }}

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
			n, errno = relay.RawRead(int(fd), *bp)
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
	// waiting is set while a write waits for the peer to read (the
	// client's writer: its peer's backpressure excuses the pod's).
	waiting atomic.Bool
	// stall, when set (the pod's writer), bounds a write the pod does not
	// take, unless excuse is waiting too: a pod that stops reading while
	// its own writes to the client flow is dead or hung, one blocked by a
	// client that does not read is only backpressure. The deadline is
	// armed only once a write would block: no timer per message.
	stall  time.Duration
	excuse *atomic.Bool
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
	armed := false
	for {
		err := w.rc.Write(func(fd uintptr) bool {
			for len(b) > 0 {
				n, errno := relay.RawWrite(int(fd), b)
				switch errno {
				case 0:
					b = b[n:]
				case syscall.EINTR:
				case syscall.EAGAIN:
					if w.stall > 0 && !armed {
						armed = true
						w.conn.SetWriteDeadline(time.Now().Add(w.stall))
					}
					w.waiting.Store(true)
					return false // wait until writable
				default:
					werr = errno
					return true
				}
			}
			return true
		})
		w.waiting.Store(false)
		if armed && err == nil {
			w.conn.SetWriteDeadline(noDeadline)
		}
		if armed && errors.Is(err, os.ErrDeadlineExceeded) && w.stall > 0 {
			if w.excuse != nil && w.excuse.Load() {
				armed = false // backpressure from the client: wait on
				continue
			}
			return fmt.Errorf("%w: %w", relay.ErrPodStalled, err)
		}
		if err != nil {
			return err
		}
		return werr
	}
}
