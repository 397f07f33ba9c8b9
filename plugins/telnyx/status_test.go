package telnyx_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/edge-voice/edge/plugins"
	"github.com/edge-voice/edge/plugins/plugintest"
	"github.com/edge-voice/edge/plugins/telnyx"
)

// TestStatusCallbacks: a verified callback is acknowledged 204, and says
// the call ended exactly for the events after which Telnyx streams no more
// media: the call's end (completed, busy, no-answer, failed, canceled) and
// the stream's (stream-stopped, stream-error). A refused callback ends
// nothing. Served through the real gRPC adapters.
func TestStatusCallbacks(t *testing.T) {
	p := plugintest.Connect(t, telnyx.New())
	ctx := context.Background()
	if _, err := p.Configure(ctx, plugins.Settings{telnyx.SettingAuthTokens: pub(keyNew)}); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	const base = "AccountSid=acct&CallSid=" + callSid
	for name, tc := range map[string]struct {
		req    *plugins.Request
		status int
		event  string // "": nothing ended
	}{
		"completed":                        {status: 204, event: "completed", req: status(post(keyNew, now, formType, base+"&CallStatus=completed&CallbackSource=call-progress-events"))},
		"busy":                             {status: 204, event: "busy", req: status(post(keyNew, now, formType, base+"&CallStatus=busy"))},
		"no answer":                        {status: 204, event: "no-answer", req: status(post(keyNew, now, formType, base+"&CallStatus=no-answer"))},
		"failed":                           {status: 204, event: "failed", req: status(post(keyNew, now, formType, base+"&CallStatus=failed"))},
		"canceled":                         {status: 204, event: "canceled", req: status(post(keyNew, now, formType, base+"&CallStatus=canceled"))},
		"in progress":                      {status: 204, req: status(post(keyNew, now, formType, base+"&CallStatus=in-progress"))},
		"ringing":                          {status: 204, req: status(post(keyNew, now, formType, base+"&CallStatus=ringing"))},
		"stream started":                   {status: 204, req: status(post(keyNew, now, formType, base+"&StreamEvent=stream-started&StreamSid=s1"))},
		"stream stopped":                   {status: 204, event: "stream-stopped", req: status(post(keyNew, now, formType, base+"&StreamEvent=stream-stopped&StreamSid=s1"))},
		"stream error":                     {status: 204, event: "stream-error", req: status(post(keyNew, now, formType, base+"&StreamEvent=stream-error&StreamError=Connection+timeout"))},
		"stream started, completed status": {status: 204, req: status(post(keyNew, now, formType, base+"&StreamEvent=stream-started&CallStatus=completed"))},
		"json":                             {status: 204, event: "completed", req: status(post(keyNew, now, "application/json", `{"CallSid":"`+callSid+`","CallStatus":"completed","SequenceNumber":5}`))},
		"forged":                           {status: 403, req: status(post(keyOther, now, formType, base+"&CallStatus=completed"))},
		"stale":                            {status: 403, req: status(post(keyNew, now.Add(-telnyx.Tolerance-time.Minute), formType, base+"&CallStatus=completed"))},
		"no call sid":                      {status: 400, req: status(post(keyNew, now, formType, "CallStatus=completed"))},
		"call sid not of telnyx":           {status: 400, req: status(post(keyNew, now, formType, "CallSid=CA123&CallStatus=completed"))},
	} {
		t.Run(name, func(t *testing.T) {
			res, err := p.Webhook(ctx, tc.req)
			if err != nil {
				t.Fatal(err)
			}
			if res.Answer == nil || res.Answer.Status != tc.status || res.Allocate != nil {
				t.Fatalf("answer %+v, allocate %+v; want status %d", res.Answer, res.Allocate, tc.status)
			}
			switch {
			case tc.event == "" && res.Ended != nil:
				t.Errorf("ended %+v, want nothing ended", res.Ended)
			case tc.event != "" && (res.Ended == nil || res.Ended.CallID != callID || res.Ended.Event != tc.event):
				t.Errorf("ended %+v, want %s %s", res.Ended, callID, tc.event)
			}
			if tc.status == 204 && res.Nonce == "" {
				t.Error("a verified callback reports no nonce: its replay would be read again")
			}
		})
	}
}

func status(r *plugins.Request) *plugins.Request {
	r.Route, r.URL, r.RawQuery = telnyx.RouteStatus, "https://edge.example.com/api/v1/telnyx/status", ""
	return r
}

// TestStreamNamesItsStatusCallback: with a callback base the answer (and
// the template edge renders) names the stream's status callback below it;
// without one, none.
func TestStreamNamesItsStatusCallback(t *testing.T) {
	p := plugintest.Connect(t, telnyx.New())
	ctx := context.Background()
	if _, err := p.Configure(ctx, plugins.Settings{}); err != nil {
		t.Fatal(err)
	}
	const cb = "https://edge.example.com/api/v1/telnyx"
	req := request(formType, form, "", "")
	req.CallbackBase = cb
	res, err := p.Webhook(ctx, req)
	if err != nil || res.Allocate == nil || res.Template == nil {
		t.Fatalf("webhook: %+v %v", res, err)
	}
	a := plugins.Allocation{CallID: callID, PodName: "voice-agent-0", WSURL: "wss://edge.example.com/ws/pod/voice-agent-0/c.tok/agent/voice"}
	fromTemplate, err := res.Template.Render(a)
	if err != nil {
		t.Fatal(err)
	}
	answer, err := p.Answer(ctx, &plugins.AnswerRequest{Request: *res.Allocate, Allocation: &a, CallbackBase: cb})
	if err != nil {
		t.Fatal(err)
	}
	if string(fromTemplate.Body) != string(answer.Body) || answer.Status != http.StatusOK {
		t.Errorf("template renders\n%s\nAnswer gives\n%s", fromTemplate.Body, answer.Body)
	}
	plugintest.Golden(t, "stream_status_callback", answer.Body)
	plain, err := p.Answer(ctx, &plugins.AnswerRequest{Request: *res.Allocate, Allocation: &a})
	if err != nil {
		t.Fatal(err)
	}
	plugintest.Golden(t, "stream_say", append([]byte("HTTP 200\nContent-Type: text/xml\n\n"), plain.Body...))
}
