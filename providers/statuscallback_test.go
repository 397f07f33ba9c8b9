package providers_test

import (
	"context"
	"encoding/base64"
	"net/url"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/edge-voice/edge/plugins"
	"github.com/edge-voice/edge/plugins/plivo"
)

// twilioStatus sends a Twilio status callback to /api/v1/twilio/status,
// signed with sig (twilioSign over the public URL when sig is "").
func twilioStatus(t *testing.T, e *env, sig string, pairs ...string) answer {
	t.Helper()
	form := url.Values{"AccountSid": {"AC0123456789abcdef0123456789abcdef"}}
	for i := 0; i+1 < len(pairs); i += 2 {
		form.Set(pairs[i], pairs[i+1])
	}
	if sig == "" {
		sig = twilioSign("https://edge.example.com/api/v1/twilio/status", form)
	}
	return e.do(t, "POST", "/api/v1/twilio/status", form.Encode(), "X-Twilio-Signature", sig)
}

// A Twilio caller who hung up before the media stream opened held the pod
// for the lease plus the sweep: Twilio's signed "completed" callback was
// acknowledged and dropped. It now puts the pod back at once; the answer
// names the stream's status callback, whose stream-error does the same for
// a stream that fails to open. Forged callbacks change nothing.
func TestTwilioStatusCallbackReleasesACallWithoutStream(t *testing.T) {
	e := twilioEnv(t)
	ctx := context.Background()
	k := e.alloc.Keys()
	free := func() bool { return e.rdb.SIsMember(ctx, k.PoolAvailable("gold"), "voice-agent-0").Val() }
	const hungUp = "CA00000000000000000000000000000a01"

	got := signedTwilio(t, e, hungUp)
	if got.status != 200 || !strings.Contains(got.body, `statusCallback="https://edge.example.com/api/v1/twilio/status" statusCallbackMethod="POST"`) {
		t.Fatalf("answer does not name the stream's status callback: %+v", got)
	}
	if free() {
		t.Fatal("voice-agent-0 is still in its pool after the allocation")
	}
	before := e.snapshot(t)
	for _, sig := range []string{"forged", twilioSign("https://edge.example.com/api/v1/twilio/status", url.Values{"CallSid": {hungUp}})} {
		if got := twilioStatus(t, e, sig, "CallSid", hungUp, "CallStatus", "completed"); got.status != 403 {
			t.Errorf("badly signed callback: %+v, want 403", got)
		}
	}
	// Events that do not end the call are acknowledged and change nothing.
	for _, ev := range [][]string{{"CallStatus", "ringing"}, {"CallStatus", "in-progress"}, {"StreamEvent", "stream-started"}} {
		if got := twilioStatus(t, e, "", "CallSid", hungUp, ev[0], ev[1]); got.status != 204 {
			t.Errorf("%v: %+v", ev, got)
		}
	}
	if diff := cmp.Diff(before, e.snapshot(t)); diff != "" {
		t.Fatalf("a forged or non-ending callback changed Redis:\n%s", diff)
	}

	if got := twilioStatus(t, e, "", "CallSid", hungUp, "CallStatus", "completed"); got.status != 204 {
		t.Fatalf("signed completed callback: %+v", got)
	}
	if !free() {
		t.Fatal("voice-agent-0 is not back in its pool after the signed completed callback")
	}
	if tl, err := e.alloc.Timeline(ctx, hungUp); err != nil || tl.EndedBy != "provider:completed" || tl.ReleasedBy != "provider" {
		t.Errorf("timeline = %+v, %v", tl, err)
	}
	// Twilio retries and sends the stream's own events after the call's:
	// nothing more happens, and a replayed webhook gets the hangup.
	before = e.snapshot(t)
	for _, ev := range [][]string{{"CallStatus", "completed"}, {"StreamEvent", "stream-stopped"}} {
		if got := twilioStatus(t, e, "", "CallSid", hungUp, ev[0], ev[1]); got.status != 204 {
			t.Errorf("late %v: %+v", ev, got)
		}
	}
	if diff := cmp.Diff(before, e.snapshot(t)); diff != "" {
		t.Errorf("a late callback changed Redis:\n%s", diff)
	}
	if got := signedTwilio(t, e, hungUp); got.status != 200 || !strings.Contains(got.body, "This call has ended.") {
		t.Errorf("replayed webhook: %+v", got)
	}

	// A stream that could not open (Twilio 31920-31924) ends its call too.
	const failed = "CA00000000000000000000000000000a02"
	if got := signedTwilio(t, e, failed); got.status != 200 || free() {
		t.Fatalf("second call: %+v", got)
	}
	if got := twilioStatus(t, e, "", "CallSid", failed, "StreamSid", "MZ0123456789abcdef0123456789abcdef",
		"StreamEvent", "stream-error", "StreamError", "31920"); got.status != 204 {
		t.Fatalf("stream-error callback: %+v", got)
	}
	if !free() {
		t.Error("voice-agent-0 is not back in its pool after stream-error")
	}
	if tl, err := e.alloc.Timeline(ctx, failed); err != nil || tl.EndedBy != "provider:stream-error" {
		t.Errorf("timeline = %+v, %v", tl, err)
	}
}

