package mediaurl

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// A media URL may carry query parameters its provider reads (Exotel's
// sample-rate): a provider plugin declares them, edge mints the URL with
// them and the token's MAC covers them, so that the proxy admits them on
// any replica without knowing the plugin. They are signed in one canonical
// form, which is also exactly what the pod receives:
//
//	name=value[&name=value...]   names sorted, no repeats, no escapes
//
// Names are [A-Za-z0-9_.-]{1,32}; values [A-Za-z0-9_.~-]{1,64} and not "."
// or "..": nothing to decode, so an encoded slash, NUL, a second "?", a
// "#" or a traversal cannot hide in one.

// Bounds of a signed query.
const (
	MaxParams    = 8
	maxNameLen   = 32
	maxValueLen  = 64
	maxQueryLen  = 512
	paramsDomain = "?" // joins the path and the query in the MAC's input
)

// ParamsHeader carries the signed query to the pod, set by the proxy only
// when the token covers the query (a client's own is dropped): a pod that
// acts on a provider parameter can tell edge's from a client's.
const ParamsHeader = "Edge-Media-Params"

// ErrBadParam is a parameter that cannot be signed.
var ErrBadParam = errors.New("media URL parameter not allowed")

// EncodeQuery returns params in the canonical form the token signs, "" for
// none, or ErrBadParam (wrapped, naming the parameter).
func EncodeQuery(params map[string]string) (string, error) {
	if len(params) > MaxParams {
		return "", fmt.Errorf("%w: %d parameters, at most %d", ErrBadParam, len(params), MaxParams)
	}
	names := make([]string, 0, len(params))
	for n, v := range params {
		if !ValidParamName(n) {
			return "", fmt.Errorf("%w: name %q", ErrBadParam, n)
		}
		if !ValidParamValue(v) {
			return "", fmt.Errorf("%w: %s=%q", ErrBadParam, n, v)
		}
		names = append(names, n)
	}
	slices.Sort(names)
	var b strings.Builder
	for i, n := range names {
		if i > 0 {
			b.WriteByte('&')
		}
		b.WriteString(n + "=" + params[n])
	}
	if b.Len() > maxQueryLen {
		return "", fmt.Errorf("%w: query of %d bytes, at most %d", ErrBadParam, b.Len(), maxQueryLen)
	}
	return b.String(), nil
}

// ValidParamName reports whether n may name a signed parameter.
func ValidParamName(n string) bool {
	return n != "" && len(n) <= maxNameLen && !strings.ContainsFunc(n, func(r rune) bool { return r > 0x7f || !idByte(byte(r)) })
}

// ValidParamValue reports whether v may be a signed parameter's value.
func ValidParamValue(v string) bool {
	return v != "" && v != "." && v != ".." && len(v) <= maxValueLen &&
		!strings.ContainsFunc(v, func(r rune) bool { return r > 0x7f || !idByte(byte(r)) && r != '~' })
}

// canonicalQuery reports whether q is in the form EncodeQuery gives: only
// such a query can be the one a token signed, so any other is not even
// tried against the MAC.
func canonicalQuery(q string) bool {
	if q == "" || len(q) > maxQueryLen {
		return false
	}
	prev := ""
	for i, pair := range strings.Split(q, "&") {
		n, v, ok := strings.Cut(pair, "=")
		if !ok || i >= MaxParams || !ValidParamName(n) || !ValidParamValue(v) || (i > 0 && n <= prev) {
			return false
		}
		prev = n
	}
	return true
}

// URLWithQuery is URL with a signed query: query is "" or from EncodeQuery,
// and the token covers it, so that the URL is admitted only with exactly
// that query.
func (s *Signer) URLWithQuery(base, callID, pod, path, query string) string {
	u := s.url(base, callID, pod, path, signedPath(path, query))
	if query != "" {
		u += "?" + query
	}
	return u
}

// signedPath is what the MAC covers: the pod path, and the query when
// there is one. A clean path holds no "?", so the two parts cannot be
// confused with a longer path.
func signedPath(path, query string) string {
	if query == "" {
		return path
	}
	return path + paramsDomain + query
}

// VerifyTarget checks t's token (Verify) for its pod and path, and for its
// query when the token covers one: t.Signed then reports that t.Query is
// exactly what edge minted. A token minted without a query verifies with
// any query ParseTarget let through, unsigned, as before signed queries
// existed; a token minted with one verifies with no other.
func (s *Signer) VerifyTarget(t *Target) (callID string, err error) {
	t.Signed = false
	if canonicalQuery(t.Query) {
		id, err := s.Verify(t.Token, t.Pod, signedPath(t.Path, t.Query))
		if err == nil || errors.Is(err, ErrExpiredToken) {
			t.Signed = err == nil
			return id, err
		}
	}
	return s.Verify(t.Token, t.Pod, t.Path)
}
