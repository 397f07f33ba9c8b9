//go:build linux

package loop

import (
	"github.com/edge-voice/edge/proxy/internal/relay"
	"github.com/edge-voice/edge/proxy/internal/tls13"
)

// The uring loop's side of a TLS client (usock.tls), as esock_tls_linux.go
// is the epoll loop's: what goes to the client is sealed, a KeyUpdate it
// asks for is answered at once, a broken record ends the socket. The
// records themselves are package tls13's.

// wire is plain as it goes to dirs[i]'s destination, in a buffer of its
// own: sealed into records toward a TLS client, else as it is.
func (e *usock) wire(i int, plain []byte) []byte {
	if i == 1 && e.tls != nil && len(plain) > 0 {
		return e.tls.Seal(nil, tls13.RecordTypeData, plain)
	}
	return plain
}

// openTLS opens the records that b (received from the client) completes,
// behind the partial record kept from before, and returns their
// application data in the direction's buffer (empty when b completed no
// record).
func (l *uloop) openTLS(e *usock, d *udir, b []byte) ([]byte, error) {
	t := e.tls
	n := len(t.Part()) + len(b)
	if cap(l.scratch) < n {
		l.scratch = make([]byte, n)
	}
	buf := l.scratch[:n]
	copy(buf[copy(buf, t.Part()):], b)
	p, err := t.Open(buf, l.now)
	if err != nil || p == 0 {
		return nil, err
	}
	return d.fill(func(dst []byte) []byte { return append(dst, buf[:p]...) }), nil
}

// sealTLS seals plain (received from the pod) into records for the client.
func (l *uloop) sealTLS(e *usock, d *udir, plain []byte) []byte {
	return d.fill(func(dst []byte) []byte { return e.tls.Seal(dst, tls13.RecordTypeData, plain) })
}

// fill appends into the direction's reused buffer, or into a new one
// while a send from it may still be in flight.
func (d *udir) fill(add func(dst []byte) []byte) []byte {
	if d.sending || d.next != nil {
		return add(nil)
	}
	d.tlsBuf = add(d.tlsBuf[:0])
	return d.tlsBuf
}

// answerKeyUpdate sends edge's KeyUpdate at once when the client asked
// for one and nothing goes to the client; else the answer goes out before
// the next record sealed.
func (l *uloop) answerKeyUpdate(e *usock) {
	t := e.tls
	if t.CloseSent() {
		// Nothing follows edge's close_notify.
		return
	}
	if d := &e.dirs[1]; d.sending || d.next != nil {
		// Bytes already go to the client: the answer stays owed and seal
		// puts it before the next record, as on the epoll loop.
		return
	}
	l.sendOut(e, 1, t.KeyUpdate(nil), false)
}

// tlsFailed ends a socket whose client broke the record protocol, as
// eloop.tlsFailed: the alert first where the stream toward the client is
// between records.
func (l *uloop) tlsFailed(e *usock, err error) {
	l.o.Log.Debug("tls record failure", "err", err, "call_sid", e.s.CallID)
	if desc, ok := tls13.AlertOf(err); ok && !e.dirs[1].sending && e.dirs[1].next == nil {
		relay.RawWrite(e.fds[0], e.tls.AlertRecord(desc))
	}
	l.teardown(e, relay.Client)
}
