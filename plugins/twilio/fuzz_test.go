package twilio_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/edge-voice/edge/plugins"
	"github.com/edge-voice/edge/plugins/twilio"
)

// FuzzWebhook feeds arbitrary bodies, signatures and URLs to the parser and
// verifier. Invariants: no panic, no error, and an allocation only for a
// request whose signature is the one the documented algorithm gives.
func FuzzWebhook(f *testing.F) {
	f.Add([]byte("CallSid="+sid+"&From=%2B1"), hookURL, sign(tokNew, hookURL, "CallSid", sid, "From", "+1"))
	f.Add([]byte("CallSid="+sid+";x=1"), hookURL, "")
	f.Add([]byte("%zz"), "https://[::1]:443/a?b", "AAAA")
	p := twilio.New()
	if _, err := p.Configure(context.Background(), plugins.Settings{twilio.SettingAuthTokens: tokNew}); err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, body []byte, u, sig string) {
		req := &plugins.Request{Route: plugins.RouteAllocate, Method: "POST", URL: u, Header: http.Header{twilio.SignatureHeader: {sig}}, Body: body}
		res, err := p.Webhook(context.Background(), req)
		if err != nil {
			t.Fatalf("Webhook: %v", err)
		}
		if res.Allocate == nil {
			return
		}
		form, err := plugins.ParseForm(body)
		if err != nil {
			t.Fatalf("allocated a malformed body %q", body)
		}
		if !twilio.Verify([]string{tokNew}, u, form, sig) || res.Allocate.CallID == "" {
			t.Fatalf("allocated an unverified request %q %q %q", body, u, sig)
		}
	})
}
