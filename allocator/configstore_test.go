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

// A tier with pods cannot flip between exclusive and shared: its pool's
// Redis type would contradict every script. An empty tier can.
func TestStoreTierConfigRefusesTypeChangeWithPods(t *testing.T) {
	forEachBackend(t, func(t *testing.T, rdb redis.UniversalClient) {
		ctx := context.Background()
		a := allocatortest.New(t, rdb)
		if _, _, err := a.BootstrapTierConfig(ctx, allocatortest.Tiers()); err != nil {
			t.Fatal(err)
		}
		register(t, a, "gold", "g0")
		flip := allocatortest.Tiers()
		flip.Tiers["gold"] = allocator.Tier{Type: allocator.Shared, Target: 1, MaxConcurrent: 2}
		err := a.StoreTierConfig(ctx, flip)
		if !errors.Is(err, allocator.ErrInvalidConfig) || !strings.Contains(err.Error(), "tiers.gold.type") {
			t.Fatalf("flipping gold with a pod: err = %v", err)
		}
		stored, _ := a.LoadTierConfig(ctx)
		if stored.Tiers["gold"].Type != allocator.Exclusive {
			t.Fatal("the refused config was stored")
		}
		empty := allocatortest.Tiers()
		empty.Tiers["standard"] = allocator.Tier{Type: allocator.Shared, Target: 1, MaxConcurrent: 2}
		if err := a.StoreTierConfig(ctx, empty); err != nil {
			t.Fatalf("flipping the empty standard tier: %v", err)
		}
	})
}
