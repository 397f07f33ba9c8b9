package poolmgr

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/edge-voice/edge/allocator"
	"github.com/edge-voice/edge/allocator/allocatortest"
	"github.com/edge-voice/edge/internal/testredis"
)

// benchPods seeds n assigned pods with a realistic mix: of every 10, 4 idle,
// 3 busy (live call), 1 draining with a call, 2 zombies (made before every
// sweep by makeZombies); a third of the pods are in the shared tier.
func benchPods(b *testing.B, n int) (*allocator.Allocator, *redis.Client, []allocator.PodState, *testredis.RoundTrips) {
	rdb := testredis.Start(b, testredis.TCP()).Client()
	rt := &testredis.RoundTrips{}
	rdb.AddHook(rt)
	tiers := allocator.TierConfig{
		Tiers: map[string]allocator.Tier{
			"gold":  {Type: allocator.Exclusive, Target: n / 3},
			"std":   {Type: allocator.Exclusive, Target: n / 3},
			"basic": {Type: allocator.Shared, Target: n / 3, MaxConcurrent: 4},
		},
		DefaultChain: []string{"gold", "std", "basic"},
	}
	a, err := allocator.New(rdb, allocator.Config{LeaseTTL: time.Minute, Tiers: tiers}, nil)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	pods := make([]allocator.PodState, n)
	for i := range pods {
		pods[i] = allocator.PodState{Name: fmt.Sprintf("agent-%05d", i), Address: "10.0.0.1:8000", Ready: true}
	}
	if _, err := a.SyncPods(ctx, "", pods); err != nil {
		b.Fatal(err)
	}
	k := a.Keys()
	pipe := rdb.Pipeline()
	for i, p := range pods {
		switch i % 10 {
		case 4, 5, 6, 7: // busy (7 draining)
			tier := rdb.Get(ctx, k.PodTier(p.Name)).Val()
			call := "CA-" + p.Name
			pipe.HSet(ctx, k.Call(call), "pod_name", p.Name, "source_pool", "pool:"+tier)
			if tier == "basic" {
				pipe.ZAdd(ctx, k.PodCalls(p.Name), redis.Z{Score: float64(time.Now().Add(time.Minute).UnixMilli()), Member: call})
				pipe.ZAdd(ctx, k.PoolAvailable(tier), redis.Z{Score: 1, Member: p.Name})
			} else {
				pipe.SRem(ctx, k.PoolAvailable(tier), p.Name)
				pipe.HSet(ctx, k.PodInfo(p.Name), "status", "allocated", "allocated_call_sid", call)
			}
			pipe.Set(ctx, k.Lease(p.Name), call, time.Minute)
			if i%10 == 7 {
				pipe.Set(ctx, k.PodDraining(p.Name), "true", time.Hour)
			}
		}
	}
	if _, err := pipe.Exec(ctx); err != nil {
		b.Fatal(err)
	}
	return a, rdb, pods, rt
}

// makeZombies gives pods 8 and 9 of every 10 a call that died without a
// release: exclusive ones out of their pool with no lease, shared ones with
// an expired per-call lease still counted in their score.
func makeZombies(b *testing.B, a *allocator.Allocator, rdb *redis.Client, pods []allocator.PodState) {
	ctx := context.Background()
	k := a.Keys()
	tiers := map[string]string{}
	for _, p := range pods {
		tiers[p.Name] = rdb.Get(ctx, k.PodTier(p.Name)).Val()
	}
	pipe := rdb.Pipeline()
	for i, p := range pods {
		if i%10 != 8 && i%10 != 9 {
			continue
		}
		call := "CA-dead-" + p.Name
		if tier := tiers[p.Name]; tier == "basic" {
			pipe.ZAdd(ctx, k.PodCalls(p.Name), redis.Z{Score: 1, Member: call})
			pipe.ZAdd(ctx, k.PoolAvailable(tier), redis.Z{Score: 1, Member: p.Name})
		} else {
			pipe.SRem(ctx, k.PoolAvailable(tier), p.Name)
			pipe.HSet(ctx, k.PodInfo(p.Name), "status", "allocated", "allocated_call_sid", call)
		}
	}
	if _, err := pipe.Exec(ctx); err != nil {
		b.Fatal(err)
	}
}

func BenchmarkSweep10k(b *testing.B) {
	a, rdb, pods, rt := benchPods(b, 10000)
	ctx := context.Background()
	names, err := a.RegisteredPods(ctx)
	if err != nil || len(names) != len(pods) {
		b.Fatalf("registered %d, %v", len(names), err)
	}
	for b.Loop() {
		b.StopTimer()
		makeZombies(b, a, rdb, pods)
		before := rt.Load()
		b.StartTimer()
		names, err := a.RegisteredPods(ctx)
		if err != nil {
			b.Fatal(err)
		}
		res, err := a.SweepPods(ctx, "", names)
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(rt.Load()-before), "roundtrips/op")
		b.ReportMetric(float64(len(res.Recovered)+res.SlotsReclaimed), "recovered/op")
	}
}

func BenchmarkReconcile10k(b *testing.B) {
	a, _, pods, rt := benchPods(b, 10000)
	ctx := context.Background()
	m := newManager(b, a, NewRegistry(), &alwaysLeader{})
	m.Registry.Replace(pods)
	r := &reconciler{m: m}
	before, runs := rt.Load(), 0
	for b.Loop() {
		if err := r.reconcile(ctx); err != nil {
			b.Fatal(err)
		}
		runs++
	}
	b.ReportMetric(float64(rt.Load()-before)/float64(runs), "roundtrips/op")
}

// BenchmarkColdRegister10k: 10,000 new pods, tier assignment included.
func BenchmarkColdRegister10k(b *testing.B) {
	rdb := testredis.Start(b, testredis.TCP()).Client()
	a := allocatortest.New(b, rdb)
	pods := make([]allocator.PodState, 10000)
	for i := range pods {
		pods[i] = allocator.PodState{Name: fmt.Sprintf("agent-%05d", i), Address: "10.0.0.1:8000", Ready: true}
	}
	ctx := context.Background()
	for b.Loop() {
		b.StopTimer()
		rdb.FlushAll(ctx)
		b.StartTimer()
		if _, err := a.SyncPods(ctx, "", pods); err != nil {
			b.Fatal(err)
		}
	}
}
