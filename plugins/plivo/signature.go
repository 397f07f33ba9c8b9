package plivo

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"maps"
	"net/url"
	"slices"
	"strings"

	"github.com/edge-voice/edge/plugins"
)

// Headers of Plivo's V3 request signature.
const (
	SignatureHeader = "X-Plivo-Signature-V3"
	NonceHeader     = "X-Plivo-Signature-V3-Nonce"
)

// SignedString is what Plivo's V3 signature covers, as Plivo's own SDKs
// build it (validate_v3_signature):
//
//	GET:  scheme://host/path[?sorted query, merged with params]       + "." + nonce
//	POST: scheme://host/path?[sorted query + "."]sorted body params   + "." + nonce
//
// The sorted query is "k=v" pairs joined by "&" (decoded values, repeated
// names each value sorted); body params are name+value concatenated with no
// separator, sorted by name. A POST with an empty body signs like a GET
// with no params.
func SignedString(method, fullURL string, body url.Values, nonce string) (string, error) {
	u, err := url.Parse(fullURL)
	if err != nil {
		return "", err
	}
	base := u.Scheme + "://" + u.Host + u.Path
	query, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	b.WriteString(base)
	if method == "GET" {
		for k, v := range body {
			query[k] = append(query[k], v...)
		}
		if q := sortedQuery(query); q != "" {
			b.WriteString("?" + q)
		}
	} else {
		q := sortedQuery(query)
		switch {
		case len(body) == 0 && q != "":
			b.WriteString("?" + q)
		case len(body) > 0:
			b.WriteString("?" + q)
			if q != "" {
				b.WriteString(".")
			}
			b.WriteString(sortedParams(body))
		}
	}
	b.WriteString("." + nonce)
	return b.String(), nil
}

func sortedQuery(q url.Values) string {
	parts := make([]string, 0, len(q))
	for _, k := range slices.Sorted(maps.Keys(q)) {
		for _, v := range slices.Sorted(slices.Values(q[k])) {
			parts = append(parts, k+"="+v)
		}
	}
	return strings.Join(parts, "&")
}

func sortedParams(p url.Values) string {
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(p)) {
		for _, v := range slices.Sorted(slices.Values(p[k])) {
			b.WriteString(k + v)
		}
	}
	return b.String()
}

// Signature is base64(HMAC-SHA256(token, SignedString(...))).
func Signature(token, method, fullURL string, body url.Values, nonce string) (string, error) {
	s, err := SignedString(method, fullURL, body, nonce)
	if err != nil {
		return "", err
	}
	mac := hmac.New(sha256.New, []byte(token))
	mac.Write([]byte(s))
	return base64.StdEncoding.EncodeToString(mac.Sum(nil)), nil
}

// Verify reports whether any of the comma-separated signatures in header
// (Plivo sends one per active auth token) matches under any of tokens and
// either form of the URL's default port. Comparisons are constant-time.
func Verify(tokens []string, method, fullURL string, body url.Values, nonce, header string) bool {
	if header == "" || nonce == "" {
		return false
	}
	got := plugins.SplitList(header)
	ok := false
	for _, u := range plugins.URLPortVariants(fullURL) {
		for _, tok := range tokens {
			want, err := Signature(tok, method, u, body, nonce)
			if err != nil {
				return false
			}
			for _, g := range got {
				if plugins.EqualMAC([]byte(want), []byte(g)) {
					ok = true
				}
			}
		}
	}
	return ok
}
