package telnyx

import (
	"crypto/ed25519"
	"errors"
	"fmt"

	"filippo.io/edwards25519"

	"github.com/edge-voice/edge/plugins"
)

// Why a 32-byte string is not a public key edge verifies with. crypto/ed25519
// checks none of these: it decodes the key as given, reduces a y that is not
// below p, and verifies without the cofactor.
var (
	// errKeyNotOnCurve: no point of Ed25519's curve has this y.
	errKeyNotOnCurve = errors.New("is not a point of Ed25519's curve")
	// errKeyNonCanonical: y is p or above, or x is zero with the sign bit
	// set. RFC 8032 (5.1.3) makes a decoder refuse both; Telnyx's key is
	// the canonical encoding of its point, so it never spells one.
	errKeyNonCanonical = errors.New("is a non-canonical encoding of a point")
	// errKeySmallOrder: [8]A is the identity. Under such a key a signature
	// (R = [S]B, S) verifies whenever [k]A is the identity, for one random
	// S in at most 8: anyone forges webhooks with no private key, a fresh
	// signature each time, so the replay check never fires.
	errKeySmallOrder = errors.New("is a point of small order, against which anyone can forge signatures")
	// errKeyTorsion: A has a small-order component ([L]A is not the
	// identity). A key made as Ed25519 makes keys, [a]B, lies in the
	// prime-order group; one with a torsion component is not a key of
	// Telnyx's, and verifiers disagree about its signatures.
	errKeyTorsion = errors.New("has a small-order (torsion) component: it is not in the prime-order group Ed25519 keys are made in")
)

// minusOne is L-1 as a scalar: [L-1]A + A is [L]A. Built once from the
// constant 1, whose 32 bytes SetCanonicalBytes cannot refuse.
var minusOne = func() *edwards25519.Scalar {
	one, err := edwards25519.NewScalar().SetCanonicalBytes(append([]byte{1}, make([]byte, 31)...))
	if err != nil {
		panic("telnyx: the scalar 1: " + err.Error())
	}
	return edwards25519.NewScalar().Negate(one)
}()

// checkPublicKey says why key is not a safe Ed25519 public key, or nil:
// 32 bytes, the canonical encoding of a point of the curve, in the
// prime-order subgroup (which also rules out the small-order points). The
// key is public, so the checks may take variable time.
func checkPublicKey(key []byte) error {
	if len(key) != ed25519.PublicKeySize {
		return fmt.Errorf("is not %d bytes", ed25519.PublicKeySize)
	}
	a, err := new(edwards25519.Point).SetBytes(key)
	if err != nil {
		return errKeyNotOnCurve
	}
	// SetBytes takes y modulo p and -0 for 0; the encoding of the point it
	// decoded tells a canonical key from another spelling of that point.
	if string(a.Bytes()) != string(key) {
		return errKeyNonCanonical
	}
	id := edwards25519.NewIdentityPoint()
	if new(edwards25519.Point).MultByCofactor(a).Equal(id) == 1 {
		return errKeySmallOrder
	}
	// VarTimeDoubleScalarBaseMult multiplies by the scalar's canonical
	// integer, L-1, so the sum is [L]A: the identity exactly for points of
	// the prime-order subgroup.
	l := new(edwards25519.Point).VarTimeDoubleScalarBaseMult(minusOne, a, edwards25519.NewScalar())
	if l.Add(l, a).Equal(id) != 1 {
		return errKeyTorsion
	}
	return nil
}

// PublicKeys are Ed25519 public keys that checkPublicKey accepted. Only
// ParsePublicKeys makes them, so Verify, which takes nothing else, never
// holds an unsafe key, whatever path keys reach it by; the zero value
// holds none. Checking once here, not on every webhook, keeps the check's
// scalar multiplication off the request path.
type PublicKeys struct {
	keys []ed25519.PublicKey
}

// Len is how many keys there are; 0 means no verification.
func (k PublicKeys) Len() int { return len(k.keys) }

// ParsePublicKeys parses the auth_tokens setting: comma-separated base64
// Ed25519 public keys as Telnyx's portal shows them. A key that is not one,
// or that checkPublicKey refuses, is refused naming its position and why,
// never its value; then no key is returned.
func ParsePublicKeys(list string) (PublicKeys, error) {
	var keys []ed25519.PublicKey
	var errs []error
	for i, item := range plugins.SplitList(list) {
		b, ok := decodeBase64(item, keyEncodedLen, ed25519.PublicKeySize)
		if !ok {
			errs = append(errs, &plugins.InvalidSetting{Key: SettingAuthTokens,
				Reason: fmt.Sprintf("item %d is not a Telnyx public key (%d characters of base64 for %d bytes)", i+1, keyEncodedLen, ed25519.PublicKeySize)})
			continue
		}
		if err := checkPublicKey(b); err != nil {
			errs = append(errs, &plugins.InvalidSetting{Key: SettingAuthTokens,
				Reason: fmt.Sprintf("item %d %v", i+1, err)})
			continue
		}
		keys = append(keys, ed25519.PublicKey(b))
	}
	if err := errors.Join(errs...); err != nil {
		return PublicKeys{}, err
	}
	return PublicKeys{keys: keys}, nil
}
