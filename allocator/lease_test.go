package allocator_test

import (
	"context"
	"errors"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/edge-voice/edge/allocator"
	"github.com/edge-voice/edge/allocator/allocatortest"
	"github.com/edge-voice/edge/internal/testredis"
)

// Renew extends only what the call still owns; a release after the pod was
// recovered for another call is stale and returns nothing to the pool.
func TestRenewAndStaleRelease(t *testing.T) {
	forEachBackend(t, func(t *testing.T, rdb redis.UniversalClient) {
		ctx := context.Background()
		a := allocatortest.New(t, rdb)
		k := a.Keys()
		register(t, a, "gold", "g0")
		register(t, a, "basic", "s0")
		mustAllocate(t, a, "CA-ex", "")
		mustAllocate(t, a, "CA-sh", "")

		held, err := a.Renew(ctx, []allocator.Lease{
			{CallID: "CA-ex", PodName: "g0"},
			{CallID: "CA-sh", PodName: "s0"},
			{CallID: "CA-ex", PodName: "s0"},   // wrong pod
			{CallID: "CA-none", PodName: "g0"}, // no such call
		})
		if err != nil {
			t.Fatal(err)
		}
		if want := []bool{true, true, false, false}; !equal(held, want) {
			t.Fatalf("held = %v, want %v", held, want)
		}

		// The exclusive lease runs out and a sweep recovers the pod (as the
		// pool manager does: back to the pool, owner cleared); a new call
		// takes it.
		rdb.Del(ctx, k.Lease("g0"))
		rdb.HSet(ctx, k.PodInfo("g0"), "allocated_call_sid", "")
		rdb.SAdd(ctx, k.PoolAvailable("gold"), "g0")
		if got := mustAllocate(t, a, "CA-new", "").PodName; got != "g0" {
			t.Fatalf("new call got %s, want the recovered g0", got)
		}
		if held, _ := a.Renew(ctx, []allocator.Lease{{CallID: "CA-ex", PodName: "g0"}}); held[0] {
			t.Fatal("the old call renewed a lease on a pod that now serves another call")
		}
		rel, err := a.Release(ctx, "CA-ex")
		if err != nil || !rel.Stale || rel.ReleasedToPool {
			t.Fatalf("late release = %+v, %v; want stale, nothing returned", rel, err)
		}
		if rdb.SIsMember(ctx, k.PoolAvailable("gold"), "g0").Val() {
			t.Fatal("the late release returned g0 while CA-new holds it")
		}
		if got := rdb.Get(ctx, k.Lease("g0")).Val(); got != "CA-new" {
			t.Fatalf("lease of g0 = %q, want CA-new", got)
		}

		// A shared call whose per-call lease was swept is stale too.
		rdb.ZRem(ctx, k.PodCalls("s0"), "CA-sh")
		if held, _ := a.Renew(ctx, []allocator.Lease{{CallID: "CA-sh", PodName: "s0"}}); held[0] {
			t.Fatal("renewed a swept shared call")
		}
		if rel, err := a.Release(ctx, "CA-sh"); err != nil || !rel.Stale {
			t.Fatalf("release of swept shared call = %+v, %v", rel, err)
		}
	})
}

