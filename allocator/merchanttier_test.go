package allocator_test

import (
	"context"
	"errors"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/edge-voice/edge/allocator"
	"github.com/edge-voice/edge/allocator/allocatortest"
)

// A merchant's tier was accepted by the admin API and ignored by
// allocation: every call went down the default chain while pods of the
// merchant's tier sat idle. The tier now leads the merchant's chain (after
// its dedicated pool, before the default chain); a tier that does not
// exist, or that its fallback (the whole chain when set) leaves out, is
// refused when the config is written.
func TestMerchantTierLeadsItsChain(t *testing.T) {
	forEachBackend(t, func(t *testing.T, rdb redis.UniversalClient) {
		ctx := context.Background()
		a := allocatortest.New(t, rdb)
		register(t, a, "gold", "g0")
		register(t, a, "standard", "s0")
		if err := a.SetMerchantConfig(ctx, "acme", allocator.MerchantConfig{Tier: "standard"}); err != nil {
			t.Fatal(err)
		}
		al, err := a.Allocate(ctx, allocator.Request{CallID: "CA-tier-1", MerchantID: "acme"})
		if err != nil || al.PodName != "s0" {
			t.Fatalf("acme (tier standard) got %+v, %v; want s0 of its tier while gold's g0 is free", al, err)
		}
		// Its tier full, it falls back down the default chain.
		al, err = a.Allocate(ctx, allocator.Request{CallID: "CA-tier-2", MerchantID: "acme"})
		if err != nil || al.PodName != "g0" {
			t.Fatalf("acme's second call got %+v, %v; want g0 from the default chain", al, err)
		}
		err = a.SetMerchantConfig(ctx, "acme", allocator.MerchantConfig{Tier: "platinum"})
		if !errors.Is(err, allocator.ErrInvalidConfig) {
			t.Fatalf("a tier that does not exist: %v, want ErrInvalidConfig", err)
		}
		err = a.SetMerchantConfig(ctx, "acme", allocator.MerchantConfig{Tier: "gold", Fallback: []string{"standard"}})
		if !errors.Is(err, allocator.ErrInvalidConfig) {
			t.Fatalf("a tier its fallback leaves out: %v, want ErrInvalidConfig", err)
		}
		if err := a.SetMerchantConfig(ctx, "acme", allocator.MerchantConfig{Tier: "gold", Fallback: []string{"standard", "gold"}}); err != nil {
			t.Fatalf("a tier in its fallback: %v", err)
		}
	})
}
