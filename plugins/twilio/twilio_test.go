package twilio_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha1"
	"encoding/base64"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/edge-voice/edge/plugins"
	"github.com/edge-voice/edge/plugins/plugintest"
	"github.com/edge-voice/edge/plugins/twilio"
)

const (
	tokNew  = "tok-new-0123456789"
	tokOld  = "tok-old-9876543210"
	hookURL = "https://edge.example.com/api/v1/twilio/allocate?merchant_id=acme&flow=v2"
)

// sign is Twilio's documented algorithm, written out independently of the
// implementation: URL, then each POST param sorted by name as name+value,
// HMAC-SHA1 with the auth token, base64.
func sign(token, u string, pairs ...string) string {
	type kv struct{ k, v string }
	var params []kv
	for i := 0; i+1 < len(pairs); i += 2 {
		params = append(params, kv{pairs[i], pairs[i+1]})
	}
	// insertion sort by name: the test's own ordering, not sort.Strings'
	for i := 1; i < len(params); i++ {
		for j := i; j > 0 && params[j].k < params[j-1].k; j-- {
			params[j], params[j-1] = params[j-1], params[j]
		}
	}
	s := u
	for _, p := range params {
		s += p.k + p.v
	}
	mac := hmac.New(sha1.New, []byte(token))
	mac.Write([]byte(s))
	return base64.StdEncoding.EncodeToString(mac.Sum(nil))
}

func form(pairs ...string) []byte {
	v := url.Values{}
	for i := 0; i+1 < len(pairs); i += 2 {
		v.Add(pairs[i], pairs[i+1])
	}
	return []byte(v.Encode())
}

func request(u, sig string, pairs ...string) *plugins.Request {
	h := http.Header{}
	if sig != "" {
		h.Set(twilio.SignatureHeader, sig)
	}
	raw := ""
	if _, q, ok := strings.Cut(u, "?"); ok {
		raw = q
	}
	return &plugins.Request{Route: plugins.RouteAllocate, Method: "POST", URL: u, Header: h, RawQuery: raw, Body: form(pairs...)}
}

// sid is a Call SID of the documented form (CA + 32 lower-case hex).
const sid = "CA0123456789abcdef0123456789abcdef"

var call = []string{"CallSid", sid, "From", "+15550100", "To", "+15550199", "AccountSid", "AC99"}

