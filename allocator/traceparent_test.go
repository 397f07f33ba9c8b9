package allocator_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/edge-voice/edge/allocator"
	"github.com/edge-voice/edge/allocator/allocatortest"
)

// The webhook's traceparent rides the allocate the call already makes and
// comes back with the socket's claim; without one, nothing is written.
func TestTraceParentKeptWithTheCall(t *testing.T) {
	forEachBackend(t, func(t *testing.T, rdb redis.UniversalClient) {
		ctx := context.Background()
		a := allocatortest.New(t, rdb)
		register(t, a, "gold", "g0", "g1")
		const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
		al, err := a.Allocate(ctx, allocator.Request{CallID: "CA1", TraceParent: tp})
		if err != nil {
			t.Fatal(err)
		}
		at, got, err := a.ClaimMediaTraced(ctx, "CA1", al.PodName, "r/1")
		if err != nil || at != al.PodName || got != tp {
			t.Fatalf("claim = %q %q %v, want %q %q", at, got, err, al.PodName, tp)
		}

		plain := mustAllocate(t, a, "CA2", "")
		if _, got, err := a.ClaimMediaTraced(ctx, "CA2", plain.PodName, "r/2"); err != nil || got != "" {
			t.Fatalf("claim of a call allocated untraced = %q %v, want no traceparent", got, err)
		}
		keys := allocator.NewKeys("voice:")
		if v, err := rdb.HGet(ctx, keys.Call("CA1"), "traceparent").Result(); err != nil || v != tp {
			t.Fatalf("call CA1's traceparent field = %q %v (wrong key?)", v, err)
		}
		if n, err := rdb.HExists(ctx, keys.Call("CA2"), "traceparent").Result(); err != nil || n {
			t.Errorf("an untraced allocate wrote a traceparent field (%v)", err)
		}

		_, err = a.Allocate(ctx, allocator.Request{CallID: "CA3", TraceParent: strings.Repeat("0", allocator.MaxTraceParentLength+1)})
		if !errors.Is(err, allocator.ErrInvalidID) {
			t.Errorf("an oversized traceparent: %v, want ErrInvalidID", err)
		}
	})
}
