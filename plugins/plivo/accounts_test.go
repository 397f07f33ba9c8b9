package plivo_test

import (
	"context"
	"net/http"
	"net/url"
	"testing"

	"github.com/edge-voice/edge/plugins"
	"github.com/edge-voice/edge/plugins/plivo"
)

// With several accounts, a verified webhook or callback reports the
// account whose token signed it, rotation within an account included.
func TestWebhookReportsTheAccountWhoseTokenSigned(t *testing.T) {
	ctx := context.Background()
	p := plivo.New()
	if _, err := p.Configure(ctx, plugins.Settings{
		plugins.AccountTokensPrefix + "MAONE": tokNew + "," + tokOld, plugins.AccountTokensPrefix + "MATWO": "plivo-two-000",
	}); err != nil {
		t.Fatal(err)
	}
	for token, want := range map[string]string{tokNew: "MAONE", tokOld: "MAONE", "plivo-two-000": "MATWO"} {
		req := request(hookURL, signNonce(token, base, querySorted, callSorted, "n-"+token), callBody)
		req.Header.Set(plivo.NonceHeader, "n-"+token)
		if res, _ := p.Webhook(ctx, req); res.Allocate == nil || res.Account != want {
			t.Errorf("signed with %s: %+v, want an allocation of %s", token, res, want)
		}
		hangup := callbackRequest(t, token, plivo.RouteHangup, "h-"+token, url.Values{"CallUUID": {uuid}, "CallStatus": {"completed"}})
		if res, _ := p.Webhook(ctx, hangup); res.Ended == nil || res.Account != want {
			t.Errorf("hangup signed with %s: %+v, want the end reported by %s", token, res, want)
		}
	}
	forged := callbackRequest(t, "plivo-unknown", plivo.RouteHangup, "h-forged", url.Values{"CallUUID": {uuid}, "CallStatus": {"completed"}})
	if res, _ := p.Webhook(ctx, forged); res.Answer == nil || res.Answer.Status != http.StatusForbidden || res.Account != "" || res.Ended != nil {
		t.Errorf("forged hangup: %+v", res)
	}
}
