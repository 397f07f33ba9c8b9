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

// SignedString is what Plivo's V3 signature covers with the query's values
// decoded, as plivo-python builds it (validate_v3_signature):
//
//	GET:  scheme://host/path[?sorted query, merged with params]       + "." + nonce
//	POST: scheme://host/path?[sorted query + "."]sorted body params   + "." + nonce
//
// The sorted query is "k=v" pairs joined by "&" (decoded values, repeated
// names each value sorted); body params are name+value concatenated with no
// separator, sorted by name. A POST with an empty body signs like a GET
// with no params. The query is split on '&' alone and a stray '%' is kept
// as it is, as Python's parse_qs does: Plivo does not refuse a URL with
// ';' or '%' in its query, so neither may edge. Names and values are
// sorted by code points, as plivo-python and plivo-go sort them;
// NodeSignedString sorts as plivo-node does.
func SignedString(method, fullURL string, body url.Values, nonce string) (string, error) {
	return signedString(method, fullURL, body, nonce, strings.Compare)
}

// NodeSignedString is SignedString as plivo-node builds it
// (validateV3Signature): the same string, with names and values sorted by
// JavaScript's sort(), by UTF-16 code units (plugins.CompareUTF16). It
// differs only where a character above U+FFFF meets one in U+E000..U+FFFF.
func NodeSignedString(method, fullURL string, body url.Values, nonce string) (string, error) {
	return signedString(method, fullURL, body, nonce, plugins.CompareUTF16)
}

func signedString(method, fullURL string, body url.Values, nonce string, order func(a, b string) int) (string, error) {
	u, err := url.Parse(fullURL)
	if err != nil {
		return "", err
	}
	base := u.Scheme + "://" + u.Host + u.Path
	query := lenientQuery(u.RawQuery)
	var b strings.Builder
	b.WriteString(base)
	if method == "GET" {
		// plivo-python: params.update(query), the query's values win. For a
		// GET, edge passes the query itself as the params.
		for k, v := range body {
			if _, ok := query[k]; !ok {
				query[k] = v
			}
		}
		if q := sortedQuery(query, order); q != "" {
			b.WriteString("?" + q)
		}
	} else {
		q := sortedQuery(query, order)
		switch {
		case len(body) == 0 && q != "":
			b.WriteString("?" + q)
		case len(body) > 0:
			b.WriteString("?" + q)
			if q != "" {
				b.WriteString(".")
			}
			b.WriteString(sortedParams(body, order))
		}
	}
	b.WriteString("." + nonce)
	return b.String(), nil
}

// lenientQuery decodes a query as Plivo's SDKs read it: pairs split on '&'
// only, '+' as a space, valid escapes decoded and invalid ones kept.
func lenientQuery(raw string) url.Values {
	q := url.Values{}
	for pair := range strings.SplitSeq(raw, "&") {
		if pair == "" {
			continue
		}
		k, v, _ := strings.Cut(pair, "=")
		q[unescape(k)] = append(q[unescape(k)], unescape(v))
	}
	return q
}

func unescape(s string) string { return plugins.LenientUnescape(s) }

func sortedQuery(q url.Values, order func(a, b string) int) string {
	parts := make([]string, 0, len(q))
	for _, k := range slices.SortedFunc(maps.Keys(q), order) {
		for _, v := range slices.SortedFunc(slices.Values(q[k]), order) {
			parts = append(parts, k+"="+v)
		}
	}
	return strings.Join(parts, "&")
}

func sortedParams(p url.Values, order func(a, b string) int) string {
	var b strings.Builder
	for _, k := range slices.SortedFunc(maps.Keys(p), order) {
		for _, v := range slices.SortedFunc(slices.Values(p[k]), order) {
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
	return mac(token, s), nil
}

func mac(token, s string) string {
	m := hmac.New(sha256.New, []byte(token))
	m.Write([]byte(s))
	return base64.StdEncoding.EncodeToString(m.Sum(nil))
}

// Verify reports whether any of the comma-separated signatures in header
// (Plivo sends one per active auth token) matches under any of tokens,
// either form of the URL's default port, either way Plivo's SDKs read the
// query (decoded, SignedString; raw, RawSignedString) and either order
// they sort names in (code points; UTF-16 units, NodeSignedString). Every
// form covers the same names and values, so none lets a parameter go
// unsigned. Comparisons are constant-time.
func Verify(tokens []string, method, fullURL string, body url.Values, nonce, header string) bool {
	creds := make([]plugins.Credential, len(tokens))
	for i, tok := range tokens {
		creds[i] = plugins.Credential{Token: tok}
	}
	_, ok := VerifyAccount(creds, method, fullURL, body, nonce, header)
	return ok
}

// VerifyAccount is Verify over the credentials of several accounts: it
// reports the account whose token signed the request.
func VerifyAccount(creds []plugins.Credential, method, fullURL string, body url.Values, nonce, header string) (account string, ok bool) {
	if header == "" || nonce == "" {
		return "", false
	}
	var signed []string
	for _, u := range plugins.URLPortVariants(fullURL) {
		if s, err := SignedString(method, u, body, nonce); err == nil {
			signed = append(signed, s)
		}
		if s, err := NodeSignedString(method, u, body, nonce); err == nil && !slices.Contains(signed, s) {
			signed = append(signed, s)
		}
		if s, ok := RawSignedString(method, u, body, nonce); ok && !slices.Contains(signed, s) {
			signed = append(signed, s)
		}
	}
	got := plugins.SplitList(header)
	return plugins.MatchAccount(creds, func(tok string) bool {
		match := false
		for _, s := range signed {
			want := mac(tok, s)
			for _, g := range got {
				if plugins.EqualMAC([]byte(want), []byte(g)) {
					match = true
				}
			}
		}
		return match
	})
}
