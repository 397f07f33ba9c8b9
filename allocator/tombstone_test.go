package allocator_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/edge-voice/edge/allocator"
	"github.com/edge-voice/edge/allocator/allocatortest"
)

// An ended call stays ended: a late or replayed webhook for it, whichever
// way it ended, is refused (ErrCallEnded) and takes no pod, for the call
// info TTL.
func TestEndedCallIsNotAllocatedAgain(t *testing.T) {
	forEachBackend(t, func(t *testing.T, rdb redis.UniversalClient) {
		ctx := context.Background()
		a := allocatortest.New(t, rdb)
		k := a.Keys()
		register(t, a, "gold", "g0")
		register(t, a, "basic", "s0")

		ex := mustAllocate(t, a, "CA-ex", "")
		sh := mustAllocate(t, a, "CA-sh", "")
		if ex.PodName != "g0" || sh.PodName != "s0" {
			t.Fatalf("allocations = %+v, %+v", ex, sh)
		}
		// The exclusive call's pod was recovered and serves another call:
		// its release is stale, and still ends it.
		rdb.Del(ctx, k.Lease("g0"))
		rdb.HSet(ctx, k.PodInfo("g0"), "allocated_call_sid", "")
		rdb.SAdd(ctx, k.PoolAvailable("gold"), "g0")
		mustAllocate(t, a, "CA-next", "")
		if rel, err := a.Release(ctx, "CA-ex"); err != nil || !rel.Stale {
			t.Fatalf("release of CA-ex = %+v, %v; want stale", rel, err)
		}
		if _, err := a.Release(ctx, "CA-sh"); err != nil {
			t.Fatal(err)
		}
		if _, err := a.Release(ctx, "CA-next"); err != nil {
			t.Fatal(err)
		}
		// g0 and s0 are both free: only the tombstones stand between a
		// replay and a pod.
		for _, call := range []string{"CA-ex", "CA-sh", "CA-next"} {
			al, err := a.Allocate(ctx, allocator.Request{CallID: call, Creator: "provider:twilio"})
			if !errors.Is(err, allocator.ErrCallEnded) {
				t.Errorf("replayed allocate of %s = %+v, %v; want ErrCallEnded", call, al, err)
			}
			ttl := rdb.PTTL(ctx, k.CallEnded(call)).Val()
			if ttl <= 0 || ttl > time.Hour || ttl < 59*time.Minute {
				t.Errorf("tombstone of %s expires in %v, want the call info TTL (1h)", call, ttl)
			}
			if got := rdb.HGet(ctx, k.CallEnded(call), "how").Val(); got != "released" {
				t.Errorf("tombstone of %s = %q, want released", call, got)
			}
		}
		if n := rdb.Exists(ctx, k.Call("CA-ex"), k.Call("CA-sh"), k.Call("CA-next")).Val(); n != 0 {
			t.Errorf("a refused replay wrote %d call infos", n)
		}
		if !rdb.SIsMember(ctx, k.PoolAvailable("gold"), "g0").Val() {
			t.Error("g0 left its pool on a refused replay")
		}
		if got := rdb.ZScore(ctx, k.PoolAvailable("basic"), "s0").Val(); got != 0 {
			t.Errorf("s0 load = %v after refused replays, want 0", got)
		}
		// A release of the ended call is still "not found", and leaves the
		// tombstone as it was.
		if _, err := a.Release(ctx, "CA-ex"); !errors.Is(err, allocator.ErrCallNotFound) {
			t.Errorf("release of an ended call: %v, want not found", err)
		}
		// The tombstone lasts the call info TTL; past it the call's compact
		// mark keeps it ended for the ended TTL, and not for ever.
		expireNow(t, rdb, k.CallEnded("CA-ex"))
		if _, err := a.Allocate(ctx, allocator.Request{CallID: "CA-ex"}); !errors.Is(err, allocator.ErrCallEnded) {
			t.Errorf("allocate after the tombstone expired: %v, want ErrCallEnded (the mark)", err)
		}
		// A mark as old as the ended TTL (24h) is past.
		setMark(t, rdb, k, "CA-ex", "released", time.Now().Add(-24*time.Hour-time.Second))
		if al := mustAllocate(t, a, "CA-ex", ""); al.WasExisting {
			t.Errorf("after the mark expired: %+v, want a new allocation", al)
		}
	})
}

// Mixed mode with the predecessor: its release deletes the call info and
// writes no tombstone, so its ended calls can be allocated again (as before
// edge); a call it allocated again over a tombstone is live, and a repeat
// answers that allocation.
func TestTombstonesWithThePredecessor(t *testing.T) {
	forEachBackend(t, func(t *testing.T, rdb redis.UniversalClient) {
		ctx := context.Background()
		a := allocatortest.New(t, rdb)
		k := a.Keys()
		register(t, a, "gold", "g0", "g1", "g2")

		mustAllocate(t, a, "CA-old", "")
		rdb.Del(ctx, k.Call("CA-old")) // the predecessor's release, in short
		if _, err := a.Allocate(ctx, allocator.Request{CallID: "CA-old"}); err != nil {
			t.Errorf("allocate after the predecessor's release: %v, want a pod (no tombstone)", err)
		}

		mustAllocate(t, a, "CA-back", "")
		if _, err := a.Release(ctx, "CA-back"); err != nil {
			t.Fatal(err)
		}
		rdb.HSet(ctx, k.Call("CA-back"), "pod_name", "g2", "source_pool", "pool:gold") // predecessor's allocate
		al, err := a.Allocate(ctx, allocator.Request{CallID: "CA-back"})
		if err != nil || !al.WasExisting || al.PodName != "g2" || al.Creator != "" {
			t.Errorf("repeat of a call the predecessor allocated = %+v, %v; want g2 was_existing, no creator", al, err)
		}
	})
}

// The call's creator is stored with it and returned on every repeat, so
// that the caller can refuse a stranger the call's media URL.
func TestCreatorReturnedOnRepeat(t *testing.T) {
	forEachBackend(t, func(t *testing.T, rdb redis.UniversalClient) {
		ctx := context.Background()
		a := allocatortest.New(t, rdb)
		k := a.Keys()
		register(t, a, "gold", "g0")

		first, err := a.Allocate(ctx, allocator.Request{CallID: "CA1", Creator: "provider:twilio"})
		if err != nil || first.WasExisting || first.Creator != "provider:twilio" {
			t.Fatalf("first allocate = %+v, %v", first, err)
		}
		if got := rdb.HGet(ctx, k.Call("CA1"), "creator").Val(); got != "provider:twilio" {
			t.Errorf("stored creator = %q", got)
		}
		for _, asker := range []string{"token:mallory", "", "provider:twilio"} {
			again, err := a.Allocate(ctx, allocator.Request{CallID: "CA1", Creator: asker})
			if err != nil || !again.WasExisting || again.Creator != "provider:twilio" {
				t.Errorf("repeat by %q = %+v, %v; want was_existing with creator provider:twilio", asker, again, err)
			}
		}
		if c, err := a.Call(ctx, "CA1"); err != nil || c.Creator != "provider:twilio" {
			t.Errorf("call info = %+v, %v", c, err)
		}
		long := allocator.Request{CallID: "CA2", Creator: strings.Repeat("x", allocator.MaxCreatorLength+1)}
		if _, err := a.Allocate(ctx, long); !errors.Is(err, allocator.ErrInvalidID) {
			t.Errorf("oversized creator: %v, want ErrInvalidID", err)
		}
		if n := rdb.Exists(ctx, k.Call("CA2")).Val(); n != 0 {
			t.Error("a refused creator wrote call info")
		}
	})
}
