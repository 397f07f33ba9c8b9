package plivo_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"net/url"
	"sort"
	"strings"
)

// The oracle: plivo-go's V3 signature (ValidateSignatureV3 in its
// utils.go), re-stated here in the test's own words. The module proxy
// refuses to serve github.com/plivo/plivo-go (403 "not available"), so the
// SDK cannot be a test dependency; this is a behavioural transcription of
// its algorithm, quirks included:
//   - the query is read raw (no decoding): split on '&', the pairs sorted,
//     each kept only when splitting it on '=' gives exactly two parts, a
//     later pair of the same name replacing an earlier one;
//   - params (the caller's map: the form body, or for a GET the decoded
//     query) are one value per name;
//   - GET: the query map with params laid over it, "k=v" sorted, joined by
//     '&', trailing '&' trimmed; POST: sorted query "k=v" joined by '&',
//     then '.', then sorted params as k+v, trailing '.' trimmed; without a
//     query: GET "k=v&..." and POST k+v... of the params;
//   - '?' after the path when there are params or a query; then "." +
//     nonce; HMAC-SHA256 with the auth token, base64; the header may hold
//     several signatures separated by ','.
func plivoGoSigned(uri, method string, params map[string]string, nonce string) (string, bool) {
	u, err := url.Parse(uri)
	if err != nil {
		return "", false // plivo-go panics
	}
	s := u.Scheme + "://" + u.Host + u.Path
	if len(params) > 0 || u.RawQuery != "" {
		s += "?"
	}
	sorted := func(m map[string]string, kv, sep string) string {
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		out := ""
		for _, k := range keys {
			out += k + kv + m[k] + sep
		}
		if sep == "&" {
			out = strings.TrimRight(out, "&")
		}
		return out
	}
	if u.RawQuery != "" {
		pairs := strings.Split(u.RawQuery, "&")
		sort.Strings(pairs)
		q := map[string]string{}
		for _, p := range pairs {
			if kv := strings.Split(p, "="); len(kv) == 2 {
				q[kv[0]] = kv[1]
			}
		}
		if method == "GET" {
			for k, v := range params {
				q[k] = v
			}
			s = strings.TrimRight(s+sorted(q, "=", "&"), "&")
		} else {
			s = strings.TrimRight(s+sorted(q, "=", "&")+"."+sorted(params, "", ""), ".")
		}
	} else if method == "GET" {
		s += sorted(params, "=", "&")
	} else {
		s += sorted(params, "", "")
	}
	return s + "." + nonce, true
}

func hmacB64(token, s string) string {
	m := hmac.New(sha256.New, []byte(token))
	m.Write([]byte(s))
	return base64.StdEncoding.EncodeToString(m.Sum(nil))
}
