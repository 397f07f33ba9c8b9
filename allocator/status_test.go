package allocator_test

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/redis/go-redis/v9"

	"github.com/edge-voice/edge/allocator"
	"github.com/edge-voice/edge/allocator/allocatortest"
)

func TestStatus(t *testing.T) {
	forEachBackend(t, func(t *testing.T, rdb redis.UniversalClient) {
		ctx := context.Background()
		a := allocatortest.New(t, rdb)
		register(t, a, "gold", "g0", "g1")
		register(t, a, "basic", "s0")
		register(t, a, "merchant:acme", "m0")
		if err := a.SetMerchantConfig(ctx, "acme", allocator.MerchantConfig{Pool: "acme"}); err != nil {
			t.Fatal(err)
		}
		mustAllocate(t, a, "CA1", "acme") // m0
		mustAllocate(t, a, "CA2", "")     // gold
		mustAllocate(t, a, "CA3", "")     // gold
		mustAllocate(t, a, "CA4", "")     // s0
		mustAllocate(t, a, "CA5", "")     // s0
		if _, err := a.Drain(ctx, "g0"); err != nil {
			t.Fatal(err)
		}
		got, err := a.Status(ctx)
		if err != nil {
			t.Fatal(err)
		}
		want := []allocator.PoolStatus{
			{Tier: "gold", Type: allocator.Exclusive, Assigned: 2, Available: 0, Draining: 1, Calls: 2},
			{Tier: "standard", Type: allocator.Exclusive},
			{Tier: "basic", Type: allocator.Shared, Assigned: 1, Available: 1, Calls: 2, Placement: allocator.Spread},
			{Tier: "merchant:acme", Type: allocator.Exclusive, Assigned: 1, Calls: 1},
		}
		if d := cmp.Diff(want, got); d != "" {
			t.Fatalf("status (-want +got):\n%s", d)
		}
		// Every script compiles and loads on this backend.
		if err := a.Preload(ctx); err != nil {
			t.Fatal(err)
		}
	})
}
