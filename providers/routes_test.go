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

// GET reaches the plugin, which decides (Plivo's answer_method may be GET;
// Twilio's plugin answers its own 405). It answered the mux's 405.
func TestWebhookGETReachesThePlugin(t *testing.T) {
	e := twilioEnv(t)
	got := e.do(t, "GET", "/api/v1/twilio/allocate?CallSid=CA0123456789abcdef0123456789abcdef", "")
	if got.status != 405 || !strings.Contains(got.body, "Twilio webhooks are POST") {
		t.Fatalf("GET webhook: %+v, want the plugin's own 405", got)
	}
}
