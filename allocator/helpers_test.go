package allocator_test

import (
	"context"
	"testing"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/edge-voice/edge/allocator"
	"github.com/edge-voice/edge/internal/testredis"
)

// backend is a Redis the scripts must work on unchanged: a real redis-server,
// and miniredis (edge's embedded dev mode).
type backend struct {
	name string
	open func(t *testing.T) redis.UniversalClient
}

var backends = []backend{
	{"redis", func(t *testing.T) redis.UniversalClient { return testredis.Start(t).Client() }},
	{"miniredis", func(t *testing.T) redis.UniversalClient {
		m := miniredis.RunT(t)
		m.ClockTTL(true)
		c := redis.NewClient(&redis.Options{Addr: m.Addr()})
		t.Cleanup(func() { c.Close() })
		return c
	}},
}

// forEachBackend runs fn as a subtest on every backend.
func forEachBackend(t *testing.T, fn func(t *testing.T, rdb redis.UniversalClient)) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) { fn(t, b.open(t)) })
	}
}

// register puts pods in a tier, failing the test on error.
func register(t testing.TB, a *allocator.Allocator, tier string, pods ...string) {
	t.Helper()
	for _, p := range pods {
		if _, err := a.RegisterPod(context.Background(), allocator.Pod{Name: p, Tier: tier, Address: "127.0.0.1:8000"}); err != nil {
			t.Fatalf("register %s in %s: %v", p, tier, err)
		}
	}
}

func mustAllocate(t testing.TB, a *allocator.Allocator, call, merchant string) allocator.Allocation {
	t.Helper()
	al, err := a.Allocate(context.Background(), allocator.Request{CallID: call, MerchantID: merchant})
	if err != nil {
		t.Fatalf("allocate %s: %v", call, err)
	}
	return al
}
