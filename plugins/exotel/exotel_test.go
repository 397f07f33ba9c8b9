package exotel_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/http"
	"testing"

	"github.com/edge-voice/edge/plugins"
	"github.com/edge-voice/edge/plugins/exotel"
	"github.com/edge-voice/edge/plugins/plugintest"
)

const creds = "exo:pass-new"

func basic(c string) string { return "Basic " + base64.StdEncoding.EncodeToString([]byte(c)) }

func post(body, auth, ip string) *plugins.Request {
	h := http.Header{}
	if auth != "" {
		h.Set("Authorization", auth)
	}
	return &plugins.Request{Route: plugins.RouteAllocate, Method: "POST", URL: "https://edge.example.com/api/v1/exotel/allocate?merchant_id=acme",
		RawQuery: "merchant_id=acme", Header: h, Body: []byte(body), RemoteIP: ip}
}

func lookup(query, auth, ip string) *plugins.Request {
	r := post("", auth, ip)
	r.Route, r.Method, r.RawQuery, r.Body = exotel.RouteVoicebot, "GET", query, nil
	return r
}

func TestConformance(t *testing.T) {
	plugintest.Run(t, exotel.New(), plugintest.Suite{
		StreamOpening: plugintest.ReadStream(t, "testdata/stream_opening.jsonl"),
		Settings:      plugins.Settings{exotel.SettingAuthTokens: creds + ",exo:pass-old", exotel.SettingAllowIPs: "203.0.113.0/24, 198.51.100.7"},
		BadSettings: []plugintest.BadSettings{
			{Name: "not an ip", Settings: plugins.Settings{exotel.SettingAllowIPs: "not-an-ip"}, Key: exotel.SettingAllowIPs},
			{Name: "bad cidr", Settings: plugins.Settings{exotel.SettingAllowIPs: "10.0.0.0/33"}, Key: exotel.SettingAllowIPs},
		},
		Valid: []plugintest.Valid{
			{Name: "json", Request: post(`{"CallSid":"ex-1","CallFrom":"0990","Extra":{"a":1}}`, basic(creds), "203.0.113.9"), CallID: "ex-1"},
			{Name: "old credentials", Request: post(`{"CallSid":"ex-1"}`, basic("exo:pass-old"), "198.51.100.7"), CallID: "ex-1"},
			{Name: "voicebot lookup", Request: lookup("CallSid=ex-2&CallFrom=0990&merchant_id=acme", basic(creds), "203.0.113.9"), CallID: "ex-2"},
			{Name: "lower-case basic scheme", Request: post(`{"CallSid":"ex-4"}`, "basic "+base64.StdEncoding.EncodeToString([]byte(creds)), "203.0.113.9"), CallID: "ex-4"},
			{Name: "ipv4 mapped", Request: post(`{"CallSid":"ex-3"}`, basic(creds), "::ffff:203.0.113.9"), CallID: "ex-3"},
		},
		Invalid: []plugintest.Invalid{
			{Name: "wrong password", Request: post(`{"CallSid":"ex-1"}`, basic("exo:guess"), "203.0.113.9"), Status: 401},
			{Name: "no credentials", Request: post(`{"CallSid":"ex-1"}`, "", "203.0.113.9"), Status: 401},
			{Name: "outside allow-list", Request: post(`{"CallSid":"ex-1"}`, basic(creds), "192.0.2.1"), Status: 403},
			{Name: "malformed json", Request: post(`{"CallSid":`, basic(creds), "203.0.113.9"), Status: 400},
			{Name: "two values", Request: post(`{"CallSid":"a"} {}`, basic(creds), "203.0.113.9"), Status: 400},
			{Name: "no call sid", Request: post(`{"From":"1"}`, basic(creds), "203.0.113.9"), Status: 400},
			{Name: "lookup without call sid", Request: lookup("merchant_id=acme", basic(creds), "203.0.113.9"), Status: 400},
			{Name: "status callback without credentials", Request: statusReq("application/json", `{"CallSid":"ex-1","Status":"completed"}`, "", "203.0.113.9"), Status: 401},
		},
		StatusCallbacks: []plugintest.StatusCallback{
			{Name: "completed", Request: statusReq("application/json", `{"CallSid":"ex-1","Status":"completed"}`, basic(creds), "203.0.113.9"), CallID: "ex-1", Event: "completed"},
			{Name: "answered", Request: statusReq("application/json", `{"CallSid":"ex-1","Status":"completed","EventType":"answered"}`, basic(creds), "198.51.100.7")},
		},
	})
}

