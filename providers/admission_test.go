package providers_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/edge-voice/edge/allocator"
)

// A merchant at its max_calls gets the provider's own failure
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
// counted as rate_limited.
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

// A webhook that finds every pod busy waits for one (admission.wait):
// answered with the pod a release freed within the budget, and with
// the same hangup as today's at_capacity when the budget runs out.
func TestWebhookWaitsForCapacity(t *testing.T) {
	e := twilioEnv(t)
	ctx := context.Background()
	// acme's chain is the one exclusive pod.
	if err := e.alloc.SetMerchantConfig(ctx, "acme", allocator.MerchantConfig{Fallback: []string{"gold"}}); err != nil {
		t.Fatal(err)
	}
	cfg := e.alloc.Config()
	cfg.Admission.Wait.Budget = 5 * time.Second
	e.alloc.Apply(cfg)
	wctx, stop := context.WithCancel(ctx)
	waker := e.alloc.Waker()
	done := make(chan struct{})
	go func() { waker.Run(wctx); close(done) }()
	t.Cleanup(func() { stop(); <-done })
	<-waker.Started()

	if got := signedTwilio(t, e, "CA00000000000000000000000000000030"); !strings.Contains(got.body, "<Stream") {
		t.Fatalf("first call: %+v", got)
	}
	second := make(chan answer, 1)
	go func() { second <- signedTwilio(t, e, "CA00000000000000000000000000000031") }()
	for e.rdb.ZCard(ctx, e.alloc.Keys().WaitDeadline()).Val() != 1 {
		time.Sleep(time.Millisecond) // the second webhook's allocate queues it
	}
	if _, err := e.alloc.Release(ctx, "CA00000000000000000000000000000030"); err != nil {
		t.Fatal(err)
	}
	if got := <-second; got.status != 200 || !strings.Contains(got.body, `<Stream url="wss://edge.example.com/ws/pod/voice-agent-0/`) {
		t.Fatalf("waiting webhook after the release: %+v, want the freed pod", got)
	}

	cfg.Admission.Wait.Budget = 300 * time.Millisecond
	e.alloc.Apply(cfg)
	start := time.Now()
	got := signedTwilio(t, e, "CA00000000000000000000000000000032")
	if got.status != 200 || !strings.Contains(got.body, "<Hangup") || strings.Contains(got.body, "<Stream") || time.Since(start) < 300*time.Millisecond {
		t.Fatalf("webhook whose wait ran out: %+v after %v, want a hangup after the budget", got, time.Since(start))
	}
	if n := metric(t, e, "edge_provider_webhooks_total", "provider", "twilio", "outcome", "at_capacity"); n != 1 {
		t.Errorf("at_capacity outcomes = %v, want 1", n)
	}
}
