package api

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/edge-voice/edge/allocator"
	"github.com/edge-voice/edge/internal/confcheck"
)

// GenericAPI configures who may call the generic allocate API
// (POST /api/v1/allocate on the public listener).
type GenericAPI struct {
	// Open says who may call it without a token: "off" (nobody), "loopback"
	// (callers on this host), "anyone" (WARNs at start). Default: "loopback"
	// with the embedded Redis (development), else "off".
	Open string `koanf:"open"`
	// Tokens are the callers, each allowed its merchants (see
	// CallerToken). File only: a list has no environment form.
	Tokens []CallerToken `koanf:"tokens"`
}

// CallerTokens returns the tokens with each token_file read.
func (g GenericAPI) CallerTokens() ([]CallerToken, error) {
	out := make([]CallerToken, len(g.Tokens))
	var errs []error
	for i, t := range g.Tokens {
		if t.TokenFile != "" {
			b, err := os.ReadFile(t.TokenFile)
			if err != nil {
				errs = append(errs, fmt.Errorf("generic_api.tokens[%d].token_file: %w", i, err))
				continue
			}
			t.Token = strings.TrimSpace(string(b))
		}
		out[i] = t
	}
	return out, errors.Join(errs...)
}

// Validate checks the mode and every token: a unique name, exactly one of
// token and token_file, 16 bytes at least, merchants named.
func (g GenericAPI) Validate() error {
	var errs []error
	switch g.Open {
	case "", OpenOff, OpenLoopback, OpenAnyone:
	default:
		errs = append(errs, confcheck.Invalid("generic_api.open", g.Open, `must be "off", "loopback" or "anyone"`))
	}
	seen := map[string]bool{}
	tokens, err := g.CallerTokens()
	errs = append(errs, err)
	for i, t := range g.Tokens {
		path := fmt.Sprintf("generic_api.tokens[%d]", i)
		if err := allocator.ValidateID(path+".name", t.Name); err != nil {
			errs = append(errs, err)
		} else if seen[t.Name] {
			errs = append(errs, confcheck.Invalid(path+".name", t.Name, "is used twice"))
		}
		seen[t.Name] = true
		switch {
		case (t.Token == "") == (t.TokenFile == ""):
			errs = append(errs, fmt.Errorf("%s: set exactly one of token and token_file", path))
		case len(tokens[i].Token) < 16 && (t.Token != "" || tokens[i].Token != ""):
			errs = append(errs, fmt.Errorf("%s: the token is shorter than 16 bytes", path)) // never echo a secret
		}
		if len(t.Merchants) == 0 {
			errs = append(errs, fmt.Errorf(`%s.merchants: name the token's merchants, or "*" for any`, path))
		}
		for j, m := range t.Merchants {
			if m != "*" {
				errs = append(errs, allocator.ValidateID(fmt.Sprintf("%s.merchants[%d]", path, j), m))
			}
		}
	}
	return errors.Join(errs...)
}