// TestBasicSchemeCaseInsensitive: RFC 7617 section 2 (after RFC 7235
// section 2.1) makes the scheme name case-insensitive, so "basic" and
// "BASIC" are the same credentials as "Basic".
func TestBasicSchemeCaseInsensitive(t *testing.T) {
	enc := base64.StdEncoding.EncodeToString([]byte(creds))
	for _, h := range []string{"basic " + enc, "BASIC " + enc, "bAsIc  " + enc} {
		if got, ok := exotel.BasicCredentials(h); !ok || got != creds {
			t.Errorf("BasicCredentials(%q) = %q, %v; want %q", h, got, ok, creds)
		}
	}
	for _, h := range []string{"Bearer " + enc, "Basic" + enc, "Basicx " + enc, "Basic\t" + enc, enc, ""} {
		if got, ok := exotel.BasicCredentials(h); ok {
			t.Errorf("BasicCredentials(%q) = %q, want a refusal", h, got)
		}
	}
}

func TestConfigureRejectsBadAllowList(t *testing.T) {
	if _, err := exotel.New().Configure(context.Background(), plugins.Settings{exotel.SettingAllowIPs: "10.0.0.0/33"}); err == nil {
		t.Error("Configure accepted an invalid CIDR")
	}
}

func TestGoldenAnswers(t *testing.T) {
	ctx := context.Background()
	p := exotel.New()
	req := plugins.AllocationRequest{CallID: "ex-1"}
	for name, ar := range map[string]*plugins.AnswerRequest{
		"url": {Request: req, Allocation: &plugins.Allocation{CallID: "ex-1", PodName: "voice-agent-0",
			WSURL: "wss://edge.example.com/ws/pod/voice-agent-0/c.tok/agent/voice/breeze-buddy/exotel/callback/template/v2"}},
		"all_draining": {Request: req, Failure: &plugins.Failure{Kind: plugins.FailureNoCapacity, Reason: plugins.ReasonAllDraining, Message: "all pods are draining", Status: 503}},
		"internal":     {Request: req, Failure: &plugins.Failure{Kind: plugins.FailureInternal, Message: "internal error", Status: 500}},
		"call_ended":   {Request: req, Failure: &plugins.Failure{Kind: plugins.FailureNoCapacity, Reason: plugins.ReasonCallEnded, Message: "the call has ended", Status: 410}},
		"fallback_url": {Request: req, Failure: &plugins.Failure{Kind: plugins.FailureUnavailable, Reason: plugins.ReasonRedisUnavailable, Message: "pool state unavailable, retry", Status: 503, Fallback: true}},
	} {
		resp, err := p.Answer(ctx, ar)
		if err != nil {
			t.Fatal(err)
		}
		plugintest.Golden(t, name, []byte(fmt.Sprintf("HTTP %d\nContent-Type: %s\n\n%s", resp.Status, resp.ContentType, resp.Body)))
	}
}

// FuzzWebhook: no panic or error; with credentials set, an allocation only
// with the right Authorization header.
func FuzzWebhook(f *testing.F) {
	f.Add([]byte(`{"CallSid":"ex-1"}`), basic(creds), "CallSid=x")
	f.Add([]byte(`{"CallSid":1}`), "Basic !!", "%zz")
	f.Add([]byte(`null`), "Basic "+base64.StdEncoding.EncodeToString([]byte("exo")), "")
	p := exotel.New()
	if _, err := p.Configure(context.Background(), plugins.Settings{exotel.SettingAuthTokens: creds}); err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, body []byte, auth, query string) {
		for _, req := range []*plugins.Request{post(string(body), auth, "127.0.0.1"), lookup(query, auth, "127.0.0.1")} {
			res, err := p.Webhook(context.Background(), req)
			if err != nil {
				t.Fatalf("Webhook: %v", err)
			}
			if res.Allocate != nil && auth != basic(creds) {
				if got, _ := exotel.BasicCredentials(auth); got != creds {
					t.Fatalf("allocated with Authorization %q", auth)
				}
			}
		}
	})
}
