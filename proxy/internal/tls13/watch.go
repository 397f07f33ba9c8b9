package tls13

import (
	"net"
	"sync"
)

// The record watch of a TLSListener connection (tlsRaw): each direction's
// records are followed as they pass, to count those under the application
// keys (the sequence numbers the hand-off needs) and to find any that is
// not application data (then the hand-off is off).
//
// It runs before any authentication, on every connection of the public
// listener, so it keeps no bytes of its own: a record header (5 bytes) and
// counters. crypto/tls already holds each record in its input buffer; the
// watch reads the socket on crypto/tls's behalf no further than the end
// of the current record, the header first and then the whole body into
// crypto/tls's buffer in one Read (crypto/tls asks for the rest of a
// record with room for all of it), where the record is opened in passing
// into a scratch buffer shared by every connection. So a partial record
// is held once, by crypto/tls, as behind tls.NewListener, and a record
// that trickles in is never copied again (measured: BenchmarkTLSPreAuth).

// watchRecords bounds how many application records of each direction the
// watcher opens before it gives up (then the connection stays crypto/tls's
// for good): a media socket's upgrade is one request, one 101 and the
// server's session tickets; a keep-alive connection of webhooks must not
// pay a second decryption per request.
const watchRecords = 16

// recordWatch follows one direction's records. Its counters are small
// (each stops at watchRecords + 1): the watch exists for every connection
// of the public listener before any authentication.
type recordWatch struct {
	// keys are the candidate suites' keys, then the one that opened a
	// record; seq counts the records under it.
	keys []*Keys
	// body is how much of the current record's body is still to come
	// once its header, hdr, is whole (hdrN bytes of it so far).
	body uint16
	hdr  [RecordHeaderLen]byte
	hdrN uint8
	dir  uint8 // 0: from the client (its secret), 1: to it
	// useless counts the client's records in a row without data under
	// the application key (empty ones): the loop's record layer carries
	// the count on (Records.useless).
	seq, misses, useless uint8
	found                bool
}

// watchScratch holds a record's plaintext while the watch looks at it.
var watchScratch = sync.Pool{New: func() any { b := make([]byte, 0, MaxCiphertext); return &b }}

func (rc *tlsRaw) Read(b []byte) (int, error) {
	if rc.paused.Load() {
		return 0, errPaused
	}
	if rc.gaveUp.Load() || len(b) == 0 {
		rc.in.drop()
		return rc.TCPConn.Read(b)
	}
	w := &rc.in
	if w.hdrN < RecordHeaderLen {
		n, err := rc.TCPConn.Read(b[:min(len(b), RecordHeaderLen-int(w.hdrN))])
		w.hdrN += uint8(copy(w.hdr[w.hdrN:], b[:n]))
		if w.hdrN == RecordHeaderLen && !rc.header(w) {
			rc.giveUp()
		}
		return n, err
	}
	body := int(w.body)
	if len(b) < body {
		// crypto/tls always asks for a whole record: this is not it.
		rc.giveUp()
		return rc.TCPConn.Read(b)
	}
	n := 0
	var err error
	for n < body && err == nil {
		var k int
		k, err = rc.TCPConn.Read(b[n:body])
		n += k
	}
	switch {
	case n == body:
		rc.endRecord(w, b[:n])
	case n > 0:
		// A read cut short (a deadline, an error): the record's start is
		// crypto/tls's alone now, and the watch cannot open it.
		rc.giveUp()
	}
	return n, err
}

func (rc *tlsRaw) Write(b []byte) (int, error) {
	if rc.handedOff.Load() {
		return 0, net.ErrClosed
	}
	n, err := rc.TCPConn.Write(b)
	if rc.gaveUp.Load() {
		rc.out.drop()
		return n, err
	}
	// crypto/tls writes whole records; a record cut across writes (a
	// failed write) ends the watch.
	w := &rc.out
	for p := b[:n]; len(p) > 0; {
		if w.hdrN < RecordHeaderLen {
			k := copy(w.hdr[w.hdrN:], p)
			w.hdrN += uint8(k)
			p = p[k:]
			if w.hdrN == RecordHeaderLen && !rc.header(w) {
				rc.giveUp()
				break
			}
			continue
		}
		n := int(w.body)
		if len(p) < n {
			rc.giveUp()
			break
		}
		rc.endRecord(w, p[:n])
		p = p[n:]
	}
	return n, err
}

