package providers_test

import (
	"context"
	"net/url"
	"strings"
	"testing"
	"time"
)

// A captured webhook replayed after its call ended gets the provider's
// hangup answer and no pod (it allocated a pod again).
func TestReplayedWebhookAfterTheCallEndedHangsUp(t *testing.T) {
	e := twilioEnv(t)
	const sid = "CA0123456789abcdef0123456789abcd01"
	form := url.Values{"CallSid": {sid}, "From": {"+15550100"}}
	sig := twilioSign("https://edge.example.com"+twilioPath, form)
	first := e.do(t, "POST", twilioPath, form.Encode(), "X-Twilio-Signature", sig)
	if first.status != 200 || !strings.Contains(first.body, "<Stream url=") {
		t.Fatalf("first webhook: %+v", first)
	}
	if _, err := e.alloc.Release(context.Background(), sid); err != nil {
		t.Fatal(err)
	}
	replay := e.do(t, "POST", twilioPath, form.Encode(), "X-Twilio-Signature", sig)
	if strings.Contains(replay.body, "<Stream") || !strings.Contains(replay.body, "<Hangup") {
		t.Fatalf("replayed webhook: %+v, want a hangup and no stream", replay)
	}
	if n := metric(t, e, "edge_provider_webhooks_total", "provider", "twilio", "outcome", "call_ended"); n != 1 {
		t.Errorf("call_ended outcomes = %v, want 1", n)
	}
	if n, _ := e.rdb.Exists(context.Background(), "voice:call:"+sid).Result(); n != 0 {
		t.Errorf("the replay recreated the call's info")
	}
}

// An ended call stays ended for the providers' retry horizon, after its
// record (allocator.call_info_ttl) is gone: the signed webhook replayed
// then allocated the call again.
func TestReplayedWebhookAfterTheCallRecordExpiredHangsUp(t *testing.T) {
	e := twilioEnv(t)
	ctx := context.Background()
	const sid = "CA0123456789abcdef0123456789abcd02"
	form := url.Values{"CallSid": {sid}, "From": {"+15550100"}}
	sig := twilioSign("https://edge.example.com"+twilioPath, form)
	if first := e.do(t, "POST", twilioPath, form.Encode(), "X-Twilio-Signature", sig); !strings.Contains(first.body, "<Stream url=") {
		t.Fatalf("first webhook: %+v", first)
	}
	if _, err := e.alloc.Release(ctx, sid); err != nil {
		t.Fatal(err)
	}
	// The record expires as it would after call_info_ttl.
	record := e.alloc.Keys().CallEnded(sid)
	e.rdb.PExpire(ctx, record, time.Millisecond)
	for e.rdb.Exists(ctx, record).Val() == 1 {
		time.Sleep(2 * time.Millisecond) // polling an expiry, not synchronising goroutines
	}
	replay := e.do(t, "POST", twilioPath, form.Encode(), "X-Twilio-Signature", sig)
	if strings.Contains(replay.body, "<Stream") || !strings.Contains(replay.body, "<Hangup") {
		t.Fatalf("replay after the record expired: %+v, want a hangup and no stream", replay)
	}
	if n, _ := e.rdb.Exists(ctx, e.alloc.Keys().Call(sid)).Result(); n != 0 {
		t.Errorf("the replay allocated the call again")
	}
}
