package twilio

import (
	"crypto/hmac"
	"crypto/sha1"
	"encoding/base64"
	"maps"
	"net/url"
	"slices"
	"strings"

	"github.com/edge-voice/edge/plugins"
)

// SignatureHeader carries Twilio's request signature.
const SignatureHeader = "X-Twilio-Signature"

// Signature computes Twilio's X-Twilio-Signature for a POST: base64 of
// HMAC-SHA1 keyed with the auth token over the full URL followed by every
// POST parameter sorted by name, each as name+value. A repeated name
// contributes each distinct value in sorted order, as twilio-node and
// twilio-python do.
// https://www.twilio.com/docs/usage/webhooks/webhooks-security
func Signature(token, fullURL string, form url.Values) string {
	return sign(token, fullURL, paramString(form, strings.Compare, allValues))
}

func sign(token, fullURL, params string) string {
	mac := hmac.New(sha1.New, []byte(token))
	mac.Write([]byte(fullURL))
	mac.Write([]byte(params))
	return base64.StdEncoding.EncodeToString(mac.Sum(nil))
}

// Verify reports whether sig matches the request under any of tokens
// (several during a rotation), any URL form Twilio's validators try
// (urlForms) and any parameter form they build (paramForms).
func Verify(tokens []string, fullURL string, form url.Values, sig string) bool {
	creds := make([]plugins.Credential, len(tokens))
	for i, tok := range tokens {
		creds[i] = plugins.Credential{Token: tok}
	}
	_, ok := VerifyAccount(creds, fullURL, form, sig)
	return ok
}

// VerifyAccount is Verify over the credentials of several accounts: it
// reports the account whose token signed the request.
func VerifyAccount(creds []plugins.Credential, fullURL string, form url.Values, sig string) (account string, ok bool) {
	if sig == "" {
		return "", false
	}
	params := paramForms(form)
	urls := urlForms(fullURL)
	// No early return: the time taken does not tell which one matched.
	return plugins.MatchAccount(creds, func(tok string) bool {
		match := false
		for _, u := range urls {
			for _, p := range params {
				if plugins.EqualMAC([]byte(sign(tok, u, p)), []byte(sig)) {
					match = true
				}
			}
		}
		return match
	})
}

// paramForms are the parameter strings Twilio's validators sign, without
// duplicates. They differ only for names outside ASCII and for repeated
// names, so most webhooks have one:
//
//   - names (and values) ordered by bytes (twilio-go, twilio-python) or by
//     UTF-16 code units (twilio-node's sort(), .NET's ordinal and Java's
//     compareTo): a name with a character above U+FFFF sorts before one
//     in U+E000..U+FFFF in UTF-16 and after it in UTF-8;
//   - a repeated name as each distinct value sorted (twilio-node,
//     twilio-python), its first value only (twilio-go's ValidateBody), or
//     its values joined with "," (.NET's NameValueCollection).
//
// edge reads the first value of a name; no form drops a name, so none lets
// a parameter edge reads go unsigned.
func paramForms(form url.Values) []string {
	var out []string
	for _, order := range []func(a, b string) int{strings.Compare, plugins.CompareUTF16} {
		for _, pick := range []func([]string, func(a, b string) int) []string{allValues, firstValue, joinedValues} {
			if s := paramString(form, order, pick); !slices.Contains(out, s) {
				out = append(out, s)
			}
		}
	}
	return out
}

func paramString(form url.Values, order func(a, b string) int, pick func([]string, func(a, b string) int) []string) string {
	var b strings.Builder
	for _, name := range slices.SortedFunc(maps.Keys(form), order) {
		for _, v := range pick(form[name], order) {
			b.WriteString(name)
			b.WriteString(v)
		}
	}
	return b.String()
}

func allValues(vs []string, order func(a, b string) int) []string {
	return slices.Compact(slices.SortedFunc(slices.Values(vs), order))
}

func firstValue(vs []string, _ func(a, b string) int) []string { return vs[:1] }

func joinedValues(vs []string, _ func(a, b string) int) []string {
	return []string{strings.Join(vs, ",")}
}
