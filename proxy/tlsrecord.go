package proxy

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/sha256"
	"crypto/sha512"
	"crypto/tls"
	"encoding/binary"
	"fmt"
	"hash"
	"slices"

	"golang.org/x/crypto/chacha20poly1305"
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

// tlsSuite is a TLS 1.3 cipher suite the loops implement.
type tlsSuite struct {
	id     uint16
	keyLen int
	hash   func() hash.Hash
	aead   func(key []byte) (cipher.AEAD, error)
}

func aesGCM(key []byte) (cipher.AEAD, error) {
	b, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(b)
}

var (
	suiteAES128 = &tlsSuite{tls.TLS_AES_128_GCM_SHA256, 16, sha256.New, aesGCM}
	suiteAES256 = &tlsSuite{tls.TLS_AES_256_GCM_SHA384, 32, sha512.New384, aesGCM}
	suiteChaCha = &tlsSuite{tls.TLS_CHACHA20_POLY1305_SHA256, chacha20poly1305.KeySize, sha256.New, chacha20poly1305.New}
)

func suiteByID(id uint16) *tlsSuite {
	for _, s := range []*tlsSuite{suiteAES128, suiteAES256, suiteChaCha} {
		if s.id == id {
			return s
		}
	}
	return nil
}

// suitesForSecret are the suites whose hash makes a traffic secret of n
// bytes: SHA-256 (AES-128-GCM, ChaCha20-Poly1305) or SHA-384 (AES-256-GCM).
func suitesForSecret(n int) []*tlsSuite {
	switch n {
	case 32:
		return []*tlsSuite{suiteAES128, suiteChaCha}
	case 48:
		return []*tlsSuite{suiteAES256}
	}
	return nil
}

// expandLabel is HKDF-Expand-Label with an empty context (RFC 8446 7.1).
func expandLabel(h func() hash.Hash, secret []byte, label string, n int) ([]byte, error) {
	info := make([]byte, 0, 4+6+len(label))
	info = binary.BigEndian.AppendUint16(info, uint16(n))
	info = append(info, byte(6+len(label)))
	info = append(info, "tls13 "...)
	info = append(info, label...)
	info = append(info, 0)
	return hkdf.Expand(h, secret, string(info), n)
}

// trafficKeys is one direction's protection: its current traffic secret
// (kept for KeyUpdate), the AEAD and IV derived from it, and the next
// record's sequence number.
type trafficKeys struct {
	suite  *tlsSuite
	secret []byte
	aead   cipher.AEAD
	iv     [12]byte
	seq    uint64
}

func newTrafficKeys(s *tlsSuite, secret []byte, seq uint64) (*trafficKeys, error) {
	k := &trafficKeys{suite: s}
	if err := k.setSecret(append([]byte(nil), secret...)); err != nil {
		return nil, err
	}
	k.seq = seq
	return k, nil
}

func (k *trafficKeys) setSecret(secret []byte) error {
	key, err := expandLabel(k.suite.hash, secret, "key", k.suite.keyLen)
	if err != nil {
		return err
	}
	iv, err := expandLabel(k.suite.hash, secret, "iv", len(k.iv))
	if err != nil {
		return err
	}
	a, err := k.suite.aead(key)
	if err != nil {
		return err
	}
	clear(k.secret)
	k.secret, k.aead, k.seq = secret, a, 0
	copy(k.iv[:], iv)
	return nil
}

// update moves to the next traffic secret (RFC 8446 7.2), sequence 0.
func (k *trafficKeys) update() error {
	next, err := expandLabel(k.suite.hash, k.secret, "traffic upd", k.suite.hash().Size())
	if err != nil {
		return err
	}
	return k.setSecret(next)
}

// nonce is the per-record nonce: the IV with the sequence number XORed
// into its last 8 bytes (RFC 8446 5.3).
func (k *trafficKeys) nonce() [12]byte {
	n := k.iv
	var s [8]byte
	binary.BigEndian.PutUint64(s[:], k.seq)
	for i := range s {
		n[4+i] ^= s[i]
	}
	return n
}

// openRecord authenticates and decrypts rec (header included) in place,
// returning the content and its inner type.
func (k *trafficKeys) openRecord(rec []byte) ([]byte, byte, error) {
	nonce := k.nonce()
	ct := rec[recordHeaderLen:]
	pt, err := k.aead.Open(ct[:0], nonce[:], ct, rec[:recordHeaderLen])
	if err != nil {
		return nil, 0, errBadRecordMAC
	}
	k.seq++
	// TLSInnerPlaintext: content, type, zero padding.
	i := len(pt) - 1
	for i >= 0 && pt[i] == 0 {
		i--
	}
	if i < 0 {
		return nil, 0, tlsAlert{alertUnexpectedMessage, "record without a content type"}
	}
	if i > maxPlaintext {
		return nil, 0, tlsAlert{alertRecordOverflow, "record content over 2^14 bytes"}
	}
	return pt[:i], pt[i], nil
}

// sealRecord appends one record of type typ carrying content (at most
// maxPlaintext bytes) to dst.
func (k *trafficKeys) sealRecord(dst []byte, typ byte, content []byte) []byte {
	n := len(content) + 1 + tagLen
	// Room for the tag too, so that the seal stays in dst.
	dst = slices.Grow(dst, recordHeaderLen+n)
	dst = append(dst, recordTypeAppl, 3, 3, byte(n>>8), byte(n))
	hdr := len(dst) - recordHeaderLen
	body := len(dst)
	dst = append(dst, content...)
	dst = append(dst, typ)
	nonce := k.nonce()
	k.seq++
	// Sealed in place: the content was appended first.
	sealed := k.aead.Seal(dst[body:body], nonce[:], dst[body:], dst[hdr:body])
	return dst[:body+len(sealed)]
}

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
}

// open decrypts the complete records at the start of buf in place and
// moves their application data to the front of buf, returning its
// length; an incomplete last record is kept in r.part. The caller puts
// r.part in front of the new bytes before calling (see eloop read). After
// close_notify the rest is ignored.
func (r *tlsRecords) open(buf []byte) (int, error) {
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
		switch typ {
		case recordTypeAppl:
			plain += copy(buf[plain:], content)
		case recordTypeHShake:
			if err := r.handshake(content); err != nil {
				return 0, err
			}
		case recordTypeAlert:
			if err := r.alert(content); err != nil {
				return 0, err
			}
		default:
			return 0, tlsAlert{alertUnexpectedMessage, fmt.Sprintf("record content type %d", typ)}
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
func (r *tlsRecords) handshake(b []byte) error {
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
