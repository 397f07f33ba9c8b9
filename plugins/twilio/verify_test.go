package twilio_test

import (
	"crypto/hmac"
	"crypto/sha1"
	"encoding/base64"
	"net/url"
	"testing"

	"github.com/edge-voice/edge/plugins/twilio"
)

// rawSign is HMAC-SHA1 over exactly s: the test spells out the signed
// string, so each case shows the form Twilio's back end or SDKs sign.
func rawSign(token, s string) string {
	mac := hmac.New(sha1.New, []byte(token))
	mac.Write([]byte(s))
	return base64.StdEncoding.EncodeToString(mac.Sum(nil))
}

// TestVerifyAcceptsWhatTwilioValidatorsAccept: each case is a webhook that
// a Twilio SDK validator accepts and that edge refused before (a false
// refusal), or a forgery that must stay refused.
func TestVerifyAcceptsWhatTwilioValidatorsAccept(t *testing.T) {
	const p = "CallSid" + sid
	one := url.Values{"CallSid": {sid}}
	for name, tc := range map[string]struct {
		url, signed string // the URL edge sees; the string Twilio signed
		form        url.Values
		want        bool
	}{
		// twilio-go, -node, -csharp, -java remove any port, not only :443.
		"signed without a non-default port": {"https://edge.example.com:8443/a?x=1", "https://edge.example.com/a?x=1" + p, one, true},
		"signed with port, http":            {"http://edge.example.com/a", "http://edge.example.com:80/a" + p, one, true},
		"signed with another port":          {"https://edge.example.com/a", "https://edge.example.com:8443/a" + p, nil, false},
		// twilio-node's withLegacyQuerystring: Node's querystring round trip.
		"legacy query encoding":  {"https://edge.example.com/a?x=%27q%27&y=a+b&z=%7e", "https://edge.example.com/a?x='q'&y=a%20b&z=~" + p, one, true},
		"legacy query, grouped":  {"https://edge.example.com/a?b=1&a=2&b=3&10=x&2=y", "https://edge.example.com/a?2=y&10=x&b=1&b=3&a=2" + p, one, true},
		"legacy query with port": {"https://edge.example.com/a?x=%27", "https://edge.example.com:443/a?x='" + p, one, true},
		// RFC 3986 2.1: %2f and %2F are the same octet.
		"escape case, upper": {"https://edge.example.com/a%2fb?x=%2f", "https://edge.example.com/a%2Fb?x=%2F" + p, one, true},
		"escape case, lower": {"https://edge.example.com/a?x=%2F", "https://edge.example.com/a?x=%2f" + p, one, true},
		"other value":        {"https://edge.example.com/a?x=%2F", "https://edge.example.com/a?x=%2e" + p, one, false},
		// U+1F600 is F0.. in UTF-8 (after U+FF21's EF..) but D83D in UTF-16
		// (before FF21): twilio-node, Java and .NET sort by UTF-16 units.
		"names sorted by UTF-16": {"https://edge.example.com/a", "https://edge.example.com/a" + p + "\U0001F600" + "1" + "\uFF21" + "2",
			url.Values{"\uFF21": {"2"}, "\U0001F600": {"1"}, "CallSid": {sid}}, true},
		"names sorted by bytes": {"https://edge.example.com/a", "https://edge.example.com/a" + p + "\uFF21" + "2" + "\U0001F600" + "1",
			url.Values{"\uFF21": {"2"}, "\U0001F600": {"1"}, "CallSid": {sid}}, true},
		// A repeated name: twilio-go's ValidateBody signs its first value.
		"repeated name, first value": {"https://edge.example.com/a", "https://edge.example.com/a" + "A2" + p, url.Values{"A": {"2", "1"}, "CallSid": {sid}}, true},
		"repeated name, all sorted":  {"https://edge.example.com/a", "https://edge.example.com/a" + "A1A2" + p, url.Values{"A": {"2", "1"}, "CallSid": {sid}}, true},
		"repeated name, one dropped": {"https://edge.example.com/a", "https://edge.example.com/a" + "A2", url.Values{"A": {"2"}, "CallSid": {sid}}, false},
	} {
		t.Run(name, func(t *testing.T) {
			form := tc.form
			if form == nil {
				form = one
			}
			if got := twilio.Verify([]string{tokNew}, tc.url, form, rawSign(tokNew, tc.signed)); got != tc.want {
				t.Errorf("Verify = %v, want %v", got, tc.want)
			}
		})
	}
}
