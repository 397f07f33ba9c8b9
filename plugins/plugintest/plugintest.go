// Package plugintest is the conformance suite for provider plugins, in the
// manner of testing/fstest.TestFS: any provider runs it against its
// implementation, which is served and called through the real gRPC
// adapters of package plugins (go-plugin's TestPluginGRPCConn).
//
//	func TestConformance(t *testing.T) {
//		plugintest.Run(t, acme.New(), plugintest.Suite{Settings: ..., Valid: ..., Invalid: ...})
//	}
package plugintest

import (
	"bytes"
	"context"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-plugin"

	"github.com/edge-voice/edge/plugins"
)

// Suite describes what the provider under test must accept and refuse.
type Suite struct {
	// Settings configure the provider (with verification on, if it has any).
	Settings plugins.Settings
	// Valid are webhooks that must ask for an allocation of CallID.
	Valid []Valid
	// Invalid are webhooks that must be refused with Status (403 for a
	// forged signature, 400 for a missing call id, ...).
	Invalid []Invalid
	// ReportsNonces: the provider signs each delivery with a fresh nonce,
	// which the plugin reports (WebhookResult.Nonce) for edge to refuse a
	// replay on every replica. A Valid request's result must carry a
	// nonce, the same on a second delivery, and an Invalid one's none (a
	// forger must not spend nonces).
	ReportsNonces bool
	// BadSettings must be refused by the dry run (ValidateSettings) and by
	// Configure, each naming its key; the suite then checks that neither
	// changed the settings in force.
	BadSettings []BadSettings
	// FallbackAnswer, for a provider whose Description has
	// RendersFallback, checks its answer to a Failure with Fallback set.
	// nil: the answer must be an HTTP error (4xx or 5xx), on which
	// providers call the number's fallback URL; a provider whose documented
	// equivalent is another answer checks for that instead.
	FallbackAnswer func(*plugins.Response) error
	// StatusCallbacks are verified callbacks on the provider's declared
	// routes: each must be acknowledged (2xx, no allocation), the same on
	// a second delivery, and report the call ended (WebhookResult.Ended)
	// exactly when Event is set.
	StatusCallbacks []StatusCallback
	// StreamOpening are the text messages that open the provider's media
	// stream, in order and as the provider sends them, before the call's
	// audio (ReadStream reads a fixture of them). The provider's
	// Description.ResumeReplay must name their events, in their order:
	// edge checks a live stream's opening against it. nil: the provider
	// must declare no ResumeReplay. Every placeholder of the provider's
	// Description.ResumeNotice must find its value in them.
	StreamOpening []string
}

// StatusCallback is a status callback and what it must report.
type StatusCallback struct {
	Name    string
	Request *plugins.Request
	// CallID and Event are the call and event the callback must report
	// ended; Event "" for a callback that ends nothing.
	CallID, Event string
}

// BadSettings are settings the provider must refuse because of Key.
type BadSettings struct {
	Name     string
	Settings plugins.Settings
	Key      string
}

// Valid is a webhook that must be allocated.
type Valid struct {
	Name    string
	Request *plugins.Request
	CallID  string
}

// Invalid is a webhook that must be refused.
type Invalid struct {
	Name    string
	Request *plugins.Request
	Status  int
}

var nameRE = regexp.MustCompile(`^[a-z0-9_-]{1,32}$`)

// Connect serves impl through the real gRPC adapters and returns the
// host-side client; the connection closes with the test.
func Connect(t testing.TB, impl plugins.Provider) plugins.Provider {
	t.Helper()
	client, _ := plugin.TestPluginGRPCConn(t, false, plugins.PluginSet(impl))
	t.Cleanup(func() { client.Close() })
	p, err := plugins.Dispense(client)
	if err != nil {
		t.Fatalf("dispense: %v", err)
	}
	return p
}

