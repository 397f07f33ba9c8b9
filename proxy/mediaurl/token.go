package mediaurl

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"strings"
	"sync/atomic"
	"time"
)

// tokenPrefix starts every token segment: /ws/pod/<pod>/c.<token>/<rest>.
// A first path segment without it is not a token.
const tokenPrefix = "c."

// macLen is the HMAC-SHA256 truncated to 128 bits (RFC 2104 section 5
// allows truncation to half the hash), which keeps the URL short.
const macLen = 16

// Token errors; all of them answer 403.
var (
	ErrBadToken     = errors.New("bad media token")
	ErrExpiredToken = errors.New("expired media token")
)

// Signer mints and verifies the per-call media tokens. A token binds a call
// id, the pod, the path the pod is asked for and an expiry with an
// HMAC-SHA256 of a secret that every replica shares, so a socket can arrive
// at any replica and a token is no use for another pod, another path on the
// pod, or after it expires.
//
// Layout before base64url (no padding):
//
//	len(callID) (1 byte) | callID | expiry (8 bytes, unix seconds, big endian) | mac (16 bytes)
//
// mac = HMAC-SHA256(secret, "edge-media-v2" 0 pod 0 path 0 callID 0 expiry)[:16].
// The pod and the path are not inside the token: they are the URL around it.
type Signer struct {
	secret []byte
	ttl    atomic.Int64 // time.Duration; SetTTL changes it at run time
	now    func() time.Time
}

// NewSigner returns a signer; ttl is how long a minted token may be used to
// open a socket (an open socket lives on past it).
func NewSigner(secret []byte, ttl time.Duration) *Signer {
	s := &Signer{secret: append([]byte(nil), secret...), now: time.Now}
	s.SetTTL(ttl)
	return s
}

// SetTTL changes the lifetime of tokens minted from now on.
func (s *Signer) SetTTL(ttl time.Duration) { s.ttl.Store(int64(ttl)) }

// RandomSecret returns 32 random bytes, for a single replica without a
// configured secret.
func RandomSecret() []byte {
	b := make([]byte, 32)
	rand.Read(b) // never fails (crypto/rand, Go 1.24+)
	return b
}

// Mint returns the path segment for callID on pod, tokenPrefix included,
// valid for the pod path that follows it in the URL.
func (s *Signer) Mint(callID, pod, path string) string {
	exp := s.now().Add(time.Duration(s.ttl.Load())).Unix()
	raw := make([]byte, 0, 1+len(callID)+8+macLen)
	raw = append(raw, byte(len(callID)))
	raw = append(raw, callID...)
	raw = binary.BigEndian.AppendUint64(raw, uint64(exp))
	raw = append(raw, s.mac(callID, pod, path, exp)...)
	return tokenPrefix + base64.RawURLEncoding.EncodeToString(raw)
}

// Verify checks segment (tokenPrefix included) for pod and the path after
// it, and returns its call id. The MAC is compared in constant time;
// nothing else is secret.
func (s *Signer) Verify(segment, pod, path string) (callID string, err error) {
	enc, ok := strings.CutPrefix(segment, tokenPrefix)
	if !ok || len(enc) > 512 {
		return "", ErrBadToken
	}
	raw, err := base64.RawURLEncoding.DecodeString(enc)
	if err != nil || len(raw) < 1+1+8+macLen {
		return "", ErrBadToken
	}
	n := int(raw[0])
	if n == 0 || len(raw) != 1+n+8+macLen {
		return "", ErrBadToken
	}
	callID = string(raw[1 : 1+n])
	exp := int64(binary.BigEndian.Uint64(raw[1+n : 1+n+8]))
	if !hmac.Equal(raw[1+n+8:], s.mac(callID, pod, path, exp)) {
		return "", ErrBadToken
	}
	if s.now().Unix() > exp {
		return "", ErrExpiredToken
	}
	return callID, nil
}

func (s *Signer) mac(callID, pod, path string, exp int64) []byte {
	h := hmac.New(sha256.New, s.secret)
	h.Write([]byte("edge-media-v2\x00"))
	h.Write([]byte(pod))
	h.Write([]byte{0})
	h.Write([]byte(path))
	h.Write([]byte{0})
	h.Write([]byte(callID))
	h.Write([]byte{0})
	var e [8]byte
	binary.BigEndian.PutUint64(e[:], uint64(exp))
	h.Write(e[:])
	return h.Sum(nil)[:macLen]
}
