package providers_test

import (
	"context"
	"net/url"
	"strings"
	"testing"

	"github.com/edge-voice/edge/allocator"
	"github.com/edge-voice/edge/plugins"
	"github.com/edge-voice/edge/providers"
)

// fallbackEnv runs the three built-in providers as real plugin processes
// over one exclusive pod: Twilio verifies signatures, Plivo and Exotel run
// open (their signing is tested elsewhere).
func fallbackEnv(t *testing.T) *env {
	t.Helper()
	e := newEnv(t, spec("twilio", plugins.Settings{"auth_tokens": twilioToken}), spec("plivo", nil), spec("exotel", nil))
	e.register(t, "gold", "voice-agent-0")
	return e
}

// webhook is one provider's allocate webhook for a call id of its form.
type webhook struct {
	provider string
	send     func(t *testing.T, e *env, n int) answer
}

var webhooks = []webhook{
	{"twilio", func(t *testing.T, e *env, n int) answer {
		return signedTwilio(t, e, callSid("CA", n))
	}},
	{"plivo", func(t *testing.T, e *env, n int) answer {
		form := url.Values{"CallUUID": {plivoUUID(n)}, "From": {"+15550100"}}
		return e.do(t, "POST", "/api/v1/plivo/allocate?merchant_id=acme", form.Encode())
	}},
	{"exotel", func(t *testing.T, e *env, n int) answer {
		return e.do(t, "GET", "/providers/exotel/voicebot?merchant_id=acme&CallSid="+callSid("ex", n), "")
	}},
}

func callSid(prefix string, n int) string {
	s := "0000000000000000000000000000000" + string(rune('0'+n/10)) + string(rune('0'+n%10))
	return prefix + s[len(s)-32:]
}

func plivoUUID(n int) string {
	return "00000000-0000-4000-8000-0000000000" + string(rune('0'+n/10)) + string(rune('0'+n%10))
}

// markup reports whether a is the provider's own failure answer: TwiML or
// Plivo XML that hangs up (HTTP 200), Exotel's JSON failure with its code.
func markup(provider string, a answer, code string) bool {
	switch provider {
	case "exotel":
		return strings.Contains(a.body, `"code":"`+code+`"`)
	default:
		return a.status == 200 && strings.Contains(a.body, "<Hangup") && !strings.Contains(a.body, "<Stream")
	}
}

