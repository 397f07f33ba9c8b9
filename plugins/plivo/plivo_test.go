package plivo_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/edge-voice/edge/plugins"
	"github.com/edge-voice/edge/plugins/plivo"
	"github.com/edge-voice/edge/plugins/plugintest"
)

const (
	tokNew  = "plivo-new-0123456789"
	tokOld  = "plivo-old-9876543210"
	base    = "https://edge.example.com/api/v1/plivo/allocate"
	hookURL = base + "?merchant_id=acme&flow=v2"
	nonce   = "12345678901234567890"
)

// sign is Plivo's V3 signature for a POST with a non-empty body, written out
// from Plivo's SDK (validate_v3_signature) independently of the
// implementation: base URL, "?", the query sorted as k=v joined by "&" and
// followed by "." when present, the body params sorted as name+value, then
// "." + nonce; HMAC-SHA256 with the auth token, base64.
func sign(token, baseURL, sortedQuery, sortedBody string) string {
	return signNonce(token, baseURL, sortedQuery, sortedBody, nonce)
}

func signNonce(token, baseURL, sortedQuery, sortedBody, nonce string) string {
	s := baseURL + "?"
	if sortedQuery != "" {
		s += sortedQuery + "."
	}
	s += sortedBody + "." + nonce
	mac := hmac.New(sha256.New, []byte(token))
	mac.Write([]byte(s))
	return base64.StdEncoding.EncodeToString(mac.Sum(nil))
}

// uuid is a CallUUID of the documented form; callBody and its sorted
// concatenation.
const uuid = "3f1c2b4a-8d9e-4f10-a1b2-c3d4e5f60718"

var (
	callBody    = "To=%2B15550199&CallUUID=" + uuid + "&From=%2B15550100"
	callSorted  = "CallUUID" + uuid + "From+15550100To+15550199"
	querySorted = "flow=v2&merchant_id=acme"
)

func request(u, sig, body string) *plugins.Request {
	h := http.Header{}
	if sig != "" {
		h.Set(plivo.SignatureHeader, sig)
		h.Set(plivo.NonceHeader, nonce)
	}
	_, raw, _ := strings.Cut(u, "?")
	return &plugins.Request{Route: plugins.RouteAllocate, Method: "POST", URL: u, Header: h, RawQuery: raw, Body: []byte(body)}
}

// withNonce re-signs req's sorted strings under its own nonce: the plugin
// refuses a nonce it has seen, so each request of a suite needs one.
func withNonce(req *plugins.Request, n, sortedQuery, sortedBody string) *plugins.Request {
	req.Header.Set(plivo.NonceHeader, n)
	req.Header.Set(plivo.SignatureHeader, signNonce(tokNew, base, sortedQuery, sortedBody, n))
	return req
}

func TestVerify(t *testing.T) {
	body, _ := url.ParseQuery(callBody)
	good := sign(tokNew, base, querySorted, callSorted)
	for name, tc := range map[string]struct {
		url, header string
		want        bool
	}{
		"current token":        {hookURL, good, true},
		"previous token":       {hookURL, sign(tokOld, base, querySorted, callSorted), true},
		"several, one matches": {hookURL, "bogus, " + good, true},
		"several, none":        {hookURL, "bogus," + sign("x", base, querySorted, callSorted), false},
		"query order ignored":  {base + "?merchant_id=acme&flow=v2", good, true},
		"signed with port":     {"https://edge.example.com:443/api/v1/plivo/allocate?merchant_id=acme&flow=v2", good, true},
		"other query":          {base + "?merchant_id=evil&flow=v2", good, false},
		// Plivo's SDKs split the query on '&' alone and keep a stray '%':
		// a URL with ';' or '%' in its query is not malformed to them.
		"semicolon in query": {base + "?merchant_id=acme;x=1&flow=v2", sign(tokNew, base, "flow=v2&merchant_id=acme;x=1", callSorted), true},
		"stray percent":      {base + "?merchant_id=100%&flow=v2", sign(tokNew, base, "flow=v2&merchant_id=100%", callSorted), true},
		// plivo-go signs the query raw, without decoding it.
		"raw query, as plivo-go":   {base + "?merchant_id=a%2Bb&flow=v2", sign(tokNew, base, "flow=v2&merchant_id=a%2Bb", callSorted), true},
		"decoded, as plivo-python": {base + "?merchant_id=a%2Bb&flow=v2", sign(tokNew, base, "flow=v2&merchant_id=a+b", callSorted), true},
		"other body":               {hookURL, sign(tokNew, base, querySorted, "CallUUIDother"), false},
		"empty":                    {hookURL, "", false},
	} {
		t.Run(name, func(t *testing.T) {
			if got := plivo.Verify([]string{tokNew, tokOld}, "POST", tc.url, body, nonce, tc.header); got != tc.want {
				t.Errorf("Verify = %v, want %v", got, tc.want)
			}
		})
	}
	if plivo.Verify([]string{tokNew}, "POST", hookURL, body, "", good) {
		t.Error("verified without a nonce")
	}
}

