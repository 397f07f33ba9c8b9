package providers_test

import (
	"context"
	"strings"
	"testing"

	"github.com/edge-voice/edge/allocator"
)

// A merchant at its max_calls (issue 10) gets the provider's own failure
// markup (a hangup for Twilio, the reason code for Exotel), counted under
// its own outcome, while pods are still free.
func TestWebhookMerchantAtCap(t *testing.T) {
	e := twilioEnv(t)
	e.register(t, "gold", "voice-agent-1", "voice-agent-2")
	one := 1
	if err := e.alloc.SetMerchantConfig(context.Background(), "acme", allocator.MerchantConfig{MaxCalls: &one}); err != nil {
		t.Fatal(err)
	}
	if got := signedTwilio(t, e, "CA00000000000000000000000000000010"); !strings.Contains(got.body, "<Stream") {
		t.Fatalf("first call: %+v", got)
	}
	got := signedTwilio(t, e, "CA00000000000000000000000000000011")
	if got.status != 200 || !strings.Contains(got.body, "<Hangup") || strings.Contains(got.body, "<Stream") {
		t.Fatalf("twilio call beyond the cap: %+v, want a hangup", got)
	}
	if n := metric(t, e, "edge_provider_webhooks_total", "provider", "twilio", "outcome", "merchant_at_cap"); n != 1 {
		t.Errorf("merchant_at_cap outcomes = %v, want 1", n)
	}
	got = e.do(t, "GET", "/providers/exotel/voicebot?CallSid=ex-cap&merchant_id=acme", "")
	if got.status != 503 || !strings.Contains(got.body, `"code":"merchant_at_cap"`) {
		t.Errorf("exotel call beyond the cap: %+v", got)
	}
}

// A merchant over its admission rate gets the provider's failure markup,
// counted as rate_limited (issue 10).
func TestWebhookRateLimited(t *testing.T) {
	e := twilioEnv(t)
	cfg := e.alloc.Config()
	cfg.Admission.Rate = allocator.RateConfig{MerchantPerSecond: 0.2, MerchantBurst: 1}
	e.alloc.Apply(cfg)
	if got := signedTwilio(t, e, "CA00000000000000000000000000000020"); !strings.Contains(got.body, "<Stream") {
		t.Fatalf("first call: %+v", got)
	}
	got := signedTwilio(t, e, "CA00000000000000000000000000000021")
	if !strings.Contains(got.body, "<Hangup") || strings.Contains(got.body, "<Stream") {
		t.Fatalf("twilio call over the rate: %+v, want a hangup", got)
	}
	if n := metric(t, e, "edge_provider_webhooks_total", "provider", "twilio", "outcome", "rate_limited"); n != 1 {
		t.Errorf("rate_limited outcomes = %v, want 1", n)
	}
}
