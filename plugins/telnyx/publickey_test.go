package telnyx_test

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha512"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"filippo.io/edwards25519"

	"github.com/edge-voice/edge/plugins"
	"github.com/edge-voice/edge/plugins/telnyx"
)

// unsafeKey is a 32-byte string that decodes under crypto/ed25519 (or
// not) but is no key edge verifies with.
type unsafeKey struct {
	key []byte
	why string // what the refusal says after "item N "
	// secret, when known, is the discrete log of the key's prime-order
	// part (zero for a small-order key): with it the test signs under the
	// key as a forger (or a holder of the mixed key's prime part) can.
	secret *edwards25519.Scalar
}

const (
	smallOrder = "is a point of small order"
	nonCanon   = "is a non-canonical encoding of a point"
	notOnCurve = "is not a point of Ed25519's curve"
	torsion    = "has a small-order (torsion) component"
)

func mustHex(t *testing.T, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil || len(b) != 32 {
		t.Fatalf("bad test vector %q: %v", s, err)
	}
	return b
}

// unsafeKeys: the eight points of small order in their canonical
// encodings and the non-canonical ones that decode to them (the list of
// "Taming the many EdDSAs", Chalkias et al., 2020), a y for which no x
// exists, a point of the curve spelled with y >= p (no such spelling of a
// point of the prime-order group exists, so this one has a torsion
// component: the canonical check must refuse it before the order check
// would), and a real key plus a point of order 8.
func unsafeKeys(t *testing.T) map[string]unsafeKey {
	zero := edwards25519.NewScalar()
	seed := make([]byte, ed25519.SeedSize)
	if _, err := rand.Read(seed); err != nil {
		t.Fatal(err)
	}
	h := sha512.Sum512(seed)
	a, err := edwards25519.NewScalar().SetBytesWithClamping(h[:32])
	if err != nil {
		t.Fatal(err)
	}
	order8, err := new(edwards25519.Point).SetBytes(mustHex(t, "26e8958fc2b227b045c3f489f2ef98f0d5dfac05d3c63339b13802886d53fc05"))
	if err != nil {
		t.Fatal(err)
	}
	mixed := new(edwards25519.Point).Add(new(edwards25519.Point).ScalarBaseMult(a), order8).Bytes()
	return map[string]unsafeKey{
		"32 zero bytes (order 4)":               {make([]byte, 32), smallOrder, zero},
		"identity":                              {mustHex(t, "0100000000000000000000000000000000000000000000000000000000000000"), smallOrder, zero},
		"order 2":                               {mustHex(t, "ecffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f"), smallOrder, zero},
		"order 4, other sign":                   {mustHex(t, "0000000000000000000000000000000000000000000000000000000000000080"), smallOrder, zero},
		"order 8 (1)":                           {mustHex(t, "26e8958fc2b227b045c3f489f2ef98f0d5dfac05d3c63339b13802886d53fc05"), smallOrder, zero},
		"order 8 (2)":                           {mustHex(t, "26e8958fc2b227b045c3f489f2ef98f0d5dfac05d3c63339b13802886d53fc85"), smallOrder, zero},
		"order 8 (3)":                           {mustHex(t, "c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac037a"), smallOrder, zero},
		"order 8 (4)":                           {mustHex(t, "c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac03fa"), smallOrder, zero},
		"identity, y = p+1":                     {mustHex(t, "eeffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f"), nonCanon, zero},
		"identity, x = -0":                      {mustHex(t, "0100000000000000000000000000000000000000000000000000000000000080"), nonCanon, zero},
		"order 2, x = -0":                       {mustHex(t, "ecffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff"), nonCanon, zero},
		"order 4, y = p":                        {mustHex(t, "edffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f"), nonCanon, zero},
		"y = p+3, a point of the curve":         {mustHex(t, "f0ffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f"), nonCanon, nil},
		"y = 3, that point spelled canonically": {mustHex(t, "0300000000000000000000000000000000000000000000000000000000000000"), torsion, nil},
		"y = 2, not on the curve":               {mustHex(t, "0200000000000000000000000000000000000000000000000000000000000000"), notOnCurve, nil},
		"a real key plus a point of order 8":    {mixed, torsion, a},
	}
}