func TestSignedStringShapes(t *testing.T) {
	// The SDK's construct_get_url / construct_post_url cases.
	for name, tc := range map[string]struct {
		method, url, body, want string
	}{
		"post, no query":    {"POST", base, "b=2&a=1", base + "?a1b2.n"},
		"post, query":       {"POST", base + "?z=1&y=2", "a=1", base + "?y=2&z=1.a1.n"},
		"post, empty body":  {"POST", base + "?z=1", "", base + "?z=1.n"},
		"post, nothing":     {"POST", base, "", base + ".n"},
		"get merges params": {"GET", base + "?z=1", "a=1", base + "?a=1&z=1.n"},
		"repeated, sorted":  {"POST", base, "a=2&a=1", base + "?a1a2.n"},
	} {
		t.Run(name, func(t *testing.T) {
			body, _ := url.ParseQuery(tc.body)
			got, err := plivo.SignedString(tc.method, tc.url, body, "n")
			if err != nil || got != tc.want {
				t.Errorf("SignedString = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

func TestConformance(t *testing.T) {
	plugintest.Run(t, plivo.New(), plugintest.Suite{
		StreamOpening: plugintest.ReadStream(t, "testdata/stream_opening.jsonl"),
		Settings:      plugins.Settings{plivo.SettingAuthTokens: tokNew + "," + tokOld},
		ReportsNonces: true,
		Valid: []plugintest.Valid{
			{Name: "signed", Request: request(hookURL, sign(tokNew, base, querySorted, callSorted), callBody), CallID: uuid},
		},
		Invalid: []plugintest.Invalid{
			{Name: "forged", Request: request(hookURL, sign("guess", base, querySorted, callSorted), callBody), Status: 403},
			{Name: "unsigned", Request: request(hookURL, "", callBody), Status: 403},
			{Name: "no call uuid", Request: withNonce(request(hookURL, "x", "From=%2B1"), "n-no-uuid", querySorted, "From+1"), Status: 400},
			{Name: "call uuid not a uuid", Request: withNonce(request(hookURL, "x", "CallUUID=pl-0123"), "n-bad-uuid", querySorted, "CallUUIDpl-0123"), Status: 400},
			{Name: "malformed", Request: request(hookURL, "x", "%zz"), Status: 400},
			{Name: "forged hangup", Request: callbackRequest(t, "guess", plivo.RouteHangup, "n-forged-hangup", url.Values{"CallUUID": {uuid}}), Status: 403},
		},
		StatusCallbacks: []plugintest.StatusCallback{
			{Name: "hangup", Request: callbackRequest(t, tokNew, plivo.RouteHangup, "n-hangup", url.Values{"CallUUID": {uuid}, "CallStatus": {"completed"}}), CallID: uuid, Event: "completed"},
			{Name: "DroppedStream", Request: callbackRequest(t, tokOld, plivo.RouteStatus, "n-dropped", url.Values{"CallUUID": {uuid}, "Event": {"DroppedStream"}}), CallID: uuid, Event: "DroppedStream"},
			{Name: "StartStream", Request: callbackRequest(t, tokNew, plivo.RouteStatus, "n-started", url.Values{"CallUUID": {uuid}, "Event": {"StartStream"}})},
		},
	})
}

// callbackRequest is a callback on route signed (V3) with token under n.
func callbackRequest(t *testing.T, token, route, n string, form url.Values) *plugins.Request {
	t.Helper()
	u := "https://edge.example.com/api/v1/plivo/" + route
	sig, err := plivo.Signature(token, "POST", u, form, n)
	if err != nil {
		t.Fatal(err)
	}
	r := request(u, sig, form.Encode())
	r.Route = route
	r.Header.Set(plivo.NonceHeader, n)
	return r
}

func TestGoldenAnswers(t *testing.T) {
	ctx := context.Background()
	p := plivo.New()
	if _, err := p.Configure(ctx, plugins.Settings{plivo.SettingContentType: "audio/x-l16;rate=16000"}); err != nil {
		t.Fatal(err)
	}
	req := plugins.AllocationRequest{CallID: uuid}
	for name, ar := range map[string]*plugins.AnswerRequest{
		"stream": {Request: req, Allocation: &plugins.Allocation{CallID: uuid, PodName: "voice-agent-0",
			WSURL: "wss://edge.example.com/ws/pod/voice-agent-0/c.tok/agent/voice/breeze-buddy/plivo/callback/order-confirmation/v2"}},
		"at_capacity":        {Request: req, Failure: &plugins.Failure{Kind: plugins.FailureNoCapacity, Reason: plugins.ReasonAtCapacity, Message: "all pods are busy", Status: 503}},
		"call_ended":         {Request: req, Failure: &plugins.Failure{Kind: plugins.FailureNoCapacity, Reason: plugins.ReasonCallEnded, Message: "the call has ended", Status: 410}},
		"unavailable_markup": {Request: req, Failure: &plugins.Failure{Kind: plugins.FailureUnavailable, Reason: plugins.ReasonRedisUnavailable, Message: "pool state unavailable, retry", Status: 503}},
		"fallback_url":       {Request: req, Failure: &plugins.Failure{Kind: plugins.FailureUnavailable, Reason: plugins.ReasonRedisUnavailable, Message: "pool state unavailable, retry", Status: 503, Fallback: true}},
	} {
		resp, err := p.Answer(ctx, ar)
		if err != nil {
			t.Fatal(err)
		}
		plugintest.Golden(t, name, []byte(fmt.Sprintf("HTTP %d\nContent-Type: %s\n\n%s\n", resp.Status, resp.ContentType, resp.Body)))
	}
}

// FuzzWebhook: no panic, no error, an allocation only for a verified request.
func FuzzWebhook(f *testing.F) {
	f.Add([]byte(callBody), hookURL, sign(tokNew, base, querySorted, callSorted), nonce)
	f.Add([]byte("CallUUID="+uuid+";b"), base, "", "")
	f.Add([]byte("%"), "http://[::1/x", "a,b,,", "n")
	p := plivo.New()
	if _, err := p.Configure(context.Background(), plugins.Settings{plivo.SettingAuthTokens: tokNew}); err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, body []byte, u, sig, nonce string) {
		h := http.Header{plivo.SignatureHeader: {sig}, plivo.NonceHeader: {nonce}}
		res, err := p.Webhook(context.Background(), &plugins.Request{Route: "allocate", Method: "POST", URL: u, Header: h, Body: body})
		if err != nil {
			t.Fatalf("Webhook: %v", err)
		}
		if res.Allocate == nil {
			return
		}
		form, err := plugins.ParseForm(body)
		if err != nil || !plivo.Verify([]string{tokNew}, "POST", u, form, nonce, sig) {
			t.Fatalf("allocated an unverified request %q %q %q %q", body, u, sig, nonce)
		}
	})
}

// TestFieldBoundaryShift: V3 concatenates body params as name+value with no
// separator, so CallUUID=<uuid>Directioninbound with Direction dropped signs
// like the original. It must be refused, not allocated under a new id.
func TestFieldBoundaryShift(t *testing.T) {
	orig := "CallUUID=" + uuid + "&Direction=inbound"
	shifted := "CallUUID=" + uuid + "Directioninbound"
	sig := sign(tokNew, base, querySorted, "CallUUID"+uuid+"Directioninbound")
	p := plivo.New()
	if _, err := p.Configure(context.Background(), plugins.Settings{plivo.SettingAuthTokens: tokNew}); err != nil {
		t.Fatal(err)
	}
	res, err := p.Webhook(context.Background(), request(hookURL, sig, orig))
	if err != nil || res.Allocate == nil || res.Allocate.CallID != uuid {
		t.Fatalf("the original webhook: %+v, %v", res, err)
	}
	req := request(hookURL, sig, shifted)
	req.Header.Set(plivo.NonceHeader, "another-nonce-0001") // not a replay of the first
	req.Header.Set(plivo.SignatureHeader, signNonce(tokNew, base, querySorted, "CallUUID"+uuid+"Directioninbound", "another-nonce-0001"))
	res, err = p.Webhook(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if res.Allocate != nil || res.Answer == nil || res.Answer.Status != http.StatusBadRequest {
		t.Fatalf("shifted webhook: allocation %+v, answer %+v; want the 400 invalid-request answer", res.Allocate, res.Answer)
	}
}

func TestValidCallUUID(t *testing.T) {
	for s, want := range map[string]bool{
		uuid:                                    true,
		strings.ToUpper(uuid):                   true,
		"3f1c2b4a8d9e4f10a1b2c3d4e5f60718":      false,
		"3f1c2b4a-8d9e-4f10-a1b2-c3d4e5f6071":   false,
		"3f1c2b4a-8d9e-4f10-a1b2-c3d4e5f607189": false,
		"3f1c2b4a-8d9e-4f10-a1b2_c3d4e5f60718":  false,
		"3f1c2b4a-8d9e-4f10-a1b2-c3d4e5f6071g":  false,
		"pl-0123":                               false,
		"":                                      false,
	} {
		if got := plivo.ValidCallUUID(s); got != want {
			t.Errorf("ValidCallUUID(%q) = %v, want %v", s, got, want)
		}
	}
}

// TestAnswerMethodGET: a Plivo application whose answer_method is GET calls
// the answer URL with the call's parameters in the query; the signature
// then covers the URL alone. The plugin must allocate for it.
func TestAnswerMethodGET(t *testing.T) {
	p := plivo.New()
	if _, err := p.Configure(context.Background(), plugins.Settings{plivo.SettingAuthTokens: tokNew}); err != nil {
		t.Fatal(err)
	}
	raw := "merchant_id=acme&CallUUID=" + uuid + "&From=%2B15550100&Direction=inbound"
	signed := base + "?CallUUID=" + uuid + "&Direction=inbound&From=+15550100&merchant_id=acme." + nonce
	req := &plugins.Request{Route: plugins.RouteAllocate, Method: "GET", URL: base + "?" + raw, RawQuery: raw, Header: http.Header{
		plivo.NonceHeader: {nonce}, plivo.SignatureHeader: {hmacB64(tokNew, signed)},
	}}
	res, err := p.Webhook(context.Background(), req)
	if err != nil || res.Allocate == nil {
		t.Fatalf("GET webhook: %+v, %v", res, err)
	}
	if res.Allocate.CallID != uuid || res.Allocate.MerchantID != "acme" || res.Allocate.Extras["from"] != "+15550100" {
		t.Errorf("allocation %+v", res.Allocate)
	}
	// The same URL signed for a POST does not verify as a GET.
	req.Header.Set(plivo.NonceHeader, "n2")
	req.Header.Set(plivo.SignatureHeader, hmacB64(tokNew, base+"?CallUUID="+uuid+"&Direction=inbound&From=+15550100&merchant_id=acme.n2x"))
	if res, _ := p.Webhook(context.Background(), req); res.Allocate != nil {
		t.Error("allocated a GET with a wrong signature")
	}
	req.Method = "PUT"
	if res, _ := p.Webhook(context.Background(), req); res.Answer == nil || res.Answer.Status != http.StatusMethodNotAllowed {
		t.Errorf("PUT: %+v", res)
	}
}

// TestNonceReported: a verified webhook reports its nonce, which edge
// remembers in Redis for every replica and refuses when it comes again; a
// forged one reports none, so that a forger cannot spend nonces; with no
// auth token nothing is verified and no nonce is reported.
func TestNonceReported(t *testing.T) {
	ctx := context.Background()
	p := plivo.New()
	if _, err := p.Configure(ctx, plugins.Settings{plivo.SettingAuthTokens: tokNew}); err != nil {
		t.Fatal(err)
	}
	req := request(hookURL, sign(tokNew, base, querySorted, callSorted), callBody)
	for range 2 {
		// The plugin keeps no nonces: both deliveries are parsed, and edge
		// tells the replay by the nonce it reports.
		if res, _ := p.Webhook(ctx, req); res.Allocate == nil || res.Nonce != nonce {
			t.Fatalf("verified delivery: %+v, want an allocation with nonce %q", res, nonce)
		}
	}
	hangup := withNonce(request(hookURL, "x", callBody), "hangup-nonce", querySorted, callSorted)
	hangup.Route = "hangup"
	if res, _ := p.Webhook(ctx, hangup); res.Answer == nil || res.Answer.Status != http.StatusNoContent || res.Nonce != "hangup-nonce" {
		t.Errorf("hangup: %+v, want 204 with its nonce", res)
	}
	forged := withNonce(request(hookURL, "x", callBody), "unspent", querySorted, callSorted)
	forged.Header.Set(plivo.SignatureHeader, "forged")
	if res, _ := p.Webhook(ctx, forged); res.Allocate != nil || res.Nonce != "" {
		t.Errorf("forged request: %+v, want a refusal reporting no nonce", res)
	}
	if _, err := p.Configure(ctx, plugins.Settings{}); err != nil {
		t.Fatal(err)
	}
	if res, _ := p.Webhook(ctx, req); res.Allocate == nil || res.Nonce != "" {
		t.Errorf("unverified (no auth token): %+v, want an allocation reporting no nonce", res)
	}
}
