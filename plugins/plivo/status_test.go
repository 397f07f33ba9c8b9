package plivo_test

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"testing"

	"github.com/edge-voice/edge/plugins"
	"github.com/edge-voice/edge/plugins/plivo"
	"github.com/edge-voice/edge/plugins/plugintest"
)

// Which callbacks end a call: every hangup, the stream's StopStream and
// DroppedStream; nothing else, and nothing badly signed. The nonce of a
// verified callback is reported, as for any webhook.
func TestStatusCallbackEvents(t *testing.T) {
	ctx := context.Background()
	p := plivo.New()
	if _, err := p.Configure(ctx, plugins.Settings{plivo.SettingAuthTokens: tokNew}); err != nil {
		t.Fatal(err)
	}
	cases := map[string]struct {
		route string
		form  url.Values
		ended string
	}{
		"hangup completed": {plivo.RouteHangup, url.Values{"CallUUID": {uuid}, "CallStatus": {"completed"}}, "completed"},
		"hangup no-answer": {plivo.RouteHangup, url.Values{"CallUUID": {uuid}, "CallStatus": {"no-answer"}}, "no-answer"},
		"hangup odd":       {plivo.RouteHangup, url.Values{"CallUUID": {uuid}, "CallStatus": {"Weird Status!"}}, "hangup"},
		"StopStream":       {plivo.RouteStatus, url.Values{"CallUUID": {uuid}, "Event": {"StopStream"}}, "StopStream"},
		"DroppedStream":    {plivo.RouteStatus, url.Values{"CallUUID": {uuid}, "Event": {"DroppedStream"}}, "DroppedStream"},
		"StartStream":      {plivo.RouteStatus, url.Values{"CallUUID": {uuid}, "Event": {"StartStream"}}, ""},
		"DegradedStream":   {plivo.RouteStatus, url.Values{"CallUUID": {uuid}, "Event": {"DegradedStream"}}, ""},
		"not a uuid":       {plivo.RouteHangup, url.Values{"CallUUID": {"nope"}, "CallStatus": {"completed"}}, ""},
	}
	i := 0
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			i++
			n := fmt.Sprintf("nonce-%020d", i)
			u := "https://edge.example.com/api/v1/plivo/" + c.route
			sig, err := plivo.Signature(tokNew, "POST", u, c.form, n)
			if err != nil {
				t.Fatal(err)
			}
			req := request(u, sig, c.form.Encode())
			req.Route = c.route
			req.Header.Set(plivo.NonceHeader, n)
			res, err := p.Webhook(ctx, req)
			if err != nil || res.Answer == nil || res.Answer.Status != 204 || res.Nonce != n {
				t.Fatalf("result = %+v, %v; want a 204 with the nonce", res, err)
			}
			got := ""
			if res.Ended != nil {
				got = res.Ended.Event
			}
			if got != c.ended {
				t.Errorf("ended = %q, want %q", got, c.ended)
			}
		})
	}
	u := "https://edge.example.com/api/v1/plivo/hangup"
	form := url.Values{"CallUUID": {uuid}, "CallStatus": {"completed"}}
	sig, _ := plivo.Signature("forged", "POST", u, form, nonce)
	req := request(u, sig, form.Encode())
	req.Route = plivo.RouteHangup
	if res, err := p.Webhook(ctx, req); err != nil || res.Answer == nil || res.Answer.Status != 403 || res.Ended != nil {
		t.Errorf("forged hangup = %+v, %v; want 403 and no end", res, err)
	}
}

// With a callback base the <Stream> names its statusCallbackUrl, in the
// template as in Answer; without one it names none.
func TestStreamNamesItsStatusCallback(t *testing.T) {
	ctx := context.Background()
	p := plivo.New()
	a := &plugins.Allocation{CallID: uuid, PodName: "voice-agent-0", WSURL: "wss://edge.example.com/ws/pod/voice-agent-0/c.tok/agent"}
	const cb = "https://edge.example.com/api/v1/plivo"
	resp, err := p.Answer(ctx, &plugins.AnswerRequest{Request: plugins.AllocationRequest{CallID: uuid}, Allocation: a, CallbackBase: cb})
	if err != nil {
		t.Fatal(err)
	}
	plugintest.Golden(t, "stream_status_callback", []byte(fmt.Sprintf("HTTP %d\nContent-Type: %s\n\n%s\n", resp.Status, resp.ContentType, resp.Body)))
	req := request(hookURL, "", callBody)
	req.CallbackBase = cb
	res, err := p.Webhook(ctx, req)
	if err != nil || res.Template == nil {
		t.Fatalf("webhook = %+v, %v", res, err)
	}
	if r, err := res.Template.Render(*a); err != nil || string(r.Body) != string(resp.Body) {
		t.Errorf("template renders\n%s\nAnswer renders\n%s (%v)", r.Body, resp.Body, err)
	}
	none, err := p.Answer(ctx, &plugins.AnswerRequest{Allocation: a})
	if err != nil || strings.Contains(string(none.Body), "statusCallback") {
		t.Errorf("answer without a callback base names one: %s (%v)", none.Body, err)
	}
}