// Run checks impl against the contract and s.
func Run(t *testing.T, impl plugins.Provider, s Suite) {
	p := Connect(t, impl)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	t.Run("describe", func(t *testing.T) {
		d, err := p.Describe(ctx)
		if err != nil {
			t.Fatalf("Describe: %v", err)
		}
		if !nameRE.MatchString(d.Name) {
			t.Errorf("name %q: want [a-z0-9_-], 1 to 32 bytes", d.Name)
		}
		seen := map[string]bool{}
		for _, r := range d.Routes {
			if r.Path == "" || strings.HasPrefix(r.Path, "/") || strings.Contains(r.Path, "..") {
				t.Errorf("route %q: want a relative path below /providers/%s/", r.Path, d.Name)
			}
			if seen[r.Method+" "+r.Path] {
				t.Errorf("route %s %s declared twice", r.Method, r.Path)
			}
			seen[r.Method+" "+r.Path] = true
		}
		checkResumeReplay(t, d.ResumeReplay, s.StreamOpening)
		checkResumeNotice(t, d.ResumeNotice, s.StreamOpening)
	})
	configured, err := p.Configure(ctx, s.Settings)
	if err != nil {
		t.Fatalf("Configure: %v", err)
	}
	// Before the webhooks: they show that what these subtests refused or
	// only dry-ran did not replace s.Settings.
	t.Run("settings", func(t *testing.T) { checkSettings(ctx, t, p, s, configured) })

	for _, v := range s.Valid {
		t.Run("valid/"+v.Name, func(t *testing.T) { checkValid(ctx, t, p, v, s.ReportsNonces) })
	}
	for _, inv := range s.Invalid {
		t.Run("invalid/"+inv.Name, func(t *testing.T) {
			res, err := p.Webhook(ctx, inv.Request)
			if err != nil {
				t.Fatalf("Webhook: %v (a refusal is an answer, not an error)", err)
			}
			if res.Allocate != nil || res.Answer == nil {
				t.Fatalf("got an allocation request %+v, want a %d answer", res.Allocate, inv.Status)
			}
			if res.Answer.Status != inv.Status {
				t.Errorf("status %d, want %d (body %s)", res.Answer.Status, inv.Status, res.Answer.Body)
			}
			if (inv.Status == http.StatusUnauthorized || inv.Status == http.StatusForbidden) && res.Nonce != "" {
				t.Errorf("a request refused for its credentials reports nonce %q: a forger could spend nonces", res.Nonce)
			}
			if res.Ended != nil {
				t.Errorf("a refused request reports call %q ended: only a verified callback may", res.Ended.CallID)
			}
		})
	}
	for _, c := range s.StatusCallbacks {
		t.Run("status/"+c.Name, func(t *testing.T) { checkStatusCallback(ctx, t, p, c) })
	}
	t.Run("failures", func(t *testing.T) { checkFailures(ctx, t, p) })
	t.Run("fallback", func(t *testing.T) { checkFallback(ctx, t, p, s.FallbackAnswer) })
	t.Run("garbage", func(t *testing.T) {
		for _, body := range [][]byte{nil, []byte("%zz"), []byte("{"), bytes.Repeat([]byte{0xff}, 64)} {
			res, err := p.Webhook(ctx, &plugins.Request{Route: plugins.RouteAllocate, Method: "POST", URL: "http://127.0.0.1/x", Body: body, Header: http.Header{}})
			if err != nil {
				t.Fatalf("Webhook(%q): %v", body, err)
			}
			if res.Allocate != nil {
				t.Errorf("Webhook(%q) asked for an allocation", body)
			}
		}
	})
}

// hostile values check the provider's escaping: real media URLs never hold
// these characters, but a provider must not rely on that.
var hostile = plugins.Allocation{
	CallID: "CA0123456789abcdef0123456789abcdef", PodName: "pod-0", SourcePool: "pool:gold",
	WSURL: `wss://edge.example/ws/pod/pod-0/a?b=1&c=<d>"e'`,
}

