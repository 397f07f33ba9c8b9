package allocator_test

import (
	"context"
	"testing"

	"github.com/edge-voice/edge/allocator"
	"github.com/edge-voice/edge/allocator/allocatortest"
	"github.com/edge-voice/edge/internal/testredis"
)

// A tier that only the tier config declares (not in
// default_chain, not in any merchant's fallback) is a merchant's dedicated
// pool, as the predecessor's tier assigner filled it: new pods go to
// voice:merchant:<tier>:assigned and :pods first, with pod tier
// "merchant:<tier>", and the merchant whose config names the pool gets them.
// A tier a merchant's fallback names stays an ordinary tier.
func TestTierConfigMerchantTiersAreFilledAsMerchantPools(t *testing.T) {
	ctx := context.Background()
	rdb := testredis.Start(t).Client()
	a := allocatortest.New(t, rdb, func(c *allocator.Config) {
		c.Tiers = allocator.TierConfig{
			Tiers: map[string]allocator.Tier{
				"standard": {Type: allocator.Exclusive, Target: 1},
				"9shines":  {Type: allocator.Exclusive, Target: 2},
				"premium":  {Type: allocator.Exclusive, Target: 1},
				"basic":    {Type: allocator.Shared, Target: 1, MaxConcurrent: 3},
			},
			DefaultChain: []string{"standard", "basic"},
		}
	})
	k := a.Keys()
	rdb.HSet(ctx, k.MerchantConfig(),
		"9shines", `{"tier":"dedicated","pool":"9shines"}`,
		"vip", `{"fallback":["premium","standard"]}`)
	var pods []allocator.PodState
	for _, name := range []string{"p0", "p1", "p2", "p3", "p4", "p5"} {
		pods = append(pods, allocator.PodState{Name: name, Address: "127.0.0.1:1", Ready: true})
	}
	res := mustSync(t, a, pods...)
	counts := map[string]int{}
	for _, r := range res {
		counts[r.Tier]++
	}
	if counts["merchant:9shines"] != 2 || counts["9shines"] != 0 {
		t.Fatalf("tiers assigned = %v, want 2 in merchant:9shines and none in an ordinary 9shines pool", counts)
	}
	if n := rdb.SCard(ctx, k.MerchantAssigned("9shines")).Val(); n != 2 {
		t.Fatalf("%s holds %d pods, want 2", k.MerchantAssigned("9shines"), n)
	}
	if n := rdb.SCard(ctx, k.MerchantPods("9shines")).Val(); n != 2 {
		t.Fatalf("%s holds %d pods, want 2", k.MerchantPods("9shines"), n)
	}
	if counts["premium"] != 1 {
		t.Errorf("premium (a merchant's fallback) got %d pods, want 1 as an ordinary tier", counts["premium"])
	}
	al := mustAllocate(t, a, "CA-9", "9shines")
	if al.SourcePool != "merchant:9shines" {
		t.Fatalf("the merchant's call came from %s, want merchant:9shines", al.SourcePool)
	}
	// Rebalancing keeps them there.
	if moves, err := a.Rebalance(ctx, "", 10); err != nil || len(moves) != 0 {
		t.Fatalf("rebalance moved %v (%v)", moves, err)
	}
}
