package twilio_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/edge-voice/edge/plugins"
	"github.com/edge-voice/edge/plugins/plugintest"
	"github.com/edge-voice/edge/plugins/twilio"
)

const statusURL = "https://edge.example.com/api/v1/twilio/status"

// Which callbacks end a call: the call's terminal statuses and the
// stream's stop or error; nothing else, and nothing unsigned.
func TestStatusCallbackEvents(t *testing.T) {
	ctx := context.Background()
	p := twilio.New()
	if _, err := p.Configure(ctx, plugins.Settings{twilio.SettingAuthTokens: tokNew}); err != nil {
		t.Fatal(err)
	}
	cases := map[string]struct {
		pairs []string
		ended string // the event, "" for none
	}{
		"completed":      {[]string{"CallSid", sid, "CallStatus", "completed"}, "completed"},
		"busy":           {[]string{"CallSid", sid, "CallStatus", "busy"}, "busy"},
		"failed":         {[]string{"CallSid", sid, "CallStatus", "failed"}, "failed"},
		"no-answer":      {[]string{"CallSid", sid, "CallStatus", "no-answer"}, "no-answer"},
		"canceled":       {[]string{"CallSid", sid, "CallStatus", "canceled"}, "canceled"},
		"in-progress":    {[]string{"CallSid", sid, "CallStatus", "in-progress"}, ""},
		"ringing":        {[]string{"CallSid", sid, "CallStatus", "ringing"}, ""},
		"stream-started": {[]string{"CallSid", sid, "CallStatus", "in-progress", "StreamEvent", "stream-started"}, ""},
		"stream-stopped": {[]string{"CallSid", sid, "StreamEvent", "stream-stopped"}, "stream-stopped"},
		"stream-error":   {[]string{"CallSid", sid, "StreamEvent", "stream-error", "StreamError", "31920"}, "stream-error"},
		"not a call sid": {[]string{"CallSid", "CA-nope", "CallStatus", "completed"}, ""},
		"no call sid":    {[]string{"CallStatus", "completed"}, ""},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			req := request(statusURL, sign(tokNew, statusURL, c.pairs...), c.pairs...)
			req.Route = twilio.RouteStatus
			res, err := p.Webhook(ctx, req)
			if err != nil || res.Answer == nil || res.Answer.Status != 204 || res.Allocate != nil {
				t.Fatalf("result = %+v, %v; want a 204", res, err)
			}
			got := ""
			if res.Ended != nil {
				got = res.Ended.Event
				if res.Ended.CallID != sid {
					t.Errorf("ended call = %q", res.Ended.CallID)
				}
			}
			if got != c.ended {
				t.Errorf("ended = %q, want %q", got, c.ended)
			}
		})
	}
	forged := request(statusURL, sign("forged", statusURL, "CallSid", sid, "CallStatus", "completed"), "CallSid", sid, "CallStatus", "completed")
	forged.Route = twilio.RouteStatus
	if res, err := p.Webhook(ctx, forged); err != nil || res.Answer == nil || res.Answer.Status != 403 || res.Ended != nil {
		t.Errorf("forged callback = %+v, %v; want 403 and no end", res, err)
	}
}

// With a callback base the <Stream> names its status callback, in the
// template as in Answer; without one it names none.
func TestConnectNamesTheStreamStatusCallback(t *testing.T) {
	ctx := context.Background()
	p := twilio.New()
	a := &plugins.Allocation{CallID: sid, PodName: "voice-agent-0", WSURL: "wss://edge.example.com/ws/pod/voice-agent-0/c.tok/agent"}
	const base = "https://edge.example.com/api/v1/twilio"
	resp, err := p.Answer(ctx, &plugins.AnswerRequest{Request: plugins.AllocationRequest{CallID: sid, MerchantID: "acme"}, Allocation: a, CallbackBase: base})
	if err != nil {
		t.Fatal(err)
	}
	plugintest.Golden(t, "connect_status_callback", []byte(fmt.Sprintf("HTTP %d\nContent-Type: %s\n\n%s\n", resp.Status, resp.ContentType, resp.Body)))

	req := request(hookURL, "", call...)
	req.CallbackBase = base
	res, err := p.Webhook(ctx, req)
	if err != nil || res.Template == nil {
		t.Fatalf("webhook = %+v, %v", res, err)
	}
	rendered, err := res.Template.Render(*a)
	if err != nil || string(rendered.Body) != string(resp.Body) {
		t.Errorf("template renders\n%s\nAnswer renders\n%s (%v)", rendered.Body, resp.Body, err)
	}
	none, err := p.Answer(ctx, &plugins.AnswerRequest{Request: plugins.AllocationRequest{CallID: sid}, Allocation: a})
	if err != nil || strings.Contains(string(none.Body), "statusCallback") {
		t.Errorf("answer without a callback base names one: %s (%v)", none.Body, err)
	}
}