// drop forgets a direction's watch once the watch gave up (its keys are
// the connection's only large state), on that direction's goroutine.
func (w *recordWatch) drop() {
	if w.keys != nil {
		*w = recordWatch{dir: w.dir}
	}
}

// header takes the current record's whole header; false: the hand-off is
// impossible. A record without a body ends at once.
func (rc *tlsRaw) header(w *recordWatch) bool {
	n := int(w.hdr[3])<<8 | int(w.hdr[4])
	if n > MaxCiphertext+2048 {
		return false
	}
	w.body = uint16(n)
	if n == 0 {
		rc.endRecord(w, nil)
	}
	return true
}

// endRecord looks at the current record, its body whole, and moves the
// watch to the next one.
func (rc *tlsRaw) endRecord(w *recordWatch, body []byte) {
	ok := rc.record(w, w.hdr[:], body)
	w.hdrN, w.body = 0, 0
	if !ok {
		rc.giveUp()
	}
}

// record looks at one whole record; false: the hand-off is impossible.
func (rc *tlsRaw) record(w *recordWatch, hdr, body []byte) bool {
	if hdr[0] != RecordTypeData {
		// Plaintext handshake records, change_cipher_spec: before the
		// application keys, or a TLS 1.2 connection.
		return !w.found
	}
	if w.keys == nil {
		s := rc.secret(int(w.dir))
		if len(s) == 0 {
			return true // under the handshake keys
		}
		for _, suite := range suitesForSecret(len(s)) {
			k, err := newKeys(suite, s, 0)
			if err != nil {
				return false
			}
			w.keys = append(w.keys, k)
		}
		clear(s)
		if w.keys == nil {
			return false
		}
	}
	if w.found && w.dir == 1 {
		// Edge's own records: once one opened, the rest follow under the
		// same key (crypto/tls changes it only to answer a client's
		// KeyUpdate, which the inbound watcher refuses).
		w.seq++
		return w.seq <= watchRecords
	}
	for _, k := range w.keys {
		k.seq = uint64(w.seq)
		typ, first, ok := k.peek(hdr, body)
		if !ok {
			continue
		}
		// Edge's session tickets come first under its application key
		// (to a client that offers resumption); anything else but data
		// (a KeyUpdate, an alert) leaves the connection to crypto/tls.
		ticket := w.dir == 1 && typ == RecordTypeHandshake && first == MsgNewSessionTicket
		if typ != RecordTypeData && !ticket {
			return false
		}
		w.useless++
		if first >= 0 {
			w.useless = 0
		}
		w.keys, w.found = []*Keys{k}, true
		w.seq++
		return w.seq <= watchRecords
	}
	if w.found {
		return false
	}
	// Under the handshake keys (the encrypted flight, the Finished).
	w.misses++
	return w.misses <= watchRecords
}

// peek reports whether the record hdr|body opens under k at k.seq, with its
// content type and its first content byte (-1: no content). body is left
// as it is (it is crypto/tls's, still to be read): the plaintext goes to a
// shared scratch buffer, wiped after.
func (k *Keys) peek(hdr, body []byte) (typ byte, first int, ok bool) {
	if len(body) > MaxCiphertext {
		return 0, -1, false
	}
	bp := watchScratch.Get().(*[]byte)
	defer watchScratch.Put(bp)
	nonce := k.nonce()
	pt, err := k.aead.Open((*bp)[:0], nonce[:], body, hdr)
	if err != nil {
		return 0, -1, false
	}
	defer clear(pt)
	i := len(pt) - 1
	for i >= 0 && pt[i] == 0 {
		i--
	}
	if i < 0 {
		return 0, -1, false
	}
	first = -1
	if i > 0 {
		first = int(pt[0])
	}
	return pt[i], first, true
}