// Without providers.webhook_base_url edge names no status callback: the
// URL would come from what the request says of edge's name.
func TestTwilioAnswerNamesNoCallbackWithoutWebhookBase(t *testing.T) {
	e := twilioEnv(t)
	cfg := *e.cfg.Load()
	cfg.WebhookBaseURL = ""
	e.cfg.Store(&cfg)
	form := url.Values{"CallSid": {"CA00000000000000000000000000000a03"}, "From": {"+15550100"}}
	got := e.do(t, "POST", twilioPath, form.Encode(), "X-Twilio-Signature", twilioSign(e.srv.URL+twilioPath, form))
	if got.status != 200 || !strings.Contains(got.body, "<Stream url=") || strings.Contains(got.body, "statusCallback") {
		t.Errorf("answer without a webhook base: %+v", got)
	}
}

// plivoCallback sends a Plivo callback to /api/v1/plivo/<route>, signed
// (V3) with token under nonce.
func plivoCallback(t *testing.T, e *env, route, token, nonce string, form url.Values) answer {
	t.Helper()
	path := "/api/v1/plivo/" + route
	sig, err := plivo.Signature(token, "POST", "https://edge.example.com"+path, form, nonce)
	if err != nil {
		t.Fatal(err)
	}
	return e.do(t, "POST", path, form.Encode(), plivo.SignatureHeader, sig, plivo.NonceHeader, nonce)
}

