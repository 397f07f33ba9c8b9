package plivo

import (
	"maps"
	"net/url"
	"slices"
	"strings"
)

// RawSignedString is what Plivo's V3 signature covers as plivo-go builds
// it (ValidateSignatureV3): the query's pairs are signed as they are sent,
// not decoded, one value per name, and trailing '.' (POST) or '&' (GET)
// characters are trimmed from the whole. Body params (and, for a GET, the
// query's decoded params, which a caller passes as the request's params)
// have one value per name: the first.
//
// ok is false where plivo-go's reading would leave part of the request
// unsigned, so that accepting it would let anyone change what edge reads
// without breaking the signature: a query pair without exactly one '=',
// a name repeated in the query (plivo-go keeps one of them), or a trim
// that would eat characters of a value. edge refuses those (documented in
// docs/plugins.md); every other request plivo-go accepts, edge accepts.
func RawSignedString(method, fullURL string, body url.Values, nonce string) (string, bool) {
	u, err := url.Parse(fullURL)
	if err != nil {
		return "", false
	}
	base := u.Scheme + "://" + u.Host + u.Path
	raw := map[string]string{}
	if u.RawQuery != "" {
		for pair := range strings.SplitSeq(u.RawQuery, "&") {
			kv := strings.Split(pair, "=")
			if _, dup := raw[kv[0]]; len(kv) != 2 || dup {
				return "", false
			}
			raw[kv[0]] = kv[1]
		}
	}
	params := map[string]string{}
	for k, v := range body {
		params[k] = v[0]
	}
	s := base
	if len(params) > 0 || u.RawQuery != "" {
		s += "?"
	}
	var tail string
	switch {
	case u.RawQuery != "" && method == "GET":
		maps.Copy(raw, params)
		tail = joined(raw, "=", "&")
		s += tail
		if strings.HasSuffix(tail, "&") {
			return "", false
		}
	case u.RawQuery != "":
		q, p := joined(raw, "=", "&"), joined(params, "", "")
		tail = p
		if p == "" {
			tail = q
		}
		s += q + "." + p
		if strings.HasSuffix(tail, ".") {
			return "", false
		}
		s = strings.TrimSuffix(s, ".")
	case method == "GET":
		s += joined(params, "=", "&")
	default:
		s += joined(params, "", "")
	}
	return s + "." + nonce, true
}

// joined is the sorted "k"+sep+"v" items of m joined by between.
func joined(m map[string]string, sep, between string) string {
	parts := make([]string, 0, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, k+sep+m[k])
	}
	return strings.Join(parts, between)
}
