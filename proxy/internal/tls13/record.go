package tls13

import (
	"fmt"
	"time"
)

// The TLS 1.3 record layer (RFC 8446 section 5) of a media socket whose
// handshake crypto/tls did: once the socket is relayed, the epoll loop
// reads and writes its records itself (handoff.go), so a TLS client is
// served like a plain one, with no goroutine pair and no tls.Conn. Only
// application data, KeyUpdate, and alerts exist after the handshake; the
// rest is a protocol error.

// TLS 1.3 record limits (RFC 8446 5.1, 5.2).
const (
	RecordHeaderLen     = 5
	MaxPlaintext        = 1 << 14
	MaxCiphertext       = MaxPlaintext + 256
	RecordTypeAlert     = 21
	RecordTypeHandshake = 22
	RecordTypeData      = 23
	TagLen              = 16
	// A record's overhead on the wire: header, inner content type, tag.
	recordOverhead = RecordHeaderLen + 1 + TagLen
)

// Handshake messages allowed after the handshake.
const (
	MsgNewSessionTicket = 4
	MsgKeyUpdate        = 24
)

// Alerts (RFC 8446 6).
const (
	AlertCloseNotify       = 0
	AlertUnexpectedMessage = 10
	AlertBadRecordMAC      = 20
	AlertRecordOverflow    = 22
	AlertDecodeError       = 50
	AlertUserCanceled      = 90
)

// RekeyAfter is how many records edge seals under one key before it
// updates its own (a KeyUpdate without update_requested). RFC 8446 5.5
// bounds AES-GCM at 2^24.5 full records per key; a call never comes near,
// but the loop keeps the bound itself. A variable so that a test can make
// edge rotate within a few messages.
var RekeyAfter uint64 = 1 << 23

// What a client may make edge open without data. crypto/tls ends a
// connection after more than MaxUselessRecords records in a row that carry
// no application data (its MaxUselessRecords: empty records, KeyUpdates,
// ignored warnings); the loops do the same, so that opening records nobody
// reads, or deriving keys (a KeyUpdate costs about 10 us), cannot take a
// loop's time from the other sockets. crypto/tls has no bound on
// KeyUpdates between data records; the loops allow KeyUpdateBurst at once
// and one per keyUpdateEvery after that: a client needs a new key after
// some 2^24 records, not several a second.
const (
	MaxUselessRecords = 16
	KeyUpdateBurst    = 16
	keyUpdateEvery    = time.Second
)

// Alert is a protocol failure and the alert it sends.
type Alert struct {
	desc byte
	msg  string
}

func (a Alert) Error() string { return "tls: " + a.msg }

var errBadRecordMAC = Alert{AlertBadRecordMAC, "record authentication failed"}

// PeerAlert is a fatal alert from the peer (its description).
type PeerAlert byte

func (a PeerAlert) Error() string { return fmt.Sprintf("tls: the peer sent fatal alert %d", byte(a)) }

