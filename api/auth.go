package api

import (
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/edge-voice/edge/calls"
)

// CallerToken is one caller of the generic allocate API.
//
//	generic_api:
//	  tokens:
//	    - {name: crm, token_file: /etc/edge/crm-token, merchants: [acme, globex]}
//	    - {name: ops, token: "…", merchants: ["*"]}
type CallerToken struct {
	// Name identifies the caller in logs and as the creator of its calls.
	Name string `koanf:"name"`
	// Token is the bearer token; TokenFile a file holding it (one of the
	// two). At least 16 bytes.
	Token     string `koanf:"token" secret:"true"`
	TokenFile string `koanf:"token_file"`
	// Merchants the token may allocate for; "*" for any merchant and for
	// calls without one.
	Merchants []string `koanf:"merchants"`
}

// Open modes of the generic allocate API without a token.
const (
	OpenOff      = "off"      // a token is required
	OpenLoopback = "loopback" // callers on this host need none (development)
	OpenAnyone   = "anyone"   // nobody needs one (spelled out; WARNs at start)
)

// Callers authenticates callers of the generic allocate API. Apply swaps its
// tokens at run time (a config reload).
type Callers struct {
	state atomic.Pointer[callerState]
}

type callerState struct {
	open   string
	tokens []callerToken
}

type callerToken struct {
	name      string
	digest    [sha256.Size]byte
	merchants []string
}

// NewCallers returns Callers with tokens (their Token already read from
// TokenFile) and an open mode.
func NewCallers(open string, tokens []CallerToken) *Callers {
	c := &Callers{}
	c.Apply(open, tokens)
	return c
}

// Apply swaps the tokens and open mode.
func (c *Callers) Apply(open string, tokens []CallerToken) {
	st := &callerState{open: open}
	for _, t := range tokens {
		st.tokens = append(st.tokens, callerToken{name: t.Name, digest: sha256.Sum256([]byte(t.Token)), merchants: t.Merchants})
	}
	c.state.Store(st)
}

// caller is an authenticated caller: who it is (the call's creator) and
// which merchants it may allocate for.
type caller struct {
	id  string
	may func(merchant string) bool
}

// authenticate reads the bearer token of r. Every configured token is
// compared, in constant time, whatever matches first, so timing tells
// nothing about which token or how much of one matched.
func (c *Callers) authenticate(r *http.Request) (caller, error) {
	if c == nil {
		return caller{}, calls.ErrUnauthorized
	}
	st := c.state.Load()
	if st == nil {
		return caller{}, calls.ErrUnauthorized
	}
	if got, ok := bearer(r.Header.Get("Authorization")); ok {
		digest := sha256.Sum256([]byte(got))
		match := -1
		for i := range st.tokens {
			if subtle.ConstantTimeCompare(digest[:], st.tokens[i].digest[:]) == 1 {
				match = i
			}
		}
		if match < 0 {
			return caller{}, calls.ErrUnauthorized
		}
		t := st.tokens[match]
		return caller{id: "token:" + t.name, may: func(m string) bool {
			return slices.Contains(t.merchants, "*") || m != "" && slices.Contains(t.merchants, m)
		}}, nil
	}
	anyone := func(string) bool { return true }
	switch st.open {
	case OpenAnyone:
		return caller{id: "open", may: anyone}, nil
	case OpenLoopback:
		if ap, err := netip.ParseAddrPort(r.RemoteAddr); err == nil && ap.Addr().Unmap().IsLoopback() {
			return caller{id: "open", may: anyone}, nil
		}
	}
	return caller{}, calls.ErrUnauthorized
}

// bearer reads "Bearer <token>", the scheme case-insensitive (RFC 9110
// 11.1).
func bearer(header string) (string, bool) {
	scheme, token, ok := strings.Cut(header, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	token = strings.TrimSpace(token)
	return token, token != ""
}

// merchantRefused is the 403 of a token used for a merchant it does not
// hold.
func merchantRefused(merchant string) error {
	if merchant == "" {
		return fmt.Errorf("%w: this token names its merchants; the request must name one", calls.ErrForbidden)
	}
	return fmt.Errorf("%w: this token may not allocate for merchant %s", calls.ErrForbidden, merchant)
}