func TestVerify(t *testing.T) {
	noPort := "https://edge.example.com/api/v1/twilio/allocate?merchant_id=acme"
	withPort := "https://edge.example.com:443/api/v1/twilio/allocate?merchant_id=acme"
	params := url.Values{}
	for i := 0; i < len(call); i += 2 {
		params.Set(call[i], call[i+1])
	}
	for name, tc := range map[string]struct {
		signedURL, gotURL, token, sig string
		want                          bool
	}{
		"current token":           {noPort, noPort, tokNew, "", true},
		"previous token":          {noPort, noPort, tokOld, "", true},
		"unknown token":           {noPort, noPort, "tok-other", "", false},
		"signed with port":        {withPort, noPort, tokNew, "", true},
		"signed without port":     {noPort, withPort, tokNew, "", true},
		"other host":              {"https://evil.example.com/api/v1/twilio/allocate?merchant_id=acme", noPort, tokNew, "", false},
		"other query":             {noPort + "&x=1", noPort, tokNew, "", false},
		"http vs https":           {"http://edge.example.com/api/v1/twilio/allocate?merchant_id=acme", noPort, tokNew, "", false},
		"empty signature":         {noPort, noPort, tokNew, "-", false},
		"signature of other body": {noPort, noPort, tokNew, sign(tokNew, noPort, "CallSid", "CA9876543210fedcba9876543210fedcba"), false},
	} {
		t.Run(name, func(t *testing.T) {
			sig := tc.sig
			switch sig {
			case "":
				sig = sign(tc.token, tc.signedURL, call...)
			case "-":
				sig = ""
			}
			if got := twilio.Verify([]string{tokNew, tokOld}, tc.gotURL, params, sig); got != tc.want {
				t.Errorf("Verify = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestRepeatedParamsSignSortedDistinct(t *testing.T) {
	// Twilio's validators sign each distinct value of a repeated name, sorted.
	v := url.Values{"A": {"2", "1", "2"}}
	want := sign(tokNew, hookURL, "A", "1", "A", "2")
	if got := twilio.Signature(tokNew, hookURL, v); got != want {
		t.Errorf("Signature = %s, want %s", got, want)
	}
}

func TestConformance(t *testing.T) {
	plugintest.Run(t, twilio.New(), plugintest.Suite{
		StreamOpening: plugintest.ReadStream(t, "testdata/stream_opening.jsonl"),
		Settings:      plugins.Settings{twilio.SettingAuthTokens: tokNew + "," + tokOld},
		Valid: []plugintest.Valid{
			{Name: "signed", Request: request(hookURL, sign(tokNew, hookURL, call...), call...), CallID: sid},
			{Name: "signed with old token", Request: request(hookURL, sign(tokOld, hookURL, call...), call...), CallID: sid},
		},
		Invalid: []plugintest.Invalid{
			{Name: "forged", Request: request(hookURL, sign("guess", hookURL, call...), call...), Status: 403},
			{Name: "unsigned", Request: request(hookURL, "", call...), Status: 403},
			{Name: "no call sid", Request: request(hookURL, sign(tokNew, hookURL, "From", "+1"), "From", "+1"), Status: 400},
			{Name: "call sid not of the documented form", Request: request(hookURL, sign(tokNew, hookURL, "CallSid", "CA-demo-2"), "CallSid", "CA-demo-2"), Status: 400},
			{Name: "upper-case call sid", Request: request(hookURL, sign(tokNew, hookURL, "CallSid", "CA0123456789ABCDEF0123456789ABCDEF"), "CallSid", "CA0123456789ABCDEF0123456789ABCDEF"), Status: 400},
			{Name: "malformed form", Request: &plugins.Request{Route: "allocate", Method: "POST", URL: hookURL, Header: http.Header{}, Body: []byte("a=%zz")}, Status: 400},
			{Name: "unsigned GET", Request: &plugins.Request{Route: "allocate", Method: "GET", URL: hookURL, Header: http.Header{}}, Status: 403},
			{Name: "PUT", Request: &plugins.Request{Route: "allocate", Method: "PUT", URL: hookURL, Header: http.Header{}}, Status: 405},
			{Name: "forged status callback", Request: statusRequest("guess", "CallSid", sid, "CallStatus", "completed"), Status: 403},
		},
		StatusCallbacks: []plugintest.StatusCallback{
			{Name: "completed", Request: statusRequest(tokNew, "CallSid", sid, "CallStatus", "completed"), CallID: sid, Event: "completed"},
			{Name: "stream-error", Request: statusRequest(tokOld, "CallSid", sid, "StreamEvent", "stream-error"), CallID: sid, Event: "stream-error"},
			{Name: "ringing", Request: statusRequest(tokNew, "CallSid", sid, "CallStatus", "ringing")},
		},
	})
}

// statusRequest is a status callback signed with token.
func statusRequest(token string, pairs ...string) *plugins.Request {
	r := request(statusURL, sign(token, statusURL, pairs...), pairs...)
	r.Route = twilio.RouteStatus
	return r
}

func TestGoldenAnswers(t *testing.T) {
	ctx := context.Background()
	for _, mode := range []string{"say", "fallback"} {
		p := twilio.New()
		if _, err := p.Configure(ctx, plugins.Settings{twilio.SettingFailureMode: mode}); err != nil {
			t.Fatal(err)
		}
		req := plugins.AllocationRequest{CallID: sid, MerchantID: "acme"}
		answers := map[string]*plugins.AnswerRequest{
			"connect": {Request: req, Allocation: &plugins.Allocation{
				CallID: sid, PodName: "voice-agent-0", SourcePool: "pool:gold",
				WSURL: "wss://edge.example.com/ws/pod/voice-agent-0/c.tok/agent/voice/breeze-buddy/twilio/callback/order-confirmation/v2",
			}},
			"no_pods": {Request: req, Failure: &plugins.Failure{Kind: plugins.FailureNoCapacity, Reason: plugins.ReasonNoPods, Message: "no pods available", Status: 503}},
			"invalid": {Request: req, Failure: &plugins.Failure{Kind: plugins.FailureInvalidRequest, Message: "bad id", Status: 400}},
			// A replay of an ended call hears that it ended, not that no
			// agent is available.
			"call_ended": {Request: req, Failure: &plugins.Failure{Kind: plugins.FailureNoCapacity, Reason: plugins.ReasonCallEnded, Message: "the call has ended", Status: 410}},
			// edge's own failure: its markup when the operator chose it,
			// else an HTTP error on which Twilio calls the fallback URL,
			// whatever failure_mode says of refusals.
			"unavailable_markup": {Request: req, Failure: &plugins.Failure{Kind: plugins.FailureUnavailable, Reason: plugins.ReasonRedisUnavailable, Message: "pool state unavailable, retry", Status: 503}},
			"fallback_url":       {Request: req, Failure: &plugins.Failure{Kind: plugins.FailureUnavailable, Reason: plugins.ReasonRedisUnavailable, Message: "pool state unavailable, retry", Status: 503, Fallback: true}},
		}
		for name, ar := range answers {
			if name == "connect" && mode != "say" {
				continue
			}
			resp, err := p.Answer(ctx, ar)
			if err != nil {
				t.Fatal(err)
			}
			plugintest.Golden(t, fmt.Sprintf("%s_%s", name, mode), []byte(fmt.Sprintf("HTTP %d\nContent-Type: %s\n\n%s\n", resp.Status, resp.ContentType, resp.Body)))
		}
	}
}

// TestFieldBoundaryShift: Twilio signs name+value pairs with no separator,
// so moving a boundary keeps the signature. A captured webhook rewritten as
// CallSid=<sid>Directioninbound with Direction dropped must be refused, not
// allocated under a new call id.
func TestFieldBoundaryShift(t *testing.T) {
	orig := []string{"CallSid", sid, "Direction", "inbound"}
	shifted := []string{"CallSid", sid + "Directioninbound"}
	sig := sign(tokNew, hookURL, orig...)
	if sign(tokNew, hookURL, shifted...) != sig {
		t.Fatal("the shifted body does not sign like the original: the test shows nothing")
	}
	p := twilio.New()
	if _, err := p.Configure(context.Background(), plugins.Settings{twilio.SettingAuthTokens: tokNew}); err != nil {
		t.Fatal(err)
	}
	res, err := p.Webhook(context.Background(), request(hookURL, sig, orig...))
	if err != nil || res.Allocate == nil || res.Allocate.CallID != sid {
		t.Fatalf("the original webhook: %+v, %v", res, err)
	}
	res, err = p.Webhook(context.Background(), request(hookURL, sig, shifted...))
	if err != nil {
		t.Fatal(err)
	}
	if res.Allocate != nil || res.Answer == nil || res.Answer.Status != http.StatusBadRequest {
		t.Fatalf("shifted webhook: allocation %+v, answer %+v; want the 400 invalid-request answer", res.Allocate, res.Answer)
	}
}

func TestValidCallSid(t *testing.T) {
	for s, want := range map[string]bool{
		sid:                                  true,
		"CA" + strings.Repeat("f", 32):       true,
		"CA" + strings.Repeat("F", 32):       false,
		"CA" + strings.Repeat("0", 31):       false,
		"CA" + strings.Repeat("0", 33):       false,
		"MA0123456789abcdef0123456789abcdef": false,
		"ca0123456789abcdef0123456789abcdef": false,
		"CA0123456789abcdef0123456789abcdeg": false,
		"CA1":                                false,
		"":                                   false,
	} {
		if got := twilio.ValidCallSid(s); got != want {
			t.Errorf("ValidCallSid(%q) = %v, want %v", s, got, want)
		}
	}
}
