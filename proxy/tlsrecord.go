package proxy

import (
	"fmt"
	"time"
)

// The TLS 1.3 record layer (RFC 8446 section 5) of a media socket whose
// handshake crypto/tls did: once the socket is relayed, the epoll loop
// reads and writes its records itself (tlshandoff.go), so a TLS client is
// served like a plain one, with no goroutine pair and no tls.Conn. Only
// application data, KeyUpdate, and alerts exist after the handshake; the
// rest is a protocol error.

// TLS 1.3 record limits (RFC 8446 5.1, 5.2).
const (
	recordHeaderLen  = 5
	maxPlaintext     = 1 << 14
	maxCiphertext13  = maxPlaintext + 256
	recordTypeAlert  = 21
	recordTypeHShake = 22
	recordTypeAppl   = 23
	tagLen           = 16
	// A record's overhead on the wire: header, inner content type, tag.
	recordOverhead = recordHeaderLen + 1 + tagLen
)

// Handshake messages allowed after the handshake.
const (
	msgNewSessionTicket = 4
	msgKeyUpdate        = 24
)

// Alerts (RFC 8446 6).
const (
	alertCloseNotify       = 0
	alertUnexpectedMessage = 10
	alertBadRecordMAC      = 20
	alertRecordOverflow    = 22
	alertDecodeError       = 50
	alertUserCanceled      = 90
)

// rekeyAfter is how many records edge seals under one key before it
// updates its own (a KeyUpdate without update_requested). RFC 8446 5.5
// bounds AES-GCM at 2^24.5 full records per key; a call never comes near,
// but the loop keeps the bound itself. A variable so that a test can make
// edge rotate within a few messages.
var rekeyAfter uint64 = 1 << 23

// What a client may make edge open without data. crypto/tls ends a
// connection after more than maxUselessRecords records in a row that carry
// no application data (its maxUselessRecords: empty records, KeyUpdates,
// ignored warnings); the loops do the same, so that opening records nobody
// reads, or deriving keys (a KeyUpdate costs about 10 us), cannot take a
// loop's time from the other sockets. crypto/tls has no bound on
// KeyUpdates between data records; the loops allow keyUpdateBurst at once
// and one per keyUpdateEvery after that: a client needs a new key after
// some 2^24 records, not several a second.
const (
	maxUselessRecords = 16
	keyUpdateBurst    = 16
	keyUpdateEvery    = time.Second
)

// tlsAlert is a protocol failure and the alert it sends.
type tlsAlert struct {
	desc byte
	msg  string
}

func (a tlsAlert) Error() string { return "tls: " + a.msg }

var errBadRecordMAC = tlsAlert{alertBadRecordMAC, "record authentication failed"}

// peerAlert is a fatal alert from the peer (its description).
type peerAlert byte

func (a peerAlert) Error() string { return fmt.Sprintf("tls: the peer sent fatal alert %d", byte(a)) }

// tlsRecords is a relayed client's record layer: both directions' keys,
// a partial inbound record carried across reads, and the events that the
// last open found. Only its loop touches it.
type tlsRecords struct {
	in, out *trafficKeys
	// part is the start of a record not yet complete (nil when none: an
	// idle stream holds no buffer).
	part []byte
	// peerClosed: the client sent close_notify; owedUpdate: it asked for
	// our KeyUpdate (update_requested), which goes out before anything
	// else is sealed; closeSent: edge's close_notify is queued.
	peerClosed, owedUpdate, closeSent bool
	// useless counts the records in a row without application data;
	// updatesDue is when the client's KeyUpdates would be paid off at
	// one per keyUpdateEvery (on the loop's clock, a virtual scheduling
	// time: the rate bound holds while it stays within keyUpdateBurst
	// intervals of now).
	useless    int
	updatesDue int64
}

// open decrypts the complete records at the start of buf in place and
// moves their application data to the front of buf, returning its
// length; an incomplete last record is kept in r.part. The caller puts
// r.part in front of the new bytes before calling (see eloop read); now
// is its clock, in nanoseconds, for the KeyUpdate rate. After close_notify
// the rest is ignored.
func (r *tlsRecords) open(buf []byte, now int64) (int, error) {
	plain, off := 0, 0
	for !r.peerClosed && len(buf)-off >= recordHeaderLen {
		h := buf[off : off+recordHeaderLen]
		n := int(h[3])<<8 | int(h[4])
		switch {
		case h[0] != recordTypeAppl:
			// Alerts and handshake messages are protected after the
			// handshake; a change_cipher_spec is no longer allowed.
			return 0, tlsAlert{alertUnexpectedMessage, fmt.Sprintf("unprotected record of type %d", h[0])}
		case h[1] != 3 || h[2] != 3:
			return 0, tlsAlert{alertDecodeError, "record version is not 0x0303"}
		case n > maxCiphertext13:
			return 0, tlsAlert{alertRecordOverflow, fmt.Sprintf("record of %d bytes", n)}
		case n < 1+tagLen:
			return 0, tlsAlert{alertDecodeError, fmt.Sprintf("record of %d bytes", n)}
		}
		if len(buf)-off < recordHeaderLen+n {
			break
		}
		content, typ, err := r.in.openRecord(buf[off : off+recordHeaderLen+n])
		off += recordHeaderLen + n
		if err != nil {
			return 0, err
		}
		r.useless++
		switch typ {
		case recordTypeAppl:
			if len(content) > 0 {
				r.useless = 0
			}
			plain += copy(buf[plain:], content)
		case recordTypeHShake:
			if err := r.handshake(content, now); err != nil {
				return 0, err
			}
		case recordTypeAlert:
			if err := r.alert(content); err != nil {
				return 0, err
			}
		default:
			return 0, tlsAlert{alertUnexpectedMessage, fmt.Sprintf("record content type %d", typ)}
		}
		if r.useless > maxUselessRecords {
			return 0, tlsAlert{alertUnexpectedMessage, "too many records without application data"}
		}
	}
	r.part = nil
	if rest := buf[off:]; len(rest) > 0 && !r.peerClosed {
		r.part = append([]byte(nil), rest...)
	}
	return plain, nil
}

