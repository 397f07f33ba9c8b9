// Package allocatortest is what the tests of the allocator, and of the
// packages built on it, share: one set of tiers and one way to open an
// allocator on a test's Redis.
package allocatortest

import (
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/edge-voice/edge/allocator"
)

// Tiers is two exclusive tiers and a shared last resort, as in the seeds:
// gold (1 pod), standard (2) and basic (1 pod of 3 calls), chained in that
// order. Names keep only those tiers, in the chain's order (a test that
// counts where pods go names the tiers it counts).
func Tiers(names ...string) allocator.TierConfig {
	tc := allocator.TierConfig{
		Tiers: map[string]allocator.Tier{
			"gold":     {Type: allocator.Exclusive, Target: 1},
			"standard": {Type: allocator.Exclusive, Target: 2},
			"basic":    {Type: allocator.Shared, Target: 1, MaxConcurrent: 3},
		},
		DefaultChain: []string{"gold", "standard", "basic"},
	}
	if len(names) == 0 {
		return tc
	}
	tc.DefaultChain = slices.DeleteFunc(tc.DefaultChain, func(n string) bool { return !slices.Contains(names, n) })
	maps.DeleteFunc(tc.Tiers, func(n string, _ allocator.Tier) bool { return !slices.Contains(names, n) })
	return tc
}

// New opens an allocator on rdb with Tiers, a one-minute lease and the
// other settings at their defaults; each mutate changes the config first.
func New(tb testing.TB, rdb redis.UniversalClient, mutate ...func(*allocator.Config)) *allocator.Allocator {
	tb.Helper()
	cfg := allocator.Config{LeaseTTL: time.Minute, Tiers: Tiers()}
	for _, m := range mutate {
		m(&cfg)
	}
	a, err := allocator.New(rdb, cfg, nil)
	if err != nil {
		tb.Fatal(err)
	}
	return a
}
