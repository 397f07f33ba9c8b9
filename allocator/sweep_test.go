package allocator_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/edge-voice/edge/allocator"
	"github.com/edge-voice/edge/allocator/allocatortest"
	"github.com/edge-voice/edge/internal/testredis"
)

func TestSweep(t *testing.T) {
	forEachBackend(t, func(t *testing.T, rdb redis.UniversalClient) {
		ctx := context.Background()
		a := allocatortest.New(t, rdb)
		k := a.Keys()
		// gold: g0; standard: s0 s1; basic: b0 b1 b2.
		mustSync(t, a, ready("g0", "s0", "s1", "b0", "b1", "b2")...)
		if err := a.SetMerchantTarget(ctx, "acme", 1); err != nil {
			t.Fatal(err)
		}
		mustSync(t, a, ready("m0")...)
		calls := map[string]string{}
		for i := range 7 {
			al := mustAllocate(t, a, fmt.Sprintf("CA%d", i), "")
			calls[al.CallID] = al.PodName
		}
		// CA0 g0, CA1 s0, CA2 s1 (exclusive), CA3.. on shared pods.
		// Zombies: g0's call died (lease gone); s1's lease is live; s0 is
		// draining with a dead call.
		rdb.Del(ctx, k.Lease("g0"))
		rdb.Del(ctx, k.Lease("s0"))
		if _, err := a.Drain(ctx, "s0"); err != nil {
			t.Fatal(err)
		}
		// A merchant pod with a dead lease.
		rdb.HSet(ctx, k.MerchantConfig(), "acme", `{"pool":"acme"}`)
		mal := mustAllocate(t, a, "CM", "acme")
		if mal.PodName != "m0" {
			t.Fatalf("merchant call got %s", mal.PodName)
		}
		rdb.Del(ctx, k.Lease("m0"))
		// Shared: expire CA3's per-call lease; drop b2 from its ZSET.
		shared := calls["CA3"]
		rdb.ZAdd(ctx, k.PodCalls(shared), redis.Z{Score: 1, Member: "CA3"})
		rdb.ZRem(ctx, k.PoolAvailable("basic"), "b2")

		res, err := a.SweepPods(ctx, "", []string{"g0", "s0", "s1", "b0", "b1", "b2", "m0", "ghost"})
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(res.Recovered) != "[g0 m0]" || res.SlotsReclaimed != 1 || res.CallsExpired != 1 || res.SharedReadded != 1 || res.Batches != 1 {
			t.Fatalf("sweep = %+v", res)
		}
		if !rdb.SIsMember(ctx, k.PoolAvailable("gold"), "g0").Val() || rdb.HGet(ctx, k.PodInfo("g0"), "allocated_call_sid").Val() != "" {
			t.Error("g0 not recovered cleanly")
		}
		if !rdb.SIsMember(ctx, k.MerchantPods("acme"), "m0").Val() {
			t.Error("m0 not back in its merchant pool")
		}
		if rdb.SIsMember(ctx, k.PoolAvailable("standard"), "s0").Val() || rdb.SIsMember(ctx, k.PoolAvailable("standard"), "s1").Val() {
			t.Error("a draining or leased pod was recovered")
		}
		for _, pod := range []string{shared, "b2"} {
			want := float64(rdb.ZCard(ctx, k.PodCalls(pod)).Val()) // its live calls
			if got := rdb.ZScore(ctx, k.PoolAvailable("basic"), pod).Val(); got != want {
				t.Errorf("%s score = %v, want %v", pod, got, want)
			}
		}
		// The sweep ended the dead calls: their late releases find nothing
		// and move nothing.
		for _, call := range []string{"CA0", "CA3"} {
			rel, err := a.Release(ctx, call)
			if !errors.Is(err, allocator.ErrCallNotFound) {
				t.Errorf("late release of %s = %+v, %v; want not found", call, rel, err)
			}
		}
		// A second sweep finds nothing.
		res, err = a.SweepPods(ctx, "", []string{"g0", "s0", "s1", "b0", "b1", "b2", "m0"})
		if err != nil || len(res.Recovered)+res.SlotsReclaimed+res.SharedReadded != 0 {
			t.Fatalf("second sweep = %+v, %v", res, err)
		}
	})
}

// A Redis error is never read as "missing": a sweep against a stopped Redis
// fails as a whole, and writes nothing once Redis is back (no "recovery" of
// pods it could not read).
func TestSweepRedisErrorChangesNothing(t *testing.T) {
	srv := testredis.Start(t)
	rdb := srv.Client()
	ctx := context.Background()
	a := allocatortest.New(t, rdb)
	mustSync(t, a, ready("g0", "b0")...)
	mustAllocate(t, a, "CA0", "")
	srv.Stop()
	cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	res, err := a.SweepPods(cctx, "", []string{"g0", "b0"})
	if err == nil || errors.Is(err, allocator.ErrFenced) || len(res.Recovered) != 0 {
		t.Fatalf("sweep against a stopped Redis = %+v, %v; want a Redis error", res, err)
	}
	srv.Restart() // empty
	if n := rdb.DBSize(ctx).Val(); n != 0 {
		t.Fatalf("%d keys written after a failed sweep", n)
	}
}

// At most one round trip per BatchSize pods.
func TestSweepBatches(t *testing.T) {
	a := allocatortest.New(t, testredis.Start(t).Client())
	pods := make([]string, 2*allocator.BatchSize+1)
	for i := range pods {
		pods[i] = fmt.Sprintf("p%d", i)
	}
	res, err := a.SweepPods(context.Background(), "", pods)
	if err != nil || res.Batches != 3 {
		t.Fatalf("batches = %d, %v; want 3", res.Batches, err)
	}
	if _, err := a.SweepPods(context.Background(), "", nil); err != nil {
		t.Fatal(err)
	}
}
