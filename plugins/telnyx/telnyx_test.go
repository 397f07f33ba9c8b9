package telnyx_test

import (
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/edge-voice/edge/plugins"
	"github.com/edge-voice/edge/plugins/plugintest"
	"github.com/edge-voice/edge/plugins/telnyx"
)

// Keys the tests sign with, from fixed seeds: Telnyx holds the private
// key, edge only the public one (as base64, the portal's form).
var (
	keyNew   = ed25519.NewKeyFromSeed(make([]byte, ed25519.SeedSize))
	keyOld   = ed25519.NewKeyFromSeed([]byte("telnyx-test-old-key-seed-32bytes"))
	keyOther = ed25519.NewKeyFromSeed([]byte("not-the-account-key-seed-32bytes"))
)

func pub(k ed25519.PrivateKey) string {
	return base64.StdEncoding.EncodeToString(k.Public().(ed25519.PublicKey))
}

const (
	callSid = "v3:9X2vxPDFY2RHSJ1EdMS0RHRksMTg7ldNxdjWbVr9zBjbGjGsSe-aiQ"
	callID  = "v3.9X2vxPDFY2RHSJ1EdMS0RHRksMTg7ldNxdjWbVr9zBjbGjGsSe-aiQ"
	form    = "AccountSid=f5586561-8ff0-4291-a51b-c7dfe4139ff9&CallSid=" + callSid + "&From=%2B35319605860&To=%2B13129457420"
)

// sign returns the two headers Telnyx sends for body at time at.
func sign(k ed25519.PrivateKey, at time.Time, body string) (ts, sig string) {
	ts = strconv.FormatInt(at.Unix(), 10)
	return ts, base64.StdEncoding.EncodeToString(ed25519.Sign(k, []byte(ts+"|"+body)))
}

// post is a TeXML voice webhook signed with k at time at.
func post(k ed25519.PrivateKey, at time.Time, contentType, body string) *plugins.Request {
	ts, sig := sign(k, at, body)
	return request(contentType, body, ts, sig)
}

func request(contentType, body, ts, sig string) *plugins.Request {
	h := http.Header{"Content-Type": {contentType}}
	if ts != "" {
		h.Set(telnyx.TimestampHeader, ts)
	}
	if sig != "" {
		h.Set(telnyx.SignatureHeader, sig)
	}
	return &plugins.Request{Route: plugins.RouteAllocate, Method: "POST", URL: "https://edge.example.com/api/v1/telnyx/allocate?merchant_id=acme",
		RawQuery: "merchant_id=acme", Header: h, Body: []byte(body)}
}

const formType = "application/x-www-form-urlencoded"

func TestConformance(t *testing.T) {
	now := time.Now()
	ts, sig := sign(keyNew, now, form)
	get := request(formType, "", ts, sig)
	get.Method, get.RawQuery = "GET", "merchant_id=acme&CallSid="+callSid
	plugintest.Run(t, telnyx.New(), plugintest.Suite{
		StreamOpening: plugintest.ReadStream(t, "testdata/stream_opening.jsonl"),
		Settings:      plugins.Settings{telnyx.SettingAuthTokens: pub(keyNew) + ", " + pub(keyOld)},
		ReportsNonces: true,
		BadSettings: []plugintest.BadSettings{
			{Name: "not base64", Settings: plugins.Settings{telnyx.SettingAuthTokens: "not a key"}, Key: telnyx.SettingAuthTokens},
			{Name: "31 bytes", Settings: plugins.Settings{telnyx.SettingAuthTokens: base64.StdEncoding.EncodeToString(make([]byte, 31))}, Key: telnyx.SettingAuthTokens},
			{Name: "one bad of two", Settings: plugins.Settings{telnyx.SettingAuthTokens: pub(keyNew) + ",AAAA"}, Key: telnyx.SettingAuthTokens},
			{Name: "a key of small order", Settings: plugins.Settings{telnyx.SettingAuthTokens: pub(keyNew) + "," + base64.StdEncoding.EncodeToString(make([]byte, 32))}, Key: telnyx.SettingAuthTokens},
			{Name: "track", Settings: plugins.Settings{telnyx.SettingTrack: "inbound"}, Key: telnyx.SettingTrack},
			{Name: "bidirectional mode", Settings: plugins.Settings{telnyx.SettingBidirectionalMode: "pcm"}, Key: telnyx.SettingBidirectionalMode},
		},
		Valid: []plugintest.Valid{
			{Name: "texml form", Request: post(keyNew, now, formType, form), CallID: callID},
			{Name: "old key", Request: post(keyOld, now, formType+"; charset=utf-8", form), CallID: callID},
			{Name: "json", Request: post(keyNew, now, "application/json", `{"CallSid":"`+callSid+`","SequenceNumber":2,"ShakenStirValidated":true}`), CallID: callID},
			{Name: "clock skew within tolerance", Request: post(keyNew, now.Add(-telnyx.Tolerance+time.Minute), formType, form), CallID: callID},
		},
		Invalid: []plugintest.Invalid{
			{Name: "another key", Request: post(keyOther, now, formType, form), Status: 403},
			{Name: "stale", Request: post(keyNew, now.Add(-telnyx.Tolerance-time.Minute), formType, form), Status: 403},
			{Name: "from the future", Request: post(keyNew, now.Add(telnyx.Tolerance+time.Minute), formType, form), Status: 403},
			{Name: "no headers", Request: request(formType, form, "", ""), Status: 403},
			{Name: "body changed", Request: request(formType, form+"&x=1", ts, sig), Status: 403},
			{Name: "timestamp changed", Request: request(formType, form, strconv.FormatInt(now.Unix()+1, 10), sig), Status: 403},
			{Name: "signed timestamp with a plus", Request: request(formType, form, "+"+ts, sig), Status: 403},
			{Name: "signature with a newline", Request: request(formType, form, ts, sig[:40]+"\n"+sig[40:]), Status: 403},
			{Name: "GET", Request: get, Status: 405},
			{Name: "no call sid", Request: post(keyNew, now, formType, "From=%2B1"), Status: 400},
			{Name: "call sid not of telnyx", Request: post(keyNew, now, formType, "CallSid=v3:a/b"), Status: 400},
			{Name: "malformed form", Request: post(keyNew, now, formType, "CallSid=%zz"), Status: 400},
			{Name: "two json values", Request: post(keyNew, now, "application/json", `{"CallSid":"`+callSid+`"} {}`), Status: 400},
		},
	})
}

