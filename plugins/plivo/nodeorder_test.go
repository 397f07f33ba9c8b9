package plivo_test

import (
	"math/rand/v2"
	"net/url"
	"slices"
	"strings"
	"testing"
	"unicode/utf16"

	"github.com/edge-voice/edge/plugins/plivo"
)

// utf16Less orders as JavaScript's Array.prototype.sort() does strings:
// by UTF-16 code units.
func utf16Less(a, b string) int {
	return slices.Compare(utf16.Encode([]rune(a)), utf16.Encode([]rune(b)))
}

// nodeSigned is the string plivo-node's validateV3Signature signs for a
// POST with a body, written out from its documented behaviour: like
// plivo-python's, but the query's names and each name's values, and the
// body's names and values, sorted with JavaScript's sort(), by UTF-16 code
// units.
func nodeSigned(baseURL string, query, body url.Values, nonce string) string {
	pairs := func(v url.Values, sep string) []string {
		var out []string
		names := slices.Collect(func(yield func(string) bool) {
			for k := range v {
				if !yield(k) {
					return
				}
			}
		})
		slices.SortFunc(names, utf16Less)
		for _, k := range names {
			vals := slices.Clone(v[k])
			slices.SortFunc(vals, utf16Less)
			for _, x := range vals {
				out = append(out, k+sep+x)
			}
		}
		return out
	}
	s := baseURL + "?"
	if q := strings.Join(pairs(query, "="), "&"); q != "" {
		s += q + "."
	}
	return s + strings.Join(pairs(body, ""), "") + "." + nonce
}

// Plivo's Node SDK sorts parameter names by UTF-16 code units, Python's
// and Go's by code points: a name above U+FFFF sorts before one in
// U+E000..U+FFFF in the first and after it in the others. edge checked the
// code-point order only, so requests signed as plivo-node signs them were
// refused with 403 where the orders differ (100 of the 400 here); it
// accepts both orders now, as its Twilio check does, and still refuses a
// signature of another body.
func TestVerifyAcceptsPlivoNodeOrder(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	names := []string{"CallUUID", "From", "a\uFF01", "a\U0001F600", "\uE000", "\U00010000", "b\uFFFD", "b\U0010FFFF", "Z"}
	values := []string{"1", "\uFF01", "\U0001F600", "x", ""}
	orderMatters, refused := 0, 0
	for i := range 400 {
		body := url.Values{"CallUUID": {uuid}}
		for range 1 + r.IntN(5) {
			n := names[r.IntN(len(names))]
			body[n] = append(body[n], values[r.IntN(len(values))])
		}
		query := url.Values{}
		if i%2 == 0 {
			query.Set("merchant_id", "acme")
			query.Set(names[2+r.IntN(4)], "q")
		}
		uri := base
		if len(query) > 0 {
			uri += "?" + query.Encode()
		}
		signed := nodeSigned(base, query, body, nonce)
		if python, _ := plivo.SignedString("POST", uri, body, nonce); python != signed {
			orderMatters++
		}
		sig := hmacB64(tokNew, signed)
		if !plivo.Verify([]string{tokNew}, "POST", uri, body, nonce, sig) {
			refused++
			continue
		}
		other := url.Values{}
		for k, v := range body {
			other[k] = v
		}
		other.Set("From", "+15550666")
		if plivo.Verify([]string{tokNew}, "POST", uri, other, nonce, sig) {
			t.Errorf("accepted a Node-order signature for another body: %v", other)
		}
	}
	if orderMatters == 0 {
		t.Fatal("no request where the orders differ: the test checks nothing")
	}
	if refused > 0 {
		t.Errorf("%d of %d requests signed in plivo-node's order refused (%d differ from the code-point order)", refused, 400, orderMatters)
	}
}