func checkValid(ctx context.Context, t *testing.T, p plugins.Provider, v Valid, reportsNonces bool) {
	res, err := p.Webhook(ctx, v.Request)
	if err != nil {
		t.Fatalf("Webhook: %v", err)
	}
	if res.Allocate == nil {
		body := ""
		if res.Answer != nil {
			body = string(res.Answer.Body)
		}
		t.Fatalf("no allocation request; answer %s", body)
	}
	if res.Allocate.CallID != v.CallID {
		t.Errorf("call id %q, want %q", res.Allocate.CallID, v.CallID)
	}
	if reportsNonces && res.Nonce == "" {
		t.Errorf("no nonce reported: edge could not refuse a replay")
	}
	again, err := p.Webhook(ctx, v.Request)
	switch {
	case err != nil:
		t.Errorf("a second delivery: %v", err)
	case again.Allocate == nil || again.Allocate.CallID != v.CallID:
		t.Errorf("a retry of the same webhook parsed differently: %+v", again)
	case again.Nonce != res.Nonce:
		t.Errorf("a second delivery reports nonce %q, the first %q", again.Nonce, res.Nonce)
	}
	a := hostile
	a.CallID = v.CallID
	want, err := p.Answer(ctx, &plugins.AnswerRequest{Request: *res.Allocate, Allocation: &a})
	if err != nil {
		t.Fatalf("Answer: %v", err)
	}
	if want.Status != http.StatusOK || want.ContentType == "" {
		t.Errorf("success answer: status %d, content type %q", want.Status, want.ContentType)
	}
	if bytes.Contains(want.Body, []byte("<d>")) {
		t.Errorf("success answer pastes the URL unescaped: %s", want.Body)
	}
	if res.Template != nil {
		got, err := res.Template.Render(a)
		if err != nil {
			t.Fatalf("template: %v", err)
		}
		if got.Status != want.Status || got.ContentType != want.ContentType || !bytes.Equal(got.Body, want.Body) {
			t.Errorf("template renders\n%d %s %s\nbut Answer gives\n%d %s %s", got.Status, got.ContentType, got.Body, want.Status, want.ContentType, want.Body)
		}
	}
}

func checkFailures(ctx context.Context, t *testing.T, p plugins.Provider) {
	for _, f := range []plugins.Failure{
		{Kind: plugins.FailureNoCapacity, Reason: plugins.ReasonNoPods, Message: "no pods available", Status: 503},
		{Kind: plugins.FailureNoCapacity, Reason: plugins.ReasonAllDraining, Message: "all pods are draining", Status: 503},
		{Kind: plugins.FailureNoCapacity, Reason: plugins.ReasonAtCapacity, Message: "all pods are busy", Status: 503},
		{Kind: plugins.FailureNoCapacity, Reason: plugins.ReasonMerchantAtCap, Message: "the merchant has reached its maximum of live calls", Status: 503},
		{Kind: plugins.FailureNoCapacity, Reason: plugins.ReasonRateLimited, Message: "too many new calls, retry later", Status: 429},
		{Kind: plugins.FailureNoCapacity, Reason: plugins.ReasonCallEnded, Message: "the call has ended", Status: 410},
		{Kind: plugins.FailureUnavailable, Reason: plugins.ReasonRedisUnavailable, Message: "pool state unavailable, retry", Status: 503},
		{Kind: plugins.FailureInvalidRequest, Message: `bad <id> & "x"`, Status: 400},
		{Kind: plugins.FailureInternal, Message: "internal error", Status: 500},
	} {
		resp, err := p.Answer(ctx, &plugins.AnswerRequest{Request: plugins.AllocationRequest{CallID: "CA0123456789abcdef0123456789abcdef"}, Failure: &f})
		if err != nil {
			t.Errorf("Answer(%v/%s): %v", f.Kind, f.Reason, err)
			continue
		}
		if resp.Status < 200 || resp.Status > 599 || resp.Status == http.StatusNoContent {
			t.Errorf("Answer(%v/%s): status %d", f.Kind, f.Reason, resp.Status)
		}
		if bytes.Contains(resp.Body, []byte("<id>")) {
			t.Errorf("Answer(%v): message pasted unescaped: %s", f.Kind, resp.Body)
		}
	}
}