// TestReplayNonce: the nonce is the same for a second delivery of the same
// signed request, and another for a request signed at another second;
// a request refused for its content still spends its nonce.
func TestReplayNonce(t *testing.T) {
	p := telnyx.New()
	ctx := context.Background()
	if _, err := p.Configure(ctx, plugins.Settings{telnyx.SettingAuthTokens: pub(keyNew)}); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	nonce := func(req *plugins.Request) string {
		res, err := p.Webhook(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		return res.Nonce
	}
	first := nonce(post(keyNew, now, formType, form))
	if first == "" || first != nonce(post(keyNew, now, formType, form)) {
		t.Errorf("a redelivery's nonce differs or is empty: %q", first)
	}
	// The bits that base64's padding discards may be set (Telnyx's SDK
	// accepts it): the same signature spelled otherwise is the same nonce.
	ts, sig := sign(keyNew, now, form)
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
	i := len(sig) - 3 // the last data character; "==" follows
	respelled := sig[:i] + string(alphabet[strings.IndexByte(alphabet, sig[i])^1]) + sig[i+1:]
	if respelled == sig || nonce(request(formType, form, ts, respelled)) != first {
		t.Error("a signature spelled with padding bits set is another nonce: its replay would pass")
	}
	if n := nonce(post(keyNew, now.Add(-time.Second), formType, form)); n == first {
		t.Error("a request signed at another second has the same nonce")
	}
	if n := nonce(post(keyNew, now, formType, "From=1")); n == "" {
		t.Error("a signed request without CallSid spends no nonce: its replay would be read again")
	}
}

func TestUnverifiedWhenNoKeys(t *testing.T) {
	p := telnyx.New()
	c, err := p.Configure(context.Background(), plugins.Settings{})
	if err != nil || c.Verifies {
		t.Fatalf("Configure without keys: %+v %v, want Verifies false", c, err)
	}
	res, err := p.Webhook(context.Background(), request(formType, form, "", ""))
	if err != nil || res.Allocate == nil || res.Nonce != "" {
		t.Fatalf("unsigned webhook without keys: %+v %v", res, err)
	}
}

func TestCallID(t *testing.T) {
	for in, want := range map[string]string{
		callSid:       callID,
		"v2:abc_-123": "v2.abc_-123",
		"v10:x":       "v10.x",
	} {
		if got, ok := telnyx.CallID(in); !ok || got != want {
			t.Errorf("CallID(%q) = %q, %v; want %q", in, got, ok, want)
		}
	}
	long := "v3:" + string(make([]byte, 126))
	for _, in := range []string{"", "v3:", ":abc", "v:abc", "x3:abc", "v3abc", "v3:a:b", "v3:a.b", "v3:a/b", "v3:a=", "v12345:a", long} {
		if got, ok := telnyx.CallID(in); ok {
			t.Errorf("CallID(%q) = %q, want a refusal", in, got)
		}
	}
}

func TestGoldenAnswers(t *testing.T) {
	ctx := context.Background()
	req := plugins.AllocationRequest{CallID: callID}
	alloc := &plugins.Allocation{CallID: callID, PodName: "voice-agent-0", WSURL: "wss://edge.example.com/ws/pod/voice-agent-0/c.tok/agent/voice"}
	for _, mode := range []string{"say", "fallback"} {
		p := telnyx.New()
		if _, err := p.Configure(ctx, plugins.Settings{telnyx.SettingFailureMode: mode}); err != nil {
			t.Fatal(err)
		}
		for name, ar := range map[string]*plugins.AnswerRequest{
			"stream":       {Request: req, Allocation: alloc},
			"no_pods":      {Request: req, Failure: &plugins.Failure{Kind: plugins.FailureNoCapacity, Reason: plugins.ReasonNoPods, Message: "no pods available", Status: 503}},
			"call_ended":   {Request: req, Failure: &plugins.Failure{Kind: plugins.FailureNoCapacity, Reason: plugins.ReasonCallEnded, Message: "the call has ended", Status: 410}},
			"fallback_url": {Request: req, Failure: &plugins.Failure{Kind: plugins.FailureUnavailable, Reason: plugins.ReasonRedisUnavailable, Message: "pool state unavailable, retry", Status: 503, Fallback: true}},
		} {
			resp, err := p.Answer(ctx, ar)
			if err != nil {
				t.Fatal(err)
			}
			plugintest.Golden(t, name+"_"+mode, fmt.Appendf(nil, "HTTP %d\nContent-Type: %s\n\n%s", resp.Status, resp.ContentType, resp.Body))
		}
	}
	p := telnyx.New()
	if _, err := p.Configure(ctx, plugins.Settings{telnyx.SettingTrack: "both_tracks", telnyx.SettingBidirectionalMode: "mp3"}); err != nil {
		t.Fatal(err)
	}
	resp, err := p.Answer(ctx, &plugins.AnswerRequest{Request: req, Allocation: alloc})
	if err != nil {
		t.Fatal(err)
	}
	plugintest.Golden(t, "stream_both_tracks_mp3", resp.Body)
}