// handshake handles post-handshake messages from the client: KeyUpdate
// only. A message split across records is refused: a KeyUpdate is 5
// bytes, and must end its record (RFC 8446 5.1: no message spans a key
// change).
func (r *tlsRecords) handshake(b []byte, now int64) error {
	if len(b) == 0 {
		return tlsAlert{alertUnexpectedMessage, "empty handshake record"}
	}
	for len(b) > 0 {
		if len(b) < 4 {
			return tlsAlert{alertUnexpectedMessage, "handshake message split across records"}
		}
		typ, n := b[0], int(b[1])<<16|int(b[2])<<8|int(b[3])
		if len(b) < 4+n {
			return tlsAlert{alertUnexpectedMessage, "handshake message split across records"}
		}
		body := b[4 : 4+n]
		b = b[4+n:]
		switch typ {
		case msgKeyUpdate:
			if n != 1 || body[0] > 1 {
				return tlsAlert{alertDecodeError, "malformed KeyUpdate"}
			}
			if len(b) > 0 {
				return tlsAlert{alertUnexpectedMessage, "data after KeyUpdate in its record"}
			}
			due := max(r.updatesDue, now) + int64(keyUpdateEvery)
			if due-now > keyUpdateBurst*int64(keyUpdateEvery) {
				return tlsAlert{alertUnexpectedMessage, "KeyUpdates too often"}
			}
			r.updatesDue = due
			if body[0] == 1 {
				r.owedUpdate = true
			}
			if err := r.in.update(); err != nil {
				return err
			}
		case msgNewSessionTicket:
			return tlsAlert{alertUnexpectedMessage, "NewSessionTicket from a client"}
		default:
			return tlsAlert{alertUnexpectedMessage, fmt.Sprintf("post-handshake message of type %d", typ)}
		}
	}
	return nil
}

func (r *tlsRecords) alert(b []byte) error {
	if len(b) != 2 {
		return tlsAlert{alertDecodeError, "malformed alert"}
	}
	switch {
	case b[1] == alertCloseNotify:
		r.peerClosed = true
		return nil
	case b[1] == alertUserCanceled && b[0] == 1:
		return nil // a warning; close_notify follows
	}
	return peerAlert(b[1])
}

// seal appends plain to dst as records of at most maxPlaintext bytes,
// with edge's KeyUpdate first where one is owed or the key is worn.
func (r *tlsRecords) seal(dst []byte, typ byte, plain []byte) []byte {
	for {
		if r.owedUpdate || r.out.seq >= rekeyAfter {
			dst = r.keyUpdate(dst)
		}
		n := min(len(plain), maxPlaintext)
		dst = r.out.sealRecord(dst, typ, plain[:n])
		if plain = plain[n:]; len(plain) == 0 {
			return dst
		}
	}
}

// keyUpdate appends edge's KeyUpdate (update_not_requested) under the
// current key, then moves to the next write key (RFC 8446 4.6.3).
func (r *tlsRecords) keyUpdate(dst []byte) []byte {
	r.owedUpdate = false
	dst = r.out.sealRecord(dst, recordTypeHShake, []byte{msgKeyUpdate, 0, 0, 1, 0})
	// HKDF-Expand with the suite's own hash and length cannot fail.
	_ = r.out.update()
	return dst
}

// alertRecord is a sealed alert: close_notify (a warning) or a fatal one.
func (r *tlsRecords) alertRecord(desc byte) []byte {
	level := byte(2)
	if desc == alertCloseNotify {
		level = 1
	}
	return r.out.sealRecord(nil, recordTypeAlert, []byte{level, desc})
}

// wipe forgets the keys of an ended socket.
func (r *tlsRecords) wipe() {
	for _, k := range []*trafficKeys{r.in, r.out} {
		if k != nil {
			clear(k.secret)
		}
	}
	r.part = nil
}