// An unsafe key in auth_tokens is refused naming its item and why, never
// its value; the safe key beside it is not blamed.
func TestParsePublicKeysRefusesUnsafeKeys(t *testing.T) {
	for name, tc := range unsafeKeys(t) {
		t.Run(name, func(t *testing.T) {
			bad := base64.StdEncoding.EncodeToString(tc.key)
			_, err := telnyx.ParsePublicKeys(pub(keyNew) + "," + bad)
			got := plugins.InvalidSettings(err)
			if len(got) != 1 || got[0].Key != telnyx.SettingAuthTokens || !strings.HasPrefix(got[0].Reason, "item 2 "+tc.why) {
				t.Fatalf("ParsePublicKeys: %v, want one auth_tokens refusal: item 2 %s", err, tc.why)
			}
			if strings.Contains(err.Error(), bad) {
				t.Errorf("the refusal names the key's value: %v", err)
			}
			if !errors.Is(err, plugins.ErrInvalidSettings) {
				t.Errorf("%v is not ErrInvalidSettings", err)
			}
		})
	}
}

// A key generated as Ed25519 generates keys is accepted, and verifies.
func TestParsePublicKeysTakesGeneratedKeys(t *testing.T) {
	var list []string
	var privs []ed25519.PrivateKey
	for range 32 {
		pk, sk, err := ed25519.GenerateKey(rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		list = append(list, base64.StdEncoding.EncodeToString(pk))
		privs = append(privs, sk)
	}
	keys, err := telnyx.ParsePublicKeys(strings.Join(list, ","))
	if err != nil {
		t.Fatalf("ParsePublicKeys of %d generated keys: %v", len(list), err)
	}
	now := time.Now()
	for i, sk := range privs {
		ts, sig := sign(sk, now, form)
		if _, err := telnyx.Verify(keys, ts, sig, []byte(form), now); err != nil {
			t.Errorf("key %d: %v", i+1, err)
		}
	}
}

// A signature that crypto/ed25519 alone accepts under an unsafe key
// (forged with no private key for a small-order key, made with the prime
// part's private key for a mixed one) verifies under none of the keys
// ParsePublicKeys returns for a list holding that key, whatever a caller
// makes of its error.
func TestUnsafeKeysVerifyNothing(t *testing.T) {
	now := time.Now()
	for name, tc := range unsafeKeys(t) {
		if tc.secret == nil {
			continue // nobody can sign under it
		}
		t.Run(name, func(t *testing.T) {
			key := ed25519.PublicKey(tc.key)
			keys, _ := telnyx.ParsePublicKeys(base64.StdEncoding.EncodeToString(tc.key) + "," + pub(keyNew))
			accepted := 0
			// Each try verifies under crypto/ed25519 with a chance of at
			// least 1/8 (the order of the key's torsion part).
			for i := 0; i < 400 && accepted < 3; i++ {
				ts := strconv.FormatInt(now.Unix(), 10)
				body := form + "&Try=" + strconv.Itoa(i)
				sig := signUnder(t, tc.key, tc.secret, []byte(ts+"|"+body))
				if !ed25519.Verify(key, []byte(ts+"|"+body), sig) {
					continue
				}
				accepted++
				if _, err := telnyx.Verify(keys, ts, base64.StdEncoding.EncodeToString(sig), []byte(body), now); !errors.Is(err, telnyx.ErrBadSignature) {
					t.Fatalf("Verify of a signature crypto/ed25519 accepts under this key: %v, want ErrBadSignature", err)
				}
			}
			if accepted == 0 {
				t.Fatal("no signature of 400 verified under crypto/ed25519: the case shows nothing")
			}
		})
	}
}

// signUnder signs msg as Ed25519 does (RFC 8032 5.1.6) with the secret
// scalar a, hashing the public key as given (pub need not be [a]B):
// S = r + H(R || pub || msg)·a.
func signUnder(t *testing.T, pub []byte, a *edwards25519.Scalar, msg []byte) []byte {
	t.Helper()
	nonce := make([]byte, 64)
	if _, err := rand.Read(nonce); err != nil {
		t.Fatal(err)
	}
	r, err := edwards25519.NewScalar().SetUniformBytes(nonce)
	if err != nil {
		t.Fatal(err)
	}
	R := new(edwards25519.Point).ScalarBaseMult(r).Bytes()
	h := sha512.New()
	h.Write(R)
	h.Write(pub)
	h.Write(msg)
	k, err := edwards25519.NewScalar().SetUniformBytes(h.Sum(nil))
	if err != nil {
		t.Fatal(err)
	}
	S := edwards25519.NewScalar().MultiplyAdd(k, a, r)
	return append(R, S.Bytes()...)
}