// checkFallback asks a provider that renders Failure.Fallback for the
// answer to edge's own failure; one that does not is answered for by edge
// and never asked.
func checkFallback(ctx context.Context, t *testing.T, p plugins.Provider, check func(*plugins.Response) error) {
	d, err := p.Describe(ctx)
	if err != nil {
		t.Fatalf("Describe: %v", err)
	}
	if !d.RendersFallback {
		t.Skip("the provider does not render Failure.Fallback: edge answers those failures itself")
	}
	for _, f := range []plugins.Failure{
		{Kind: plugins.FailureUnavailable, Reason: plugins.ReasonRedisUnavailable, Message: "pool state unavailable, retry", Status: 503, Fallback: true},
		{Kind: plugins.FailureUnavailable, Reason: plugins.ReasonInternal, Message: "internal error", Status: 500, Fallback: true},
	} {
		resp, err := p.Answer(ctx, &plugins.AnswerRequest{Request: plugins.AllocationRequest{CallID: "CA0123456789abcdef0123456789abcdef"}, Failure: &f})
		if err != nil {
			t.Errorf("Answer(fallback %s): %v", f.Reason, err)
			continue
		}
		switch {
		case check != nil:
			if err := check(resp); err != nil {
				t.Errorf("Answer(fallback %s): %v", f.Reason, err)
			}
		case resp.Status < 400 || resp.Status > 599:
			t.Errorf("Answer(fallback %s): status %d, want an HTTP error so that the provider calls the fallback URL", f.Reason, resp.Status)
		}
	}
}

// eventRE is what edge keeps of an event on the call's record.
var eventRE = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,128}$`)

func checkStatusCallback(ctx context.Context, t *testing.T, p plugins.Provider, c StatusCallback) {
	d, err := p.Describe(ctx)
	if err != nil {
		t.Fatalf("Describe: %v", err)
	}
	declared := false
	for _, r := range d.Routes {
		declared = declared || (r.Path == c.Request.Route && (r.Method == "" || r.Method == c.Request.Method))
	}
	if !declared {
		t.Fatalf("%s %s is not a declared route: edge answers it 404", c.Request.Method, c.Request.Route)
	}
	for delivery := range 2 {
		res, err := p.Webhook(ctx, c.Request)
		if err != nil {
			t.Fatalf("Webhook (delivery %d): %v", delivery+1, err)
		}
		if res.Allocate != nil || res.Answer == nil || res.Answer.Status < 200 || res.Answer.Status > 299 {
			t.Fatalf("delivery %d: %+v, want a 2xx acknowledgement (a non-2xx makes the provider retry)", delivery+1, res)
		}
		switch {
		case c.Event == "" && res.Ended != nil:
			t.Errorf("delivery %d reports the call ended (%+v); want nothing ended", delivery+1, *res.Ended)
		case c.Event != "" && res.Ended == nil:
			t.Errorf("delivery %d reports no end; want %s of %s", delivery+1, c.Event, c.CallID)
		case c.Event != "" && (res.Ended.CallID != c.CallID || res.Ended.Event != c.Event):
			t.Errorf("delivery %d ended %+v; want %s of %s", delivery+1, *res.Ended, c.Event, c.CallID)
		case res.Ended != nil && !eventRE.MatchString(res.Ended.Event):
			t.Errorf("event %q: want [A-Za-z0-9_.-], 1 to 128 bytes (edge refuses others)", res.Ended.Event)
		}
	}
}
