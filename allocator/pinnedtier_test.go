package allocator_test

import (
	"context"
	"testing"

	"github.com/edge-voice/edge/allocator"
	"github.com/edge-voice/edge/allocator/allocatortest"
	"github.com/edge-voice/edge/internal/testredis"
)

// A pod pinned to a tier of the tier config registers in that tier's own
// pools, whether or not the default chain or a merchant's fallback names
// the tier yet: a tier only the tier config declares is a merchant's
// dedicated pool for tier assignment, but a pod its source pins to it is
// known. Once a merchant's fallback names the tier, that merchant's calls
// get the pod at once; the status counts it under the tier all along, and
// the zombie sweep gives it back when its call dies.
func TestPodPinnedToATierOutsideTheDefaultChainRegisters(t *testing.T) {
	ctx := context.Background()
	rdb := testredis.Start(t).Client()
	a := allocatortest.New(t, rdb, func(c *allocator.Config) {
		c.Tiers = allocator.TierConfig{
			Tiers: map[string]allocator.Tier{
				"standard": {Type: allocator.Exclusive, Target: 1},
				"premium":  {Type: allocator.Exclusive, Target: 1},
			},
			DefaultChain: []string{"standard"},
		}
	})
	k := a.Keys()
	res := mustSync(t, a,
		allocator.PodState{Name: "std-0", Address: "127.0.0.1:1", Tier: "standard", Ready: true},
		allocator.PodState{Name: "prem-0", Address: "127.0.0.1:2", Tier: "premium", Ready: true})
	if r := res["prem-0"]; r.Outcome != allocator.SyncAdded || r.Tier != "premium" {
		t.Fatalf("prem-0 pinned to premium: %+v, want added in premium", r)
	}
	if !rdb.SIsMember(ctx, k.PoolAvailable("premium"), "prem-0").Val() {
		t.Fatalf("prem-0 is not in %s", k.PoolAvailable("premium"))
	}
	// A second sync (the reconciler's) leaves it where it is.
	if r := mustSync(t, a, allocator.PodState{Name: "prem-0", Address: "127.0.0.1:2", Tier: "premium", Ready: true})["prem-0"]; r.Outcome != allocator.SyncUnchanged {
		t.Fatalf("prem-0 resynced: %+v, want unchanged", r)
	}
	if got := premiumStatus(t, a); got.Assigned != 1 || got.Available != 1 {
		t.Errorf("status of premium before any fallback names it = %+v, want 1 assigned, 1 available", got)
	}

	// A merchant whose fallback names the tier is served from it.
	if err := a.SetMerchantConfig(ctx, "vip", allocator.MerchantConfig{Fallback: []string{"premium", "standard"}}); err != nil {
		t.Fatal(err)
	}
	al := mustAllocate(t, a, "CA-vip-1", "vip")
	if al.PodName != "prem-0" || al.SourcePool != "pool:premium" {
		t.Fatalf("vip's call got %s from %s, want prem-0 from pool:premium", al.PodName, al.SourcePool)
	}
	if got := premiumStatus(t, a); got.Assigned != 1 || got.Available != 0 || got.Calls != 1 {
		t.Errorf("status of premium with vip's call = %+v, want 1 assigned, 0 available, 1 call", got)
	}

	// The fallback goes again (premium is a merchant tier once more); the
	// call's lease runs out: the sweep gives the pinned pod back to its
	// pool.
	if _, err := a.DeleteMerchantConfig(ctx, "vip"); err != nil {
		t.Fatal(err)
	}
	mustSync(t, a, allocator.PodState{Name: "prem-0", Address: "127.0.0.1:2", Tier: "premium", Ready: true})
	rdb.Del(ctx, k.Lease("prem-0"))
	sw, err := a.SweepPods(ctx, "", []string{"prem-0"})
	if err != nil {
		t.Fatal(err)
	}
	if len(sw.Recovered) != 1 || !rdb.SIsMember(ctx, k.PoolAvailable("premium"), "prem-0").Val() {
		t.Errorf("sweep of prem-0 after its lease ran out: %+v, in pool: %v; want it recovered into pool:premium",
			sw, rdb.SIsMember(ctx, k.PoolAvailable("premium"), "prem-0").Val())
	}
	if got := premiumStatus(t, a); got.Assigned != 1 || got.Available != 1 {
		t.Errorf("status of premium after the sweep = %+v, want 1 assigned, 1 available", got)
	}

	// A tier the config does not have is still refused.
	if r := mustSync(t, a, allocator.PodState{Name: "x-0", Address: "127.0.0.1:3", Tier: "gold", Ready: true})["x-0"]; r.Outcome != allocator.SyncBadTier {
		t.Errorf("pod pinned to gold (not configured): %+v, want bad_tier", r)
	}
}

func premiumStatus(t *testing.T, a *allocator.Allocator) allocator.PoolStatus {
	t.Helper()
	st, err := a.Status(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range st {
		if p.Tier == "premium" {
			return p
		}
	}
	t.Fatalf("status lists no premium: %+v", st)
	return allocator.PoolStatus{}
}
