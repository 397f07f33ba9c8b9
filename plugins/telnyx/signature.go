package telnyx

import (
	"crypto/ed25519"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Telnyx signs every webhook with Ed25519 (its webhook documentation and
// its official SDKs): the signature, base64 in SignatureHeader, is over
// TimestampHeader's decimal Unix seconds, a '|', and the raw body, with the
// account's public key (Mission Control, Keys & Credentials, base64).
const (
	SignatureHeader = "Telnyx-Signature-Ed25519"
	TimestampHeader = "Telnyx-Timestamp"
)

// Tolerance is how far a webhook's timestamp may be from the plugin's
// clock, either way (Telnyx's SDKs allow 5 minutes). An older delivery is
// refused as stale; within the window edge refuses a replay through the
// signature, reported as the nonce.
const Tolerance = 5 * time.Minute

// Verification failures; all answer 403.
var (
	ErrNoSignature  = errors.New("missing " + SignatureHeader + " or " + TimestampHeader)
	ErrBadTimestamp = errors.New(TimestampHeader + " is not Unix seconds")
	ErrStale        = fmt.Errorf("%s is more than %s away from now", TimestampHeader, Tolerance)
	ErrBadSignature = errors.New("invalid " + SignatureHeader)
)

// Encoded lengths: a 64-byte signature and a 32-byte key in padded
// base64. A longer header is refused before it is decoded.
const (
	sigEncodedLen = 88
	keyEncodedLen = 44
	// maxTimestampLen bounds the digits read (leading zeros are valid,
	// as Telnyx's SDK reads them); an overflow is refused by ParseInt.
	maxTimestampLen = 32
)

// Verify checks a webhook's signature headers and raw body against every
// key (rotation; each key is tried, so the time taken does not say which
// one matched, though nothing here is secret: the keys are public). It
// accepts exactly what Telnyx's official SDK accepts
// (TestVerifyAgreesWithTelnyxSDK), under keys that ParsePublicKeys
// checked: a small-order key, under which crypto/ed25519 accepts
// forgeries, is never among them (TestUnsafeKeysVerifyNothing). It returns
// the signature's bytes, unique to the signed timestamp and body (Ed25519
// signatures are deterministic, and Go refuses a non-canonical one), for
// edge to refuse their replay whichever way the base64 spelled them.
func Verify(keys PublicKeys, timestamp, signature string, body []byte, now time.Time) ([]byte, error) {
	if timestamp == "" || signature == "" {
		return nil, ErrNoSignature
	}
	ts, err := parseTimestamp(timestamp)
	if err != nil {
		return nil, err
	}
	if d := now.Sub(time.Unix(ts, 0)); d > Tolerance || d < -Tolerance {
		return nil, ErrStale
	}
	sig, ok := decodeBase64(signature, sigEncodedLen, ed25519.SignatureSize)
	if !ok {
		return nil, ErrBadSignature
	}
	msg := make([]byte, 0, len(timestamp)+1+len(body))
	msg = append(append(append(msg, timestamp...), '|'), body...)
	match := false
	for _, k := range keys.keys {
		if ed25519.Verify(k, msg, sig) {
			match = true
		}
	}
	if !match {
		return nil, ErrBadSignature
	}
	return sig, nil
}

// parseTimestamp accepts decimal digits only, as Telnyx's SDKs do: no
// sign, no spaces, no fraction.
func parseTimestamp(s string) (int64, error) {
	if len(s) > maxTimestampLen {
		return 0, ErrBadTimestamp
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, ErrBadTimestamp
		}
	}
	ts, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, ErrBadTimestamp
	}
	return ts, nil
}

// decodeBase64 decodes padded standard base64 of exactly encLen
// characters into size bytes, as Telnyx's SDK decodes it: Go's decoder
// skips '\r' and '\n', which the SDK refuses; like the SDK it ignores the
// bits that padding discards, so the caller must not take the spelling
// for the value.
func decodeBase64(s string, encLen, size int) ([]byte, bool) {
	if len(s) != encLen || strings.ContainsAny(s, "\r\n") {
		return nil, false
	}
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil || len(b) != size {
		return nil, false
	}
	return b, true
}
