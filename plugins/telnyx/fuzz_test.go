package telnyx_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/edge-voice/edge/plugins"
	"github.com/edge-voice/edge/plugins/telnyx"
)

// FuzzWebhook feeds arbitrary bodies, content types and signature headers
// to the verifier and parser, on the voice webhook and the status
// callback. Invariants: no panic, no error, and an allocation or an ended
// call only for a request whose signature verifies under the documented
// algorithm, of a CallSid of Telnyx's form.
func FuzzWebhook(f *testing.F) {
	now := time.Now()
	ts, sig := sign(keyNew, now, form)
	f.Add([]byte(form), formType, ts, sig)
	f.Add([]byte(`{"CallSid":"`+callSid+`"}`), "application/json", ts, sig)
	f.Add([]byte("CallSid=%zz"), formType, "17000000000000000000", "AAAA")
	f.Add([]byte(nil), "", "", "")
	ts2, sig2 := sign(keyNew, now, form+"&CallStatus=completed")
	f.Add([]byte(form+"&CallStatus=completed"), formType, ts2, sig2)
	p := telnyx.New()
	if _, err := p.Configure(context.Background(), plugins.Settings{telnyx.SettingAuthTokens: pub(keyNew)}); err != nil {
		f.Fatal(err)
	}
	keys, err := telnyx.ParsePublicKeys(pub(keyNew))
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, body []byte, contentType, ts, sig string) {
		req := &plugins.Request{Route: plugins.RouteAllocate, Method: "POST", URL: "https://edge.example.com/api/v1/telnyx/allocate",
			Header: http.Header{"Content-Type": {contentType}, telnyx.TimestampHeader: {ts}, telnyx.SignatureHeader: {sig}}, Body: body}
		cb := *req
		cb.Route = telnyx.RouteStatus
		ended, err := p.Webhook(context.Background(), &cb)
		if err != nil {
			t.Fatalf("status callback: %v", err)
		}
		if ended.Ended != nil {
			if _, err := telnyx.Verify(keys, ts, sig, body, time.Now()); err != nil {
				t.Fatalf("ended a call on a callback that does not verify (%v): %q %q %q", err, body, ts, sig)
			}
		}
		res, err := p.Webhook(context.Background(), req)
		if err != nil {
			t.Fatalf("Webhook: %v", err)
		}
		if res.Allocate == nil {
			return
		}
		if _, err := telnyx.Verify(keys, ts, sig, body, time.Now()); err != nil {
			t.Fatalf("allocated a request that does not verify (%v): %q %q %q", err, body, ts, sig)
		}
		if res.Nonce == "" {
			t.Fatal("allocated without reporting the signature as a nonce")
		}
		if _, ok := telnyx.CallID(res.Allocate.Extras["call_sid"]); !ok {
			t.Fatalf("allocated call sid %q", res.Allocate.Extras["call_sid"])
		}
	})
}
