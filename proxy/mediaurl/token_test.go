package mediaurl

import (
	"encoding/base64"
	"errors"
	"strings"
	"testing"
	"time"
)

func TestTokens(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	s := NewSigner([]byte("secret-secret-secret-secret-0001"), time.Minute)
	s.now = func() time.Time { return now }
	long := strings.Repeat("A", 128)
	tok := s.Mint("CA1", "pod-a", "/p")
	other := NewSigner([]byte("secret-secret-secret-secret-0002"), time.Minute)
	other.now = s.now

	cases := map[string]struct {
		segment, pod string
		path         string // "" for "/p", the path minted for
		at           time.Time
		want         string
		err          error
	}{
		"valid":             {tok, "pod-a", "", now, "CA1", nil},
		"valid at expiry":   {tok, "pod-a", "", now.Add(time.Minute), "CA1", nil},
		"expired":           {tok, "pod-a", "", now.Add(time.Minute + time.Second), "", ErrExpiredToken},
		"other pod":         {tok, "pod-b", "", now, "", ErrBadToken},
		"other path":        {tok, "pod-a", "/q", now, "", ErrBadToken},
		"longest call id":   {s.Mint(long, "pod-a", "/p"), "pod-a", "", now, long, nil},
		"other secret":      {other.Mint("CA1", "pod-a", "/p"), "pod-a", "", now, "", ErrBadToken},
		"no prefix":         {strings.TrimPrefix(tok, tokenPrefix), "pod-a", "", now, "", ErrBadToken},
		"truncated":         {tok[:len(tok)-1], "pod-a", "", now, "", ErrBadToken},
		"bad base64":        {"c.***", "pod-a", "", now, "", ErrBadToken},
		"empty":             {"c.", "pod-a", "", now, "", ErrBadToken},
		"huge":              {"c." + strings.Repeat("A", 4000), "pod-a", "", now, "", ErrBadToken},
		"call id forged":    {forge(t, tok, "CA2"), "pod-a", "", now, "", ErrBadToken},
		"expiry pushed out": {pushExpiry(t, tok), "pod-a", "", now.Add(2 * time.Minute), "", ErrBadToken},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			s.now = func() time.Time { return tc.at }
			path := tc.path
			if path == "" {
				path = "/p"
			}
			got, err := s.Verify(tc.segment, tc.pod, path)
			if !errors.Is(err, tc.err) || got != tc.want {
				t.Errorf("Verify = %q, %v; want %q, %v", got, err, tc.want, tc.err)
			}
		})
	}
}

// forge swaps the call id inside a token, keeping its MAC.
func forge(t *testing.T, tok, callID string) string {
	raw := decode(t, tok)
	n := int(raw[0])
	out := append([]byte{byte(len(callID))}, callID...)
	return encode(append(out, raw[1+n:]...))
}

// pushExpiry adds an hour to a token's expiry, keeping its MAC.
func pushExpiry(t *testing.T, tok string) string {
	raw := decode(t, tok)
	n := int(raw[0])
	raw[1+n+5]++ // +65536 s
	return encode(raw)
}

func decode(t *testing.T, tok string) []byte {
	t.Helper()
	raw, err := base64.RawURLEncoding.DecodeString(strings.TrimPrefix(tok, tokenPrefix))
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

func encode(raw []byte) string { return tokenPrefix + base64.RawURLEncoding.EncodeToString(raw) }