// Records is a relayed client's record layer: both directions' keys,
// a partial inbound record carried across reads, and the events that the
// last open found. Only its loop touches it.
type Records struct {
	in, out *Keys
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
	// time: the rate bound holds while it stays within KeyUpdateBurst
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
func (r *Records) Open(buf []byte, now int64) (int, error) {
	plain, off := 0, 0
	for !r.peerClosed && len(buf)-off >= RecordHeaderLen {
		h := buf[off : off+RecordHeaderLen]
		n := int(h[3])<<8 | int(h[4])
		switch {
		case h[0] != RecordTypeData:
			// Alerts and handshake messages are protected after the
			// handshake; a change_cipher_spec is no longer allowed.
			return 0, Alert{AlertUnexpectedMessage, fmt.Sprintf("unprotected record of type %d", h[0])}
		case h[1] != 3 || h[2] != 3:
			return 0, Alert{AlertDecodeError, "record version is not 0x0303"}
		case n > MaxCiphertext:
			return 0, Alert{AlertRecordOverflow, fmt.Sprintf("record of %d bytes", n)}
		case n < 1+TagLen:
			return 0, Alert{AlertDecodeError, fmt.Sprintf("record of %d bytes", n)}
		}
		if len(buf)-off < RecordHeaderLen+n {
			break
		}
		content, typ, err := r.in.OpenRecord(buf[off : off+RecordHeaderLen+n])
		off += RecordHeaderLen + n
		if err != nil {
			return 0, err
		}
		r.useless++
		switch typ {
		case RecordTypeData:
			if len(content) > 0 {
				r.useless = 0
			}
			plain += copy(buf[plain:], content)
		case RecordTypeHandshake:
			if err := r.handshake(content, now); err != nil {
				return 0, err
			}
		case RecordTypeAlert:
			if err := r.alert(content); err != nil {
				return 0, err
			}
		default:
			return 0, Alert{AlertUnexpectedMessage, fmt.Sprintf("record content type %d", typ)}
		}
		if r.useless > MaxUselessRecords {
			return 0, Alert{AlertUnexpectedMessage, "too many records without application data"}
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
func (r *Records) handshake(b []byte, now int64) error {
	if len(b) == 0 {
		return Alert{AlertUnexpectedMessage, "empty handshake record"}
	}
	for len(b) > 0 {
		if len(b) < 4 {
			return Alert{AlertUnexpectedMessage, "handshake message split across records"}
		}
		typ, n := b[0], int(b[1])<<16|int(b[2])<<8|int(b[3])
		if len(b) < 4+n {
			return Alert{AlertUnexpectedMessage, "handshake message split across records"}
		}
		body := b[4 : 4+n]
		b = b[4+n:]
		switch typ {
		case MsgKeyUpdate:
			if n != 1 || body[0] > 1 {
				return Alert{AlertDecodeError, "malformed KeyUpdate"}
			}
			if len(b) > 0 {
				return Alert{AlertUnexpectedMessage, "data after KeyUpdate in its record"}
			}
			due := max(r.updatesDue, now) + int64(keyUpdateEvery)
			if due-now > KeyUpdateBurst*int64(keyUpdateEvery) {
				return Alert{AlertUnexpectedMessage, "KeyUpdates too often"}
			}
			r.updatesDue = due
			if body[0] == 1 {
				r.owedUpdate = !r.closeSent // nothing follows close_notify
			}
			if err := r.in.Update(); err != nil {
				return err
			}
		case MsgNewSessionTicket:
			return Alert{AlertUnexpectedMessage, "NewSessionTicket from a client"}
		default:
			return Alert{AlertUnexpectedMessage, fmt.Sprintf("post-handshake message of type %d", typ)}
		}
	}
	return nil
}

func (r *Records) alert(b []byte) error {
	if len(b) != 2 {
		return Alert{AlertDecodeError, "malformed alert"}
	}
	switch {
	case b[1] == AlertCloseNotify:
		r.peerClosed = true
		return nil
	case b[1] == AlertUserCanceled && b[0] == 1:
		return nil // a warning; close_notify follows
	}
	return PeerAlert(b[1])
}

// seal appends plain to dst as records of at most MaxPlaintext bytes,
// with edge's KeyUpdate first where one is owed or the key is worn.
func (r *Records) Seal(dst []byte, typ byte, plain []byte) []byte {
	for {
		if r.owedUpdate || r.out.seq >= RekeyAfter {
			dst = r.KeyUpdate(dst)
		}
		n := min(len(plain), MaxPlaintext)
		dst = r.out.SealRecord(dst, typ, plain[:n])
		if plain = plain[n:]; len(plain) == 0 {
			return dst
		}
	}
}

// keyUpdate appends edge's KeyUpdate (update_not_requested) under the
// current key, then moves to the next write key (RFC 8446 4.6.3).
func (r *Records) KeyUpdate(dst []byte) []byte {
	r.owedUpdate = false
	dst = r.out.SealRecord(dst, RecordTypeHandshake, []byte{MsgKeyUpdate, 0, 0, 1, 0})
	// HKDF-Expand with the suite's own hash and length cannot fail.
	_ = r.out.Update()
	return dst
}

// alertRecord is a sealed alert: close_notify (a warning) or a fatal one.
func (r *Records) AlertRecord(desc byte) []byte {
	level := byte(2)
	if desc == AlertCloseNotify {
		level = 1
	}
	return r.out.SealRecord(nil, RecordTypeAlert, []byte{level, desc})
}

// wipe forgets the keys of an ended socket.
func (r *Records) Wipe() {
	for _, k := range []*Keys{r.in, r.out} {
		if k != nil {
			clear(k.secret)
		}
	}
	r.part = nil
}