func TestDrain(t *testing.T) {
	forEachBackend(t, func(t *testing.T, rdb redis.UniversalClient) {
		ctx := context.Background()
		a := allocatortest.New(t, rdb)
		k := a.Keys()
		register(t, a, "gold", "g0", "g1")
		register(t, a, "basic", "s0")
		mustAllocate(t, a, "CA1", "") // on g0 or g1
		busy := rdb.HGet(ctx, k.Call("CA1"), "pod_name").Val()

		d, err := a.Drain(ctx, busy)
		if err != nil || !d.HasActiveCall || d.WasDraining || d.Tier != "gold" {
			t.Fatalf("drain busy pod = %+v, %v", d, err)
		}
		again, err := a.Drain(ctx, busy)
		if err != nil || !again.WasDraining {
			t.Fatalf("repeat drain = %+v, %v", again, err)
		}
		if ttl := rdb.PTTL(ctx, k.PodDraining(busy)).Val(); ttl <= 0 {
			t.Fatalf("draining flag TTL = %v", ttl)
		}
		if d, err := a.Drain(ctx, "s0"); err != nil || d.HasActiveCall {
			t.Fatalf("drain idle shared pod = %+v, %v", d, err)
		}
		if rdb.ZScore(ctx, k.PoolAvailable("basic"), "s0").Err() != redis.Nil {
			t.Fatal("drained shared pod still in its ZSET")
		}
		if _, err := a.Drain(ctx, "ghost"); !errors.Is(err, allocator.ErrPodNotFound) {
			t.Fatalf("drain unknown pod: err = %v", err)
		}
		rel, err := a.Release(ctx, "CA1")
		if err != nil || rel.ReleasedToPool || !rel.WasDraining {
			t.Fatalf("release on draining pod = %+v, %v; want not returned", rel, err)
		}
		if rdb.SIsMember(ctx, k.PoolAvailable("gold"), busy).Val() {
			t.Fatal("a draining pod went back to its pool")
		}
	})
}

func TestRegisterMoveAndUnregister(t *testing.T) {
	forEachBackend(t, func(t *testing.T, rdb redis.UniversalClient) {
		ctx := context.Background()
		a := allocatortest.New(t, rdb)
		k := a.Keys()
		register(t, a, "gold", "p0")
		if out, err := a.RegisterPod(ctx, allocator.Pod{Name: "p0", Tier: "gold"}); err != nil || out != allocator.RegisteredUnchanged {
			t.Fatalf("re-register = %v, %v", out, err)
		}
		mustAllocate(t, a, "CA1", "")
		if _, err := a.RegisterPod(ctx, allocator.Pod{Name: "p0", Tier: "basic"}); !errors.Is(err, allocator.ErrPodBusy) {
			t.Fatalf("moving a busy pod: err = %v, want ErrPodBusy", err)
		}
		if _, err := a.Release(ctx, "CA1"); err != nil {
			t.Fatal(err)
		}
		if out, err := a.RegisterPod(ctx, allocator.Pod{Name: "p0", Tier: "basic"}); err != nil || out != allocator.RegisteredMoved {
			t.Fatalf("moving an idle pod = %v, %v", out, err)
		}
		if rdb.SIsMember(ctx, k.PoolAssigned("gold"), "p0").Val() || rdb.Exists(ctx, k.PoolAvailable("gold")).Val() == 1 {
			t.Fatal("p0 still in gold after the move")
		}
		if got := mustAllocate(t, a, "CA2", ""); got.PodName != "p0" || !got.Shared {
			t.Fatalf("after the move: %+v", got)
		}
		un, err := a.UnregisterPod(ctx, "", "p0")
		if err != nil || un.Tier != "basic" || un.CallsEnded != 1 || len(un.Calls) != 1 || un.Calls[0] != "CA2" {
			t.Fatalf("unregister = %+v, %v", un, err)
		}
		if _, err := a.Release(ctx, "CA2"); !errors.Is(err, allocator.ErrCallNotFound) {
			t.Fatalf("release after unregister: err = %v, want not found", err)
		}
		// Only the ended calls' tombstones and marks are left. The
		// tombstones expire; a mark set has no TTL (its marks past the
		// ended TTL count for nothing and go at its next write).
		marks := map[string]bool{}
		for _, call := range []string{"CA1", "CA2"} {
			marks[k.CallEnded(call)] = true
			marks[k.EndedMarksOf(call)] = false
		}
		for _, key := range rdb.Keys(ctx, "*").Val() {
			expires, ok := marks[key]
			if !ok {
				t.Errorf("key %s left after unregistering the only pod", key)
			} else if ttl := rdb.PTTL(ctx, key).Val(); expires && ttl <= 0 {
				t.Errorf("tombstone %s has no TTL (%v)", key, ttl)
			}
		}
		if got := rdb.HGet(ctx, k.CallEnded("CA2"), "how").Val(); got != "unregistered" {
			t.Errorf("tombstone of CA2 = %q, want unregistered", got)
		}
		if _, err := a.UnregisterPod(ctx, "", "p0"); !errors.Is(err, allocator.ErrPodNotFound) {
			t.Fatalf("second unregister: err = %v", err)
		}
		if _, err := a.RegisterPod(ctx, allocator.Pod{Name: "p1", Tier: "platinum"}); !errors.Is(err, allocator.ErrInvalidConfig) {
			t.Fatalf("register in unknown tier: err = %v", err)
		}
	})
}

