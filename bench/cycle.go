package bench

import (
	"context"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/edge-voice/edge/allocator"
)

// CycleAllocator is the allocator BenchmarkRedisCycle and
// bench/cmd/rediscycles drive: pools seeded as a deployment's (gold 40
// and standard 100 exclusive pods, basic 60 shared pods of 3 calls,
// default chain gold, standard, basic), its scripts loaded, and a replica
// as cmd/edge runs one: named (each call records the replica that
// answered it) and after its first 25 beats (25 s), so that it knows the
// data set's epoch and has looked through the ended TTL for marks of the
// layout before (none here).
func CycleAllocator(ctx context.Context, rdb redis.UniversalClient) (*allocator.Allocator, error) {
	a, err := allocator.New(rdb, allocator.Config{
		LeaseTTL: time.Minute, CallInfoTTL: time.Hour, DrainingTTL: 6 * time.Minute,
		Tiers: allocator.TierConfig{
			Tiers: map[string]allocator.Tier{
				"gold":     {Type: allocator.Exclusive, Target: 40},
				"standard": {Type: allocator.Exclusive, Target: 100},
				"basic":    {Type: allocator.Shared, Target: 60, MaxConcurrent: 3},
			},
			DefaultChain: []string{"gold", "standard", "basic"},
		},
	}, nil)
	if err != nil {
		return nil, err
	}
	for tier, n := range map[string]int{"gold": 40, "standard": 100, "basic": 60} {
		for i := range n {
			pod := allocator.Pod{Name: tier + "-" + strconv.Itoa(i), Tier: tier, Address: "127.0.0.1:9"}
			if _, err := a.RegisterPod(ctx, pod); err != nil {
				return nil, err
			}
		}
	}
	if err := a.Preload(ctx); err != nil {
		return nil, err
	}
	a.SetReplica("bench")
	for range 25 {
		if _, err := a.Heartbeat(ctx, "bench"); err != nil {
			return nil, err
		}
	}
	return a, nil
}

// Cycle is one call's allocate, with a merchant and under a 5 s deadline,
// then its release.
func Cycle(ctx context.Context, a *allocator.Allocator, call string) error {
	actx, cancel := context.WithTimeout(ctx, 5*time.Second)
	_, err := a.Allocate(actx, allocator.Request{CallID: call, MerchantID: "acme", Creator: "token:bench"})
	cancel()
	if err != nil {
		return err
	}
	_, err = a.Release(ctx, call)
	return err
}
