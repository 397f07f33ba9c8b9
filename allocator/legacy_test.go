package allocator_test

import (
	"context"
	"errors"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/edge-voice/edge/allocator"
	"github.com/edge-voice/edge/allocator/allocatortest"
)

// legacySharedCall writes a shared call as the predecessor did: call info
// without pool_type, no per-call lease, load counted in the score only.
func legacySharedCall(ctx context.Context, rdb redis.UniversalClient, k allocator.Keys, call, pod string) {
	rdb.HSet(ctx, k.Call(call), "pod_name", pod, "source_pool", "pool:basic", "merchant_id", "", "allocated_at", "1700000000")
	rdb.ZIncrBy(ctx, k.PoolAvailable("basic"), 1, pod)
	rdb.HSet(ctx, k.PodInfo(pod), "status", "allocated", "allocated_call_sid", call)
	rdb.Set(ctx, k.Lease(pod), call, 0)
}

// A predecessor's shared call released after its pod left the tier
// (unregistered, or moved and serving a new call) changes nothing on it.
func TestLegacySharedReleaseAfterPodLeft(t *testing.T) {
	forEachBackend(t, func(t *testing.T, rdb redis.UniversalClient) {
		ctx := context.Background()
		a := allocatortest.New(t, rdb)
		k := a.Keys()
		register(t, a, "basic", "b0", "b1", "b2")
		legacySharedCall(ctx, rdb, k, "CA-old1", "b0")
		legacySharedCall(ctx, rdb, k, "CA-old2", "b0") // the one the pod info and lease name
		if _, err := a.UnregisterPod(ctx, "", "b0"); err != nil {
			t.Fatal(err)
		}
		if _, err := a.Release(ctx, "CA-old1"); err != nil {
			t.Fatal(err)
		}
		if n := rdb.Exists(ctx, k.PodInfo("b0"), k.Lease("b0"), k.PodTier("b0")).Val(); n != 0 {
			t.Errorf("release of a removed pod's legacy call left %d of its keys behind", n)
		}

		// b1: its legacy call's lease ran out (the predecessor's 15 min), the
		// pod moved to gold and serves a new call there.
		legacySharedCall(ctx, rdb, k, "CA-old3", "b1")
		rdb.Del(ctx, k.Lease("b1"))
		rdb.ZAdd(ctx, k.PoolAvailable("basic"), redis.Z{Score: 0, Member: "b1"})
		res := mustSync(t, a, allocator.PodState{Name: "b1", Address: "127.0.0.1:1", Tier: "gold", Ready: true})
		if res["b1"].Outcome != allocator.SyncMoved {
			t.Fatalf("sync = %+v, want moved", res["b1"])
		}
		if al := mustAllocate(t, a, "CA-new", ""); al.PodName != "b1" {
			t.Fatalf("new allocation = %+v, want b1", al)
		}
		if rel, err := a.Release(ctx, "CA-old3"); err != nil || rel.ReleasedToPool {
			t.Errorf("late legacy release = %+v, %v", rel, err)
		}
		if got := rdb.Get(ctx, k.Lease("b1")).Val(); got != "CA-new" {
			t.Errorf("lease of b1 = %q, want CA-new", got)
		}
		if got := rdb.HGet(ctx, k.PodInfo("b1"), "allocated_call_sid").Val(); got != "CA-new" {
			t.Errorf("owner of b1 = %q, want CA-new", got)
		}
	})
}

// A predecessor's shared call released while its tier's ZSET is absent (its
// only pod out of the set for the moment) must not create the shared pool
// as a SET: every later shared allocation would fail with WRONGTYPE.
func TestLegacySharedReleaseWithEmptySharedPool(t *testing.T) {
	forEachBackend(t, func(t *testing.T, rdb redis.UniversalClient) {
		ctx := context.Background()
		a := allocatortest.New(t, rdb)
		k := a.Keys()
		register(t, a, "basic", "b0")
		legacySharedCall(ctx, rdb, k, "CA-old", "b0")
		rdb.Del(ctx, k.PoolAvailable("basic")) // e.g. a predecessor's drain whose flag has expired
		if _, err := a.Release(ctx, "CA-old"); err != nil {
			t.Fatal(err)
		}
		if typ := rdb.Type(ctx, k.PoolAvailable("basic")).Val(); typ == "set" {
			t.Fatalf("the shared pool is now a %s", typ)
		}
		if _, err := a.SweepPods(ctx, "", []string{"b0"}); err != nil {
			t.Fatal(err)
		}
		al, err := a.Allocate(ctx, allocator.Request{CallID: "CA-new"})
		if err != nil && !errors.Is(err, allocator.ErrNoCapacity) {
			t.Fatalf("allocate after the legacy release: %v", err)
		}
		if err == nil && (al.PodName != "b0" || !al.Shared) {
			t.Fatalf("allocation = %+v", al)
		}
	})
}