func equal(a, b []bool) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// A pod the pod source reports not ready keeps its call, and its release
// does not make it available: the source puts it back when it is ready.
func TestReleaseOfUnreadyPodKeepsItOut(t *testing.T) {
	forEachBackend(t, func(t *testing.T, rdb redis.UniversalClient) {
		ctx := context.Background()
		a := allocatortest.New(t, rdb)
		k := a.Keys()
		register(t, a, "gold", "g0")
		mustAllocate(t, a, "CA1", "")
		rdb.HSet(ctx, k.PodInfo("g0"), "unready", "1")
		rel, err := a.Release(ctx, "CA1")
		if err != nil || rel.ReleasedToPool {
			t.Fatalf("release = %+v, %v; want not returned", rel, err)
		}
		if rdb.SIsMember(ctx, k.PoolAvailable("gold"), "g0").Val() {
			t.Fatal("an unready pod went back to its pool")
		}
	})
}

// Renewals beyond one batch go in several scripts, answers in order.
func TestRenewManyBatches(t *testing.T) {
	ctx := context.Background()
	srv := testredis.Start(t)
	rdb := srv.Client()
	a := allocatortest.New(t, rdb)
	var pods []string
	for i := range 3 {
		pods = append(pods, "s"+itoa(i))
	}
	register(t, a, "basic", pods...) // 3 pods x 3 calls
	var leases []allocator.Lease
	for i := range 9 {
		al := mustAllocate(t, a, callID(i), "")
		leases = append(leases, allocator.Lease{CallID: al.CallID, PodName: al.PodName})
	}
	// Pad to more than two batches with calls that hold nothing.
	for i := len(leases); i < 2*allocator.RenewBatch+7; i++ {
		leases = append(leases, allocator.Lease{CallID: "CA-none-" + itoa(i), PodName: "s0"})
	}
	before := srv.CommandStats(ctx, rdb)["evalsha"]
	held, err := a.Renew(ctx, leases)
	if err != nil {
		t.Fatal(err)
	}
	if got := srv.CommandStats(ctx, rdb)["evalsha"] - before; got != 3 {
		t.Errorf("scripts = %d, want 3 for %d leases", got, len(leases))
	}
	for i, h := range held {
		if h != (i < 9) {
			t.Fatalf("held[%d] = %v", i, h)
		}
	}
	if len(held) != len(leases) {
		t.Fatalf("%d answers for %d leases", len(held), len(leases))
	}
}

// A leader that lost the Redis lock removes no pod.
func TestUnregisterIsFenced(t *testing.T) {
	forEachBackend(t, func(t *testing.T, rdb redis.UniversalClient) {
		ctx := context.Background()
		a := allocatortest.New(t, rdb)
		register(t, a, "gold", "g0")
		rdb.Set(ctx, a.Keys().LeaderLock(), "B/2", 0)
		if _, err := a.UnregisterPod(ctx, "A/1", "g0"); !errors.Is(err, allocator.ErrFenced) {
			t.Fatalf("stale leader: err = %v, want ErrFenced", err)
		}
		if _, err := a.PodInfo(ctx, "g0"); err != nil {
			t.Fatalf("the fenced call removed the pod: %v", err)
		}
		if _, err := a.UnregisterPod(ctx, "B/2", "g0"); err != nil {
			t.Fatalf("current leader: %v", err)
		}
	})
}
