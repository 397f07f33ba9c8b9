package calls_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/edge-voice/edge/allocator"
	"github.com/edge-voice/edge/calls"
	"github.com/edge-voice/edge/internal/testredis"
	"github.com/edge-voice/edge/proxy/mediaurl"
)

type env struct {
	rdb    *redis.Client
	alloc  *allocator.Allocator
	signer *mediaurl.Signer
	svc    *calls.Service
	logs   *bytes.Buffer
}

func newEnv(t *testing.T) *env {
	t.Helper()
	rdb := testredis.Start(t).Client()
	alloc, err := allocator.New(rdb, allocator.Config{Tiers: allocator.TierConfig{
		Tiers:        map[string]allocator.Tier{"gold": {Type: allocator.Exclusive, Target: 1}},
		DefaultChain: []string{"gold"},
	}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := alloc.SyncPods(context.Background(), "", []allocator.PodState{{Name: "agent-0", Address: "127.0.0.1:1", Tier: "gold", Ready: true}}); err != nil {
		t.Fatal(err)
	}
	e := &env{rdb: rdb, alloc: alloc, signer: mediaurl.NewSigner([]byte("secret"), time.Minute), logs: &bytes.Buffer{}}
	e.svc = calls.NewService(alloc, e.signer, func() string { return "wss://edge.example.com/" }, slog.New(slog.NewTextHandler(e.logs, nil)))
	return e
}

func TestAllocateMintsAMediaURLTheProxyAccepts(t *testing.T) {
	e := newEnv(t)
	c, err := e.svc.Allocate(context.Background(), calls.Request{CallID: "CA1", Provider: "plivo", Flow: "v1", Template: "survey"})
	if err != nil {
		t.Fatal(err)
	}
	prefix := "wss://edge.example.com/ws/pod/agent-0/"
	rest, ok := strings.CutPrefix(c.WSURL, prefix)
	token, path, _ := strings.Cut(rest, "/")
	if !ok || path != "agent/voice/breeze-buddy/plivo/callback/survey" {
		t.Fatalf("media URL %q: want %s<token>/agent/voice/breeze-buddy/plivo/callback/survey", c.WSURL, prefix)
	}
	if id, err := e.signer.Verify(token, "agent-0", "/"+path); err != nil || id != "CA1" {
		t.Fatalf("token of %q: call %q, %v; want CA1", c.WSURL, id, err)
	}
	again, err := e.svc.Allocate(context.Background(), calls.Request{CallID: "CA1"})
	if err != nil || !again.WasExisting || again.Pod != "agent-0" || !strings.HasSuffix(again.WSURL, "/order-confirmation/v2") {
		t.Fatalf("retry: %+v, %v", again, err)
	}
}

// A bad merchant config is logged by the service, so the webhook path and
// the generic API both report it (the webhook path used to drop it).
func TestAllocationWarningIsLogged(t *testing.T) {
	e := newEnv(t)
	if err := e.rdb.HSet(context.Background(), e.alloc.Keys().MerchantConfig(), "acme", "{not json").Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := e.svc.Allocate(context.Background(), calls.Request{CallID: "CA2", MerchantID: "acme"}); err != nil {
		t.Fatal(err)
	}
	if log := e.logs.String(); !strings.Contains(log, "allocation warning") || !strings.Contains(log, "merchant_id=acme") {
		t.Fatalf("log has no warning for acme's bad config:\n%s", log)
	}
}

func TestFailureOfEveryOutcome(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	_, invalid := e.svc.Allocate(ctx, calls.Request{CallID: "bad id"})
	if _, err := e.svc.Allocate(ctx, calls.Request{CallID: "CA3"}); err != nil {
		t.Fatal(err)
	}
	_, noCapacity := e.svc.Allocate(ctx, calls.Request{CallID: "CA4"})
	_, notFound := e.svc.Release(ctx, "CA-none")
	tests := map[string]struct {
		err  error
		want calls.Failure
	}{
		"invalid id":  {invalid, calls.Failure{Kind: calls.KindInvalid, Status: http.StatusBadRequest, Code: "invalid_request"}},
		"no capacity": {noCapacity, calls.Failure{Kind: calls.KindNoCapacity, Status: http.StatusServiceUnavailable, Code: "at_capacity", Message: "all pods are busy"}},
		"not found":   {notFound, calls.Failure{Kind: calls.KindNotFound, Status: http.StatusNotFound, Code: "call_not_found", Message: "call not found"}},
		"redis down":  {allocator.ErrUnavailable, calls.Failure{Kind: calls.KindUnavailable, Status: http.StatusServiceUnavailable, Code: "redis_unavailable", Message: "pool state unavailable, retry"}},
		"unknown":     {errors.New("boom"), calls.Failure{Kind: calls.KindInternal, Status: http.StatusInternalServerError, Code: "internal", Message: "internal error"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := calls.FailureOf(tc.err)
			if tc.want.Message == "" {
				tc.want.Message = got.Message // the validation text names the field
			}
			if got != tc.want {
				t.Fatalf("FailureOf(%v) = %+v, want %+v", tc.err, got, tc.want)
			}
		})
	}
}

// A live call's media URL goes only to its creator: a stranger who posted
// its call id got the URL and connected first.
func TestRepeatAnswersOnlyTheCreator(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	first, err := e.svc.Allocate(ctx, calls.Request{CallID: "CA5", Creator: "provider:twilio"})
	if err != nil {
		t.Fatal(err)
	}
	retry, err := e.svc.Allocate(ctx, calls.Request{CallID: "CA5", Creator: "provider:twilio"})
	if err != nil || !retry.WasExisting || retry.Pod != first.Pod {
		t.Fatalf("the creator's retry: %+v, %v", retry, err)
	}
	stranger, err := e.svc.Allocate(ctx, calls.Request{CallID: "CA5", Creator: "token:crm"})
	if f := calls.FailureOf(err); f.Status != http.StatusConflict || f.Code != "call_exists" || stranger.WSURL != "" {
		t.Fatalf("a stranger's repeat: %+v, %v (%+v); want 409 call_exists and no URL", stranger, err, f)
	}
}

// An ended call stays ended: a replayed request gets call_ended, no pod.
func TestEndedCallIsRefused(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	if _, err := e.svc.Allocate(ctx, calls.Request{CallID: "CA6", Creator: "provider:twilio"}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.svc.Release(ctx, "CA6"); err != nil {
		t.Fatal(err)
	}
	_, err := e.svc.Allocate(ctx, calls.Request{CallID: "CA6", Creator: "provider:twilio"})
	if f := calls.FailureOf(err); f.Kind != calls.KindEnded || f.Code != "call_ended" {
		t.Fatalf("replay after release: %v (%+v), want call_ended", err, f)
	}
	// A replay is no trouble of edge's: info, named as what it is.
	if log := e.logs.String(); !strings.Contains(log, `level=INFO msg="replay of an ended call refused" reason=call_ended call_sid=CA6`) {
		t.Errorf("the replay is not logged at info as a replay:\n%s", log)
	}
}

// A call leaves one line at info when it is answered and one when its
// agent releases it, each naming the call, its merchant, pod and, for a
// provider's call, the provider that created it (as the media socket's
// lines do). A generic-API call names none, whatever agent path it asked
// for: its body's provider is the path's segment, not who called.
func TestCallThreadIsLoggedAtInfo(t *testing.T) {
	for _, tc := range []struct {
		creator, provider, named string
	}{
		{"provider:twilio", "twilio", " provider=twilio"},
		{"token:ops", "twilio", ""},
		{"token:ops", "exotel", ""},
	} {
		e := newEnv(t)
		if _, err := e.svc.Allocate(context.Background(), calls.Request{CallID: "CA9", MerchantID: "acme", Provider: tc.provider, Creator: tc.creator}); err != nil {
			t.Fatal(err)
		}
		if _, err := e.svc.Release(context.Background(), "CA9"); err != nil {
			t.Fatal(err)
		}
		log := e.logs.String()
		for _, want := range []string{
			`msg="call allocated" call_sid=CA9 merchant_id=acme` + tc.named + ` pod=agent-0`,
			`msg="call released" call_sid=CA9 merchant_id=acme` + tc.named + ` pod=agent-0 by=agent returned_to_pool=true`,
		} {
			if !strings.Contains(log, want) {
				t.Errorf("%s asking for %s: log lacks %s:\n%s", tc.creator, tc.provider, want, log)
			}
		}
		if n := strings.Count(log, "level=INFO"); n != 2 {
			t.Errorf("%d info lines for one call, want 2:\n%s", n, log)
		}
	}
}

// A call that waited for capacity (admission.wait) is answered like any
// other, and its answered line says how long it waited.
func TestWaitedCallIsAnsweredAndLogged(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	cfg := e.alloc.Config()
	cfg.Admission.Wait.Budget = 5 * time.Second
	e.alloc.Apply(cfg)
	wctx, stop := context.WithCancel(ctx)
	waker := e.alloc.Waker()
	done := make(chan struct{})
	go func() { waker.Run(wctx); close(done) }()
	defer func() { stop(); <-done }()
	<-waker.Started()

	if _, err := e.svc.Allocate(ctx, calls.Request{CallID: "CA10", Creator: "provider:twilio"}); err != nil {
		t.Fatal(err)
	}
	waited := make(chan error, 1)
	var second calls.Call
	go func() {
		var err error
		second, err = e.svc.Allocate(ctx, calls.Request{CallID: "CA11", Creator: "provider:twilio"})
		waited <- err
	}()
	for e.rdb.ZCard(ctx, e.alloc.Keys().WaitDeadline()).Val() != 1 {
		time.Sleep(time.Millisecond) // CA11's allocate queues it
	}
	if _, err := e.svc.Release(ctx, "CA10"); err != nil {
		t.Fatal(err)
	}
	if err := <-waited; err != nil || second.Pod != "agent-0" || second.WSURL == "" || second.WasExisting {
		t.Fatalf("waiting call: %+v, %v", second, err)
	}
	if log := e.logs.String(); !strings.Contains(log, `msg="call allocated" call_sid=CA11`) || !strings.Contains(log, "waited_ms=") {
		t.Errorf("the waited call's answered line lacks waited_ms:\n%s", log)
	}
}

// The line between edge's own failures (the provider is sent to the
// number's fallback URL) and refusals about the call (its markup).
func TestEdgeFault(t *testing.T) {
	for name, tc := range map[string]struct {
		err  error
		want bool
	}{
		"redis down":      {fmt.Errorf("allocate CA1: %w", allocator.ErrUnavailable), true},
		"backend timeout": {context.DeadlineExceeded, true},
		"shutting down":   {calls.ErrShuttingDown, true},
		"internal":        {errors.New("boom"), true},
		"at capacity":     {&allocator.NoCapacityError{Reason: allocator.ReasonAtCapacity}, false},
		"no pods":         {&allocator.NoCapacityError{Reason: allocator.ReasonNoPods}, true},
		"all draining":    {&allocator.NoCapacityError{Reason: allocator.ReasonAllDraining}, true},
		"merchant at cap": {&allocator.NoCapacityError{Reason: allocator.ReasonMerchantAtCap}, false},
		"rate limited":    {&allocator.RateLimitedError{RetryAfter: time.Second}, false},
		"call ended":      {allocator.ErrCallEnded, false},
		"invalid":         {allocator.ErrInvalidID, false},
		"another's call":  {calls.ErrCallExists, false},
	} {
		t.Run(name, func(t *testing.T) {
			if got := calls.FailureOf(tc.err).EdgeFault(); got != tc.want {
				t.Errorf("FailureOf(%v).EdgeFault() = %v, want %v", tc.err, got, tc.want)
			}
		})
	}
}

// "call released" by an agent named the pod but not the call's merchant or
// provider: every line of a call's thread now carries both (the provider
// from the call's creator, the one that allocated it).
func TestReleaseLineNamesMerchantAndProvider(t *testing.T) {
	e := newEnv(t)
	if _, err := e.svc.Allocate(context.Background(), calls.Request{CallID: "CA10", MerchantID: "acme", Provider: "twilio", Creator: "provider:twilio"}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.svc.Release(context.Background(), "CA10"); err != nil {
		t.Fatal(err)
	}
	want := `msg="call released" call_sid=CA10 merchant_id=acme provider=twilio pod=agent-0 by=agent`
	if log := e.logs.String(); !strings.Contains(log, want) {
		t.Fatalf("log lacks %s:\n%s", want, log)
	}
}

// The request's access log line names the call the request allocated or
// released: Service notes it on the request's context.
func TestServiceNotesTheCallOnTheRequest(t *testing.T) {
	e := newEnv(t)
	ctx, note := calls.WithRequestNote(context.Background())
	if _, err := e.svc.Allocate(ctx, calls.Request{CallID: "CA11"}); err != nil {
		t.Fatal(err)
	}
	if note.CallID() != "CA11" {
		t.Fatalf("allocate noted %q, want CA11", note.CallID())
	}
	ctx, note = calls.WithRequestNote(context.Background())
	e.svc.Release(ctx, "CA11")
	if note.CallID() != "CA11" {
		t.Fatalf("release noted %q, want CA11", note.CallID())
	}
}
