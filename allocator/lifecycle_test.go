package allocator_test

import (
	"context"
	"errors"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/edge-voice/edge/allocator"
	"github.com/edge-voice/edge/allocator/allocatortest"
)

func TestAllocateReleaseExclusive(t *testing.T) {
	forEachBackend(t, func(t *testing.T, rdb redis.UniversalClient) {
		ctx := context.Background()
		a := allocatortest.New(t, rdb)
		k := a.Keys()
		register(t, a, "gold", "agent-0")
		register(t, a, "standard", "agent-1")

		first := mustAllocate(t, a, "CA1", "")
		if first.PodName != "agent-0" || first.SourcePool != "pool:gold" || first.WasExisting || first.Shared {
			t.Fatalf("first allocation = %+v, want agent-0 from pool:gold", first)
		}
		again := mustAllocate(t, a, "CA1", "")
		if again.PodName != "agent-0" || !again.WasExisting {
			t.Fatalf("repeat allocation = %+v, want agent-0 was_existing", again)
		}
		second := mustAllocate(t, a, "CA2", "")
		if second.PodName != "agent-1" || second.SourcePool != "pool:standard" {
			t.Fatalf("second allocation = %+v, want agent-1 from pool:standard (gold is empty)", second)
		}

		// The seeds' keys hold what the predecessor wrote.
		if got := rdb.Get(ctx, k.Lease("agent-0")).Val(); got != "CA1" {
			t.Errorf("lease = %q, want CA1", got)
		}
		info := rdb.HGetAll(ctx, k.Call("CA1")).Val()
		if info["pod_name"] != "agent-0" || info["source_pool"] != "pool:gold" || info["allocated_at"] == "" {
			t.Errorf("call info = %v", info)
		}
		pod := rdb.HGetAll(ctx, k.PodInfo("agent-0")).Val()
		if pod["status"] != "allocated" || pod["allocated_call_sid"] != "CA1" {
			t.Errorf("pod info = %v", pod)
		}

		rel, err := a.Release(ctx, "CA1")
		if err != nil {
			t.Fatal(err)
		}
		if rel.PodName != "agent-0" || !rel.ReleasedToPool || rel.WasDraining || rel.Stale {
			t.Fatalf("release = %+v", rel)
		}
		if _, err := a.Release(ctx, "CA1"); !errors.Is(err, allocator.ErrCallNotFound) {
			t.Fatalf("second release: err = %v, want ErrCallNotFound", err)
		}
		if !rdb.SIsMember(ctx, k.PoolAvailable("gold"), "agent-0").Val() {
			t.Error("agent-0 not back in gold's available pool")
		}
		if n := rdb.Exists(ctx, k.Lease("agent-0"), k.Call("CA1")).Val(); n != 0 {
			t.Errorf("%d of lease and call info left after release", n)
		}
	})
}

func TestAllocateShared(t *testing.T) {
	forEachBackend(t, func(t *testing.T, rdb redis.UniversalClient) {
		ctx := context.Background()
		a := allocatortest.New(t, rdb)
		k := a.Keys()
		register(t, a, "basic", "shared-0", "shared-1")

		// Least loaded first: the two pods alternate, up to 3 calls each.
		counts := map[string]int{}
		for i := range 6 {
			al := mustAllocate(t, a, callID(i), "")
			if !al.Shared || al.SourcePool != "pool:basic" {
				t.Fatalf("allocation %d = %+v", i, al)
			}
			counts[al.PodName]++
		}
		if counts["shared-0"] != 3 || counts["shared-1"] != 3 {
			t.Fatalf("calls per pod = %v, want 3 and 3", counts)
		}
		_, err := a.Allocate(ctx, allocator.Request{CallID: "CA-over"})
		var nc *allocator.NoCapacityError
		if !errors.As(err, &nc) || nc.Reason != allocator.ReasonAtCapacity {
			t.Fatalf("7th call: err = %v, want at_capacity", err)
		}
		if got := rdb.ZCard(ctx, k.PodCalls("shared-0")).Val(); got != 3 {
			t.Errorf("per-call leases on shared-0 = %d, want 3", got)
		}
		rel, err := a.Release(ctx, callID(0))
		if err != nil || !rel.ReleasedToPool {
			t.Fatalf("release = %+v, %v", rel, err)
		}
		if got := rdb.ZScore(ctx, k.PoolAvailable("basic"), rel.PodName).Val(); got != 2 {
			t.Errorf("load of %s after release = %v, want 2", rel.PodName, got)
		}
		if mustAllocate(t, a, "CA-next", "").PodName != rel.PodName {
			t.Error("the freed slot was not reused")
		}
	})
}

func callID(i int) string { return "CA" + string(rune('a'+i%26)) + itoa(i) }

func itoa(i int) string {
	if i == 0 {
		return "0"
	}
	var b []byte
	for ; i > 0; i /= 10 {
		b = append([]byte{byte('0' + i%10)}, b...)
	}
	return string(b)
}
