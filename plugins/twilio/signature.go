package twilio

import (
	"crypto/hmac"
	"crypto/sha1"
	"encoding/base64"
	"net/url"
	"slices"
	"sort"

	"github.com/edge-voice/edge/plugins"
)

// SignatureHeader carries Twilio's request signature.
const SignatureHeader = "X-Twilio-Signature"

// Signature computes Twilio's X-Twilio-Signature for a POST: base64 of
// HMAC-SHA1 keyed with the auth token over the full URL followed by every
// POST parameter sorted by name, each as name+value. A repeated name
// contributes each distinct value in sorted order, as Twilio's own
// validators do.
// https://www.twilio.com/docs/usage/webhooks/webhooks-security
func Signature(token, fullURL string, form url.Values) string {
	mac := hmac.New(sha1.New, []byte(token))
	mac.Write([]byte(fullURL))
	names := make([]string, 0, len(form))
	for name := range form {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		values := slices.Compact(slices.Sorted(slices.Values(form[name])))
		for _, v := range values {
			mac.Write([]byte(name))
			mac.Write([]byte(v))
		}
	}
	return base64.StdEncoding.EncodeToString(mac.Sum(nil))
}

// Verify reports whether sig matches the request under any of tokens
// (several during a rotation) and either form of the URL's default port:
// Twilio signs the URL exactly as it was configured, port or not.
func Verify(tokens []string, fullURL string, form url.Values, sig string) bool {
	if sig == "" {
		return false
	}
	ok := false
	for _, u := range plugins.URLPortVariants(fullURL) {
		for _, tok := range tokens {
			// No early return: the time taken does not tell which one matched.
			if plugins.EqualMAC([]byte(Signature(tok, u, form)), []byte(sig)) {
				ok = true
			}
		}
	}
	return ok
}