// Plivo's hangup_url callback, acknowledged and dropped before, ends a
// call whose stream never opened at once; so does the stream's
// DroppedStream on the statusCallbackUrl the answer now names. A replayed
// callback (its nonce seen) is refused; a forged one changes nothing.
func TestPlivoHangupAndStreamCallbacksReleaseACallWithoutStream(t *testing.T) {
	e := newEnv(t, spec("plivo", plugins.Settings{"auth_tokens": plivoToken}))
	e.register(t, "gold", "voice-agent-0")
	ctx := context.Background()
	k := e.alloc.Keys()
	free := func() bool { return e.rdb.SIsMember(ctx, k.PoolAvailable("gold"), "voice-agent-0").Val() }

	hungUp := plivoUUID(41)
	got := signedPlivo(t, e, hungUp, "nonce-00000000000000000041")
	if got.status != 200 || !strings.Contains(got.body, `statusCallbackUrl="https://edge.example.com/api/v1/plivo/status" statusCallbackMethod="POST"`) {
		t.Fatalf("answer does not name the stream's status callback: %+v", got)
	}
	hangup := url.Values{"CallUUID": {hungUp}, "CallStatus": {"completed"}, "HangupCause": {"NORMAL_CLEARING"}}
	before := e.snapshot(t)
	if got := plivoCallback(t, e, "hangup", "forged-token", "nonce-00000000000000000042", hangup); got.status != 403 {
		t.Errorf("forged hangup: %+v, want 403", got)
	}
	if diff := cmp.Diff(before, e.snapshot(t)); diff != "" {
		t.Fatalf("a forged hangup changed Redis:\n%s", diff)
	}
	if got := plivoCallback(t, e, "hangup", plivoToken, "nonce-00000000000000000043", hangup); got.status != 204 {
		t.Fatalf("signed hangup: %+v", got)
	}
	if !free() {
		t.Fatal("voice-agent-0 is not back in its pool after the signed hangup")
	}
	if tl, err := e.alloc.Timeline(ctx, hungUp); err != nil || tl.EndedBy != "provider:completed" {
		t.Errorf("timeline = %+v, %v", tl, err)
	}
	if got := plivoCallback(t, e, "hangup", plivoToken, "nonce-00000000000000000043", hangup); got.status != 403 {
		t.Errorf("replayed hangup: %+v, want 403", got)
	}

	dropped := plivoUUID(44)
	if got := signedPlivo(t, e, dropped, "nonce-00000000000000000044"); got.status != 200 || free() {
		t.Fatalf("second call: %+v", got)
	}
	if got := plivoCallback(t, e, "status", plivoToken, "nonce-00000000000000000045",
		url.Values{"CallUUID": {dropped}, "Event": {"StartStream"}}); got.status != 204 || free() {
		t.Fatalf("StartStream: %+v (or the pod went back)", got)
	}
	if got := plivoCallback(t, e, "status", plivoToken, "nonce-00000000000000000046",
		url.Values{"CallUUID": {dropped}, "Event": {"DroppedStream"}, "Error": {"connection failed"}}); got.status != 204 {
		t.Fatalf("DroppedStream: %+v", got)
	}
	if !free() {
		t.Error("voice-agent-0 is not back in its pool after DroppedStream")
	}
}

// Exotel's StatusCallback, which edge had no route for, ends a call whose
// stream never opened at once; it is authenticated as Exotel's other
// webhooks are (HTTP Basic here), and an unauthenticated one changes
// nothing.
func TestExotelStatusCallbackReleasesACallWithoutStream(t *testing.T) {
	const creds = "exo:pass"
	e := newEnv(t, spec("exotel", plugins.Settings{"auth_tokens": creds}))
	e.register(t, "gold", "voice-agent-0")
	ctx := context.Background()
	k := e.alloc.Keys()
	free := func() bool { return e.rdb.SIsMember(ctx, k.PoolAvailable("gold"), "voice-agent-0").Val() }
	auth := "Basic " + base64.StdEncoding.EncodeToString([]byte(creds))
	const sid = "80bfbec2d78bbbf10fb851f4fa165211"

	if got := e.do(t, "POST", "/api/v1/exotel/allocate", `{"CallSid":"`+sid+`"}`, "Authorization", auth); got.status != 200 || free() {
		t.Fatalf("allocate: %+v", got)
	}
	status := `{"CallSid":"` + sid + `","Status":"completed","EventType":"terminal","ConversationDuration":0}`
	before := e.snapshot(t)
	if got := e.do(t, "POST", "/api/v1/exotel/status", status, "Content-Type", "application/json"); got.status != 401 {
		t.Errorf("unauthenticated callback: %+v, want 401", got)
	}
	if diff := cmp.Diff(before, e.snapshot(t)); diff != "" {
		t.Fatalf("an unauthenticated callback changed Redis:\n%s", diff)
	}
	if got := e.do(t, "POST", "/api/v1/exotel/status", status, "Content-Type", "application/json", "Authorization", auth); got.status != 200 {
		t.Fatalf("status callback: %+v", got)
	}
	if !free() {
		t.Fatal("voice-agent-0 is not back in its pool after Exotel's completed callback")
	}
	if tl, err := e.alloc.Timeline(ctx, sid); err != nil || tl.EndedBy != "provider:completed" {
		t.Errorf("timeline = %+v, %v", tl, err)
	}
}