// A refusal about the call itself (every pod busy, the merchant at its
// cap, over its rate) keeps the provider's markup: the caller hears a
// hangup, and the number's fallback URL is not asked to take a call that
// edge refused on purpose.
func TestRefusalsAboutTheCallKeepTheProviderMarkup(t *testing.T) {
	e := fallbackEnv(t)
	ctx := context.Background()
	if got := signedTwilio(t, e, callSid("CA", 1)); got.status != 200 || !strings.Contains(got.body, "<Stream") {
		t.Fatalf("first call: %+v", got)
	}
	for _, w := range webhooks {
		if got := w.send(t, e, 2); !markup(w.provider, got, "at_capacity") {
			t.Errorf("%s at capacity: %+v, want its failure markup", w.provider, got)
		}
	}

	// acme's chain is empty of free pods either way: a cap of 1 with one
	// live call refuses for the cap before capacity is looked at.
	one := 1
	if err := e.alloc.SetMerchantConfig(ctx, "acme", allocator.MerchantConfig{MaxCalls: &one}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.alloc.Release(ctx, callSid("CA", 1)); err != nil {
		t.Fatal(err)
	}
	if got := signedTwilio(t, e, callSid("CA", 3)); got.status != 200 || !strings.Contains(got.body, "<Stream") {
		t.Fatalf("call under the cap: %+v", got)
	}
	for _, w := range webhooks {
		if got := w.send(t, e, 4); !markup(w.provider, got, "merchant_at_cap") {
			t.Errorf("%s merchant at cap: %+v, want its failure markup", w.provider, got)
		}
	}

	if err := e.alloc.SetMerchantConfig(ctx, "acme", allocator.MerchantConfig{}); err != nil {
		t.Fatal(err)
	}
	cfg := e.alloc.Config()
	cfg.Admission.Rate = allocator.RateConfig{MerchantPerSecond: 0.001, MerchantBurst: 1}
	e.alloc.Apply(cfg)
	signedTwilio(t, e, callSid("CA", 5)) // takes the burst (at capacity: the pod is CA..03's)
	for _, w := range webhooks {
		if got := w.send(t, e, 6); !markup(w.provider, got, "rate_limited") {
			t.Errorf("%s rate limited: %+v, want its failure markup", w.provider, got)
		}
	}
}

// A replayed webhook of an ended call (the README's curl, repeated) gets a
// hangup that says the call has ended, not that no agent is available
// while every pod is free, and edge logs it at info as a replay (the first
// of a quiet period whole, the rest counted like refusals).
func TestReplayOfAnEndedCallSaysItEnded(t *testing.T) {
	e := fallbackEnv(t)
	ctx := context.Background()
	for i, w := range webhooks[:2] {
		first := w.send(t, e, 10+i)
		if first.status != 200 || !strings.Contains(first.body, "<Stream") {
			t.Fatalf("%s first webhook: %+v", w.provider, first)
		}
		id := callSid("CA", 10+i)
		if w.provider == "plivo" {
			id = plivoUUID(10 + i)
		}
		if _, err := e.alloc.Release(ctx, id); err != nil {
			t.Fatal(err)
		}
		replay := w.send(t, e, 10+i)
		if replay.status != 200 || !strings.Contains(replay.body, "<Hangup") || strings.Contains(replay.body, "<Stream") {
			t.Errorf("%s replay: %+v, want a hangup", w.provider, replay)
		}
		if strings.Contains(strings.ToLower(replay.body), "no agent") || !strings.Contains(strings.ToLower(replay.body), "call has ended") {
			t.Errorf("%s replay says %q; want words that the call has ended", w.provider, replay.body)
		}
		if i == 0 {
			e.logs.waitFor(t, "INFO", "replay of an ended call", "reason=call_ended", "call_sid="+id, "provider="+w.provider)
		}
	}
	e.logs.mu.Lock()
	defer e.logs.mu.Unlock()
	for _, line := range e.logs.lines {
		if strings.Contains(line, "call_ended") && !strings.HasPrefix(line, "INFO") {
			t.Errorf("a replay logged above info: %s", line)
		}
	}
}

// When edge cannot serve for reasons of its own (here Redis is gone), every
// provider is answered with a non-2xx status, the answer on which Twilio,
// Plivo and Exotel call the number's fallback URL (a second edge cluster),
// instead of HTTP 200 and a spoken "no agent is available".
func TestRedisDownAnswersForTheFallbackURL(t *testing.T) {
	e := fallbackEnv(t)
	e.redis.Stop()
	for i, w := range webhooks {
		got := w.send(t, e, 20+i)
		if got.status != 503 {
			t.Errorf("%s with Redis down: %+v, want 503", w.provider, got)
		}
		if strings.Contains(got.body, "<Say") || strings.Contains(got.body, "<Speak") {
			t.Errorf("%s with Redis down speaks to the caller: %s", w.provider, got.body)
		}
	}
}

// providers.unavailable_answer: markup keeps today's answers for numbers
// without a fallback URL (a spoken hangup for Twilio and Plivo; Exotel has
// no 2xx failure form), and a provider's own setting overrides it. Both
// apply on a reload, to the next webhook.
func TestUnavailableAnswerMarkup(t *testing.T) {
	e := fallbackEnv(t)
	e.redis.Stop()
	cfg := *e.cfg.Load()
	cfg.UnavailableAnswer = providers.UnavailableMarkup
	e.cfg.Store(&cfg)
	for i, w := range webhooks {
		got := w.send(t, e, 30+i)
		switch w.provider {
		case "exotel":
			if got.status != 503 || !strings.Contains(got.body, `"code":"redis_unavailable"`) {
				t.Errorf("exotel, markup: %+v, want its 503 JSON failure", got)
			}
		default:
			if got.status != 200 || !strings.Contains(got.body, "<Hangup") {
				t.Errorf("%s, markup: %+v, want a hangup", w.provider, got)
			}
		}
	}

	cfg.Plugins = map[string]providers.Plugin{"twilio": {UnavailableAnswer: providers.UnavailableFallback}}
	e.cfg.Store(&cfg)
	if got := webhooks[0].send(t, e, 33); got.status != 503 {
		t.Errorf("twilio with its own fallback setting: %+v, want 503", got)
	}
	if got := webhooks[1].send(t, e, 34); got.status != 200 {
		t.Errorf("plivo under the providers' markup: %+v, want 200", got)
	}
	if n := metric(t, e, "edge_provider_webhooks_total", "provider", "twilio", "outcome", "redis_unavailable"); n != 2 {
		t.Errorf("twilio redis_unavailable outcomes = %v, want 2", n)
	}
}

// A plugin built before Failure.Fallback does not say it renders it; edge
// answers for it (503, without asking it), and asks it for its markup only
// when the operator chose markup.
func TestRedisDownWithAPluginThatDoesNotRenderFallback(t *testing.T) {
	e := newEnv(t, spec("testprov", nil))
	e.redis.Stop()
	got := e.do(t, "POST", "/api/v1/testprov/allocate", "call=CA-old-1")
	if got.status != 503 || !strings.Contains(got.body, `"code":"redis_unavailable"`) {
		t.Errorf("fallback for an older plugin: %+v, want edge's own 503", got)
	}
	if n := metric(t, e, "edge_plugin_rpc_duration_seconds", "plugin", "testprov", "method", "Answer"); n != 0 {
		t.Errorf("the plugin was asked to answer (%v Answer RPCs)", n)
	}
	cfg := *e.cfg.Load()
	cfg.UnavailableAnswer = providers.UnavailableMarkup
	e.cfg.Store(&cfg)
	got = e.do(t, "POST", "/api/v1/testprov/allocate", "call=CA-old-2")
	if !strings.Contains(got.body, `"reason":"redis_unavailable"`) {
		t.Errorf("markup for an older plugin: %+v, want the plugin's own answer", got)
	}
}
