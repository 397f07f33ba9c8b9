package plivo_test

import (
	"math/rand/v2"
	"net/url"
	"sort"
	"strings"
	"testing"

	"github.com/edge-voice/edge/plugins/plivo"
)

// ambiguous reports the requests where plivo-go's reading leaves part of
// what edge reads unsigned, which edge refuses on purpose (RawSignedString).
func ambiguous(u *url.URL, method string, params map[string]string) bool {
	if u.RawQuery == "" {
		return false
	}
	seen := map[string]bool{}
	for _, p := range strings.Split(u.RawQuery, "&") {
		kv := strings.Split(p, "=")
		if len(kv) != 2 || seen[kv[0]] {
			return true
		}
		seen[kv[0]] = true
	}
	// A trim that eats more than the separator: the signed items end
	// with the trimmed character.
	q := map[string]string{}
	for _, p := range strings.Split(u.RawQuery, "&") {
		kv := strings.Split(p, "=")
		q[kv[0]] = kv[1]
	}
	end := func(m map[string]string, kv string) string {
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		if len(keys) == 0 {
			return ""
		}
		return keys[len(keys)-1] + kv + m[keys[len(keys)-1]]
	}
	if method == "GET" {
		for k, v := range params {
			q[k] = v
		}
		return strings.HasSuffix(end(q, "="), "&")
	}
	// The body's items end the signed string unless they are all empty
	// (a lone empty name and value sorts first), then the query's do.
	if p := end(params, ""); p != "" {
		return strings.HasSuffix(p, ".")
	}
	return strings.HasSuffix(end(q, "="), ".")
}

// checkAgainstPlivoGo is the differential property for one request: edge
// accepts every signature plivo-go's validator accepts, except the
// ambiguous ones, and refuses one made over another URL or nonce.
func checkAgainstPlivoGo(t *testing.T, method, uri string, body url.Values, nonce string) {
	t.Helper()
	u, err := url.Parse(uri)
	if err != nil || nonce == "" || strings.Contains(nonce, ",") {
		return
	}
	form := body
	if method == "GET" {
		q, err := url.ParseQuery(u.RawQuery)
		if err != nil {
			// edge's Request.Query drops what it cannot parse, as net/http does
			q = plivoQuery(u.RawQuery)
		}
		form = q
	}
	params := map[string]string{}
	for k, v := range form {
		params[k] = v[0]
	}
	s, ok := plivoGoSigned(uri, method, params, nonce)
	if !ok {
		return
	}
	sig := hmacB64(tokNew, s)
	got := plivo.Verify([]string{tokNew}, method, uri, form, nonce, "bogus,"+sig)
	switch {
	case !got && !ambiguous(u, method, params):
		t.Errorf("false refusal: plivo-go accepts %s %q params %v nonce %q (signed %q)", method, uri, params, nonce, s)
	case got && ambiguous(u, method, params):
		if d, err := plivo.SignedString(method, uri, form, nonce); err != nil || d != s {
			t.Errorf("accepted %s %q params %v: plivo-go leaves part of it unsigned (signed %q)", method, uri, params, s)
		}
	}
	other, _ := plivoGoSigned(strings.Replace(uri, "/allocate", "/allocatex", 1), method, params, nonce)
	if plivo.Verify([]string{tokNew}, method, uri, form, nonce, hmacB64(tokNew, other)) {
		t.Errorf("accepted a signature of another URL: %s %q", method, uri)
	}
	if plivo.Verify([]string{tokNew}, method, uri, form, nonce+"x", sig) {
		t.Errorf("accepted a signature of another nonce: %s %q", method, uri)
	}
}

// plivoQuery is url.ParseQuery keeping what it can, as Request.Query does.
func plivoQuery(raw string) url.Values {
	q := url.Values{}
	for _, p := range strings.Split(raw, "&") {
		if v, err := url.ParseQuery(p); err == nil {
			for k, vs := range v {
				q[k] = append(q[k], vs...)
			}
		}
	}
	return q
}

func TestVerifyAgainstPlivoGo(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	pairs := []string{"merchant_id=acme", "flow=v2", "a=%41", "c=x;y", "d=100%", "e", "f=a=b", "g=+", "", "a=2", "h=v.", "i=v&", "CallUUID=" + uuid, "j=%zz"}
	for range 600 {
		var q []string
		for range r.IntN(4) {
			q = append(q, pairs[r.IntN(len(pairs))])
		}
		uri := base
		if len(q) > 0 {
			uri += "?" + strings.Join(q, "&")
		}
		body := url.Values{}
		if r.IntN(2) == 0 {
			for _, k := range []string{"CallUUID", "From", "To", "Z"}[:r.IntN(5)] {
				body.Set(k, []string{uuid, "+15550100", "v.", "a&b", ""}[r.IntN(5)])
			}
		}
		method := "POST"
		if r.IntN(3) == 0 {
			method, body = "GET", nil
		}
		checkAgainstPlivoGo(t, method, uri, body, "n"+string(rune('a'+r.IntN(26))))
	}
}

// FuzzVerifyAgainstPlivoGo lets the fuzzer pick the query, body and nonce.
func FuzzVerifyAgainstPlivoGo(f *testing.F) {
	f.Add(false, "merchant_id=acme;x=1&flow=v2", []byte("CallUUID="+uuid), "12345678901234567890")
	f.Add(true, "CallUUID="+uuid+"&d=100%&e", []byte(""), "n")
	f.Add(false, "", []byte("A=v.&B=1"), "n")
	f.Fuzz(func(t *testing.T, get bool, query string, body []byte, nonce string) {
		if strings.ContainsAny(query, "# \t\r\n") {
			return
		}
		uri := base
		if query != "" {
			uri += "?" + query
		}
		form, err := url.ParseQuery(string(body))
		if err != nil {
			return // edge answers 400 before verifying
		}
		method := "POST"
		if get {
			method, form = "GET", nil
		}
		checkAgainstPlivoGo(t, method, uri, form, nonce)
	})
}
