package providers_test

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/edge-voice/edge/allocator"
)

// A status callback whose plugin reports the call ended releases a call
// whose media socket never opened at once, on either route of the plugin;
// a duplicate, an unknown call or a refused callback changes nothing and
// the provider is answered as the plugin says (2xx: it does not retry).
func TestStatusCallbackEndsTheCall(t *testing.T) {
	e := newEnv(t, spec("testprov", nil))
	e.register(t, "gold", "g-end")
	ctx := context.Background()
	k := e.alloc.Keys()

	if got := e.do(t, "POST", "/api/v1/testprov/allocate", "call=CA-tp-end"); got.status != 200 {
		t.Fatalf("allocate: %+v", got)
	}
	if e.rdb.SIsMember(ctx, k.PoolAvailable("gold"), "g-end").Val() {
		t.Fatal("g-end still in its pool after the allocation")
	}
	before := e.snapshot(t)
	if got := e.do(t, "POST", "/api/v1/testprov/status", "forged-end=CA-tp-end"); got.status != 403 {
		t.Errorf("refused callback: %+v", got)
	}
	if diff := cmp.Diff(before, e.snapshot(t)); diff != "" {
		t.Errorf("a refused callback changed Redis:\n%s", diff)
	}

	if got := e.do(t, "POST", "/api/v1/testprov/status", "end=CA-tp-end:completed"); got.status != 204 {
		t.Fatalf("status callback: %+v", got)
	}
	if !e.rdb.SIsMember(ctx, k.PoolAvailable("gold"), "g-end").Val() {
		t.Error("g-end is not back in its pool after the callback")
	}
	tl, err := e.alloc.Timeline(ctx, "CA-tp-end")
	if err != nil || tl.State != "ended" || tl.ReleasedBy != allocator.ReleasedByProvider || tl.EndedBy != "provider:completed" {
		t.Errorf("timeline = %+v, %v", tl, err)
	}
	e.logs.waitFor(t, "call released", "call_sid=CA-tp-end", "by=provider", "event=completed")
	if n := metric(t, e, "edge_provider_webhooks_total", "provider", "testprov", "outcome", "ended"); n != 1 {
		t.Errorf("ended outcomes = %v, want 1", n)
	}

	// A duplicate (on the plugin's other route), an unknown call and an id
	// unfit for a key: acknowledged, nothing changed.
	before = e.snapshot(t)
	for _, body := range []string{"end=CA-tp-end:completed", "end=CA-unknown:completed", "end=bad id:completed"} {
		if got := e.do(t, "POST", "/providers/testprov/status", body); got.status != 204 {
			t.Errorf("%s: %+v", body, got)
		}
	}
	if diff := cmp.Diff(before, e.snapshot(t)); diff != "" {
		t.Errorf("a duplicate or unknown callback changed Redis:\n%s", diff)
	}
	if n := metric(t, e, "edge_provider_webhooks_total", "provider", "testprov", "outcome", "answered"); n != 3 {
		t.Errorf("answered outcomes = %v, want 3", n)
	}
	// A replayed allocation webhook of the ended call gets no pod.
	if got := e.do(t, "POST", "/api/v1/testprov/allocate", "call=CA-tp-end"); got.status == 200 {
		t.Errorf("replayed webhook: %+v", got)
	}
	// Undeclared routes stay 404 on both paths.
	for _, path := range []string{"/api/v1/testprov/hangup", "/providers/testprov/hangup"} {
		if got := e.do(t, "POST", path, "end=CA-x:completed"); got.status != 404 {
			t.Errorf("%s: %+v", path, got)
		}
	}
}

// A callback that finds Redis not answering is answered 503 with
// Retry-After, so that the provider sends it again.
func TestStatusCallbackWithoutRedisAsksForARetry(t *testing.T) {
	e := newEnv(t, spec("testprov", nil))
	e.redis.Stop()
	got := e.do(t, "POST", "/api/v1/testprov/status", "end=CA-tp-down:completed")
	if got.status != 503 {
		t.Errorf("status callback without Redis: %+v, want 503", got)
	}
}

// The allocate route keeps its methods: another one is 405, not a plugin
// route named "allocate".
func TestAllocateRouteRefusesOtherMethods(t *testing.T) {
	e := newEnv(t, spec("testprov", nil))
	for _, m := range []string{"PUT", "DELETE"} {
		if got := e.do(t, m, "/api/v1/testprov/allocate", "call=CA-put"); got.status != 405 {
			t.Errorf("%s allocate: %+v, want 405", m, got)
		}
	}
}
