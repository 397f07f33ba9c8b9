package providers_test

import (
	"net/url"
	"strings"
	"testing"
)

// A provider signs the URL it was given: with a trailing slash, the same
// route must answer (it answered 404).
func TestWebhookPathWithTrailingSlash(t *testing.T) {
	e := twilioEnv(t)
	path := "/api/v1/twilio/allocate/?merchant_id=acme"
	form := url.Values{"CallSid": {"CA0123456789abcdef0123456789abcdef"}, "From": {"+15550100"}}
	got := e.do(t, "POST", path, form.Encode(), "X-Twilio-Signature", twilioSign("https://edge.example.com"+path, form))
	if got.status != 200 || !strings.Contains(got.body, "<Stream url=") {
		t.Fatalf("webhook at a trailing-slash URL: %+v", got)
	}
}

// A Twilio voice URL configured with GET: the parameters are in the query
// and the signature covers the URL alone. It answered 405.
func TestTwilioGETWebhook(t *testing.T) {
	e := twilioEnv(t)
	path := "/api/v1/twilio/allocate?merchant_id=acme&CallSid=CA0123456789abcdef0123456789abcd02&From=%2B15550100"
	got := e.do(t, "GET", path, "", "X-Twilio-Signature", twilioSign("https://edge.example.com"+path, nil))
	if got.status != 200 || !strings.Contains(got.body, "<Stream url=") {
		t.Fatalf("signed GET webhook: %+v", got)
	}
	if got := e.do(t, "GET", path, ""); got.status != 403 {
		t.Fatalf("unsigned GET webhook: %+v, want the plugin's 403", got)
	}
	if got := e.do(t, "PUT", "/api/v1/twilio/allocate", ""); got.status != 405 {
		t.Fatalf("PUT webhook: %+v, want 405", got)
	}
}
