//go:build linux

package proxy

import "errors"

// The uring loop's side of a TLS client (usock.tls), as esock_tls_linux.go
// is the epoll loop's: what goes to the client is sealed, a KeyUpdate it
// asks for is answered at once, a broken record ends the socket. The
// records themselves are tlsrecord.go's.

// wire is plain as it goes to dirs[i]'s destination, in a buffer of its
// own: sealed into records toward a TLS client, else as it is.
func (e *usock) wire(i int, plain []byte) []byte {
	if i == 1 && e.tls != nil && len(plain) > 0 {
		return e.tls.seal(nil, recordTypeAppl, plain)
	}
	return plain
}

// openTLS opens the records that b (received from the client) completes,
// behind the partial record kept from before, and returns their
// application data in the direction's buffer (empty when b completed no
// record).
func (l *uloop) openTLS(e *usock, d *udir, b []byte) ([]byte, error) {
	t := e.tls
	n := len(t.part) + len(b)
	if cap(l.scratch) < n {
		l.scratch = make([]byte, n)
	}
	buf := l.scratch[:n]
	copy(buf[copy(buf, t.part):], b)
	p, err := t.open(buf, l.now)
	if err != nil || p == 0 {
		return nil, err
	}
	return d.fill(func(dst []byte) []byte { return append(dst, buf[:p]...) }), nil
}

// sealTLS seals plain (received from the pod) into records for the client.
func (l *uloop) sealTLS(e *usock, d *udir, plain []byte) []byte {
	return d.fill(func(dst []byte) []byte { return e.tls.seal(dst, recordTypeAppl, plain) })
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
	if t.closeSent {
		// Nothing follows edge's close_notify.
		t.owedUpdate = false
		return
	}
	if d := &e.dirs[1]; d.sending || d.next != nil {
		// Bytes already go to the client: the answer stays owed and seal
		// puts it before the next record, as on the epoll loop.
		return
	}
	l.sendOut(e, 1, t.keyUpdate(nil), false)
}

// tlsFailed ends a socket whose client broke the record protocol, as
// eloop.tlsFailed: the alert first where the stream toward the client is
// between records.
func (l *uloop) tlsFailed(e *usock, err error) {
	l.p.log.Debug("tls record failure", "err", err, "call_sid", e.s.callID)
	var a tlsAlert
	if d := &e.dirs[1]; errors.As(err, &a) && !d.sending && d.next == nil {
		rawWrite(e.fds[0], e.tls.alertRecord(a.desc))
	}
	l.teardown(e, sideClient)
}
