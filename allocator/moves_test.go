package allocator_test

import (
	"context"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/edge-voice/edge/allocator"
	"github.com/edge-voice/edge/allocator/allocatortest"
)

// A shared call that died (its per-call lease expired, not yet swept) must
// hold nothing once its pod moved to an exclusive tier and serves a new
// call there: neither its late renew nor its late release may touch the new
// owner's lease.
func TestDeadSharedCallAfterMoveHoldsNothing(t *testing.T) {
	forEachBackend(t, func(t *testing.T, rdb redis.UniversalClient) {
		ctx := context.Background()
		a := allocatortest.New(t, rdb)
		k := a.Keys()
		mustSync(t, a, allocator.PodState{Name: "b0", Address: "127.0.0.1:1", Tier: "basic", Ready: true})
		if al := mustAllocate(t, a, "CA-dead", ""); al.PodName != "b0" || !al.Shared {
			t.Fatalf("allocation = %+v", al)
		}
		// The call dies: its per-call lease and the pod's lease run out.
		rdb.ZAdd(ctx, k.PodCalls("b0"), redis.Z{Score: 1, Member: "CA-dead"})
		rdb.Del(ctx, k.Lease("b0"))
		// Before the sweep, the source pins b0 to gold: it is idle, so it moves.
		res := mustSync(t, a, allocator.PodState{Name: "b0", Address: "127.0.0.1:1", Tier: "gold", Ready: true})
		if res["b0"].Outcome != allocator.SyncMoved {
			t.Fatalf("sync = %+v, want moved", res["b0"])
		}
		if al := mustAllocate(t, a, "CA-new", ""); al.PodName != "b0" || al.Shared {
			t.Fatalf("new allocation = %+v, want b0 exclusive", al)
		}
		held, err := a.Renew(ctx, []allocator.Lease{{CallID: "CA-dead", PodName: "b0"}})
		if err != nil || held[0] {
			t.Errorf("late renew of the dead call = %v, %v; want not held", held, err)
		}
		if rel, err := a.Release(ctx, "CA-dead"); err != nil || !rel.Stale {
			t.Errorf("late release of the dead call = %+v, %v; want stale", rel, err)
		}
		if got := rdb.Get(ctx, k.Lease("b0")).Val(); got != "CA-new" {
			t.Errorf("lease of b0 = %q, want CA-new", got)
		}
		if got := rdb.HGet(ctx, k.PodInfo("b0"), "allocated_call_sid").Val(); got != "CA-new" {
			t.Errorf("owner of b0 = %q, want CA-new", got)
		}
		if held, _ := a.Renew(ctx, []allocator.Lease{{CallID: "CA-new", PodName: "b0"}}); !held[0] {
			t.Error("the new owner lost b0")
		}
	})
}

// The same through rebalancing: a shared pod whose only call died and whose
// score is 0 again (a readiness flap re-added it with its live load) moves
// to an exclusive tier; the dead call's late release is stale.
func TestDeadSharedCallAfterRebalanceHoldsNothing(t *testing.T) {
	forEachBackend(t, func(t *testing.T, rdb redis.UniversalClient) {
		ctx := context.Background()
		a := allocatortest.New(t, rdb)
		k := a.Keys()
		mustSync(t, a, ready("g0", "s0", "s1", "b0", "b1")...) // gold 1, standard 2, basic 2
		mustAllocate(t, a, "CA-g", "")
		mustAllocate(t, a, "CA-s0", "")
		mustAllocate(t, a, "CA-s1", "")
		dead := mustAllocate(t, a, "CA-dead", "").PodName // a basic pod
		rdb.ZAdd(ctx, k.PodCalls(dead), redis.Z{Score: 1, Member: "CA-dead"})
		rdb.Del(ctx, k.Lease(dead))
		mustSync(t, a, allocator.PodState{Name: dead, Address: "127.0.0.1:8000"})
		mustSync(t, a, ready(dead)...)
		cfg := a.Config()
		tiers := cfg.Tiers
		tiers.Tiers = map[string]allocator.Tier{"gold": {Type: allocator.Exclusive, Target: 2}, "standard": tiers.Tiers["standard"], "basic": tiers.Tiers["basic"]}
		cfg.Tiers = tiers
		a.Apply(cfg)
		moves, err := a.Rebalance(ctx, "", 1)
		if err != nil || len(moves) != 1 || moves[0].Pod != dead {
			t.Fatalf("moves = %+v, %v; want %s to gold", moves, err, dead)
		}
		if al := mustAllocate(t, a, "CA-new", ""); al.PodName != dead {
			t.Fatalf("new allocation = %+v, want %s", al, dead)
		}
		if rel, err := a.Release(ctx, "CA-dead"); err != nil || !rel.Stale {
			t.Errorf("late release of the dead call = %+v, %v; want stale", rel, err)
		}
		if got := rdb.Get(ctx, k.Lease(dead)).Val(); got != "CA-new" {
			t.Errorf("lease of %s = %q, want CA-new", dead, got)
		}
		if n := rdb.Exists(ctx, k.PodCalls(dead)).Val(); n != 0 {
			t.Errorf("per-call leases of %s left on an exclusive pod", dead)
		}
	})
}

// An exclusive call whose lease ran out must not renew once its idle pod
// moved to a shared tier.
func TestDeadExclusiveCallAfterMoveToSharedHoldsNothing(t *testing.T) {
	forEachBackend(t, func(t *testing.T, rdb redis.UniversalClient) {
		ctx := context.Background()
		a := allocatortest.New(t, rdb)
		k := a.Keys()
		mustSync(t, a, allocator.PodState{Name: "g0", Address: "127.0.0.1:1", Tier: "gold", Ready: true})
		mustAllocate(t, a, "CA-dead", "")
		rdb.Del(ctx, k.Lease("g0"))
		res := mustSync(t, a, allocator.PodState{Name: "g0", Address: "127.0.0.1:1", Tier: "basic", Ready: true})
		if res["g0"].Outcome != allocator.SyncMoved {
			t.Fatalf("sync = %+v, want moved", res["g0"])
		}
		held, err := a.Renew(ctx, []allocator.Lease{{CallID: "CA-dead", PodName: "g0"}})
		if err != nil || held[0] {
			t.Errorf("late renew of the dead call = %v, %v; want not held", held, err)
		}
		if n := rdb.Exists(ctx, k.Lease("g0")).Val(); n != 0 {
			t.Error("the dead call's renew wrote a lease on the moved pod")
		}
	})
}
