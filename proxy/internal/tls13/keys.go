package tls13

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/sha256"
	"crypto/sha512"
	"crypto/tls"
	"encoding/binary"
	"hash"
	"slices"

	"golang.org/x/crypto/chacha20poly1305"
)

// The TLS 1.3 key schedule and record protection (RFC 8446 5.2-5.3, 7) of
// the loops' record layer (record.go): the suites, the traffic keys of
// one direction, and one record opened or sealed.

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

// Keys is one direction's protection: its current traffic secret
// (kept for KeyUpdate), the AEAD and IV derived from it, and the next
// record's sequence number.
type Keys struct {
	suite  *tlsSuite
	secret []byte
	aead   cipher.AEAD
	iv     [12]byte
	seq    uint64
}

func newKeys(s *tlsSuite, secret []byte, seq uint64) (*Keys, error) {
	k := &Keys{suite: s}
	if err := k.setSecret(append([]byte(nil), secret...)); err != nil {
		return nil, err
	}
	k.seq = seq
	return k, nil
}

func (k *Keys) setSecret(secret []byte) error {
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
func (k *Keys) Update() error {
	next, err := expandLabel(k.suite.hash, k.secret, "traffic upd", k.suite.hash().Size())
	if err != nil {
		return err
	}
	return k.setSecret(next)
}

// nonce is the per-record nonce: the IV with the sequence number XORed
// into its last 8 bytes (RFC 8446 5.3).
func (k *Keys) nonce() [12]byte {
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
func (k *Keys) OpenRecord(rec []byte) ([]byte, byte, error) {
	nonce := k.nonce()
	ct := rec[RecordHeaderLen:]
	pt, err := k.aead.Open(ct[:0], nonce[:], ct, rec[:RecordHeaderLen])
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
		return nil, 0, Alert{AlertUnexpectedMessage, "record without a content type"}
	}
	if i > MaxPlaintext {
		return nil, 0, Alert{AlertRecordOverflow, "record content over 2^14 bytes"}
	}
	return pt[:i], pt[i], nil
}

// sealRecord appends one record of type typ carrying content (at most
// MaxPlaintext bytes) to dst.
func (k *Keys) SealRecord(dst []byte, typ byte, content []byte) []byte {
	n := len(content) + 1 + TagLen
	// Room for the tag too, so that the seal stays in dst.
	dst = slices.Grow(dst, RecordHeaderLen+n)
	dst = append(dst, RecordTypeData, 3, 3, byte(n>>8), byte(n))
	hdr := len(dst) - RecordHeaderLen
	body := len(dst)
	dst = append(dst, content...)
	dst = append(dst, typ)
	nonce := k.nonce()
	k.seq++
	// Sealed in place: the content was appended first.
	sealed := k.aead.Seal(dst[body:body], nonce[:], dst[body:], dst[hdr:body])
	return dst[:body+len(sealed)]
}
