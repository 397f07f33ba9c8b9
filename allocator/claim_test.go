package allocator_test

import (
	"context"
	"errors"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/edge-voice/edge/allocator"
	"github.com/edge-voice/edge/allocator/allocatortest"
)

// One media socket per call, whichever replica it reaches: the claim admits
// the first holder only, only on the call's pod, only while the call lives;
// renewal keeps the call alive for the holder alone; the claim is dropped
// by its holder only, and ends with the call.
func TestMediaClaim(t *testing.T) {
	forEachBackend(t, func(t *testing.T, rdb redis.UniversalClient) {
		ctx := context.Background()
		a := allocatortest.New(t, rdb)
		register(t, a, "gold", "g0", "g1")
		pod := mustAllocate(t, a, "CA1", "").PodName
		other := map[string]string{"g0": "g1", "g1": "g0"}[pod]
		const first, second = "replica-a/1", "replica-b/7"

		if _, err := a.ClaimMedia(ctx, "CA1", other, first); !errors.Is(err, allocator.ErrCallNotFound) {
			t.Fatalf("claim on the wrong pod: %v, want ErrCallNotFound", err)
		}
		if _, err := a.ClaimMedia(ctx, "CA-none", pod, first); !errors.Is(err, allocator.ErrCallNotFound) {
			t.Fatalf("claim of an unknown call: %v, want ErrCallNotFound", err)
		}
		if _, err := a.ClaimMedia(ctx, "CA1", pod, first); err != nil {
			t.Fatalf("first claim: %v", err)
		}
		if _, err := a.ClaimMedia(ctx, "CA1", pod, first); err != nil {
			t.Fatalf("the holder claiming again: %v", err)
		}
		if _, err := a.ClaimMedia(ctx, "CA1", pod, second); !errors.Is(err, allocator.ErrMediaClaimed) {
			t.Fatalf("second socket's claim: %v, want ErrMediaClaimed", err)
		}
		if c, _ := a.Call(ctx, "CA1"); c.MediaClaim != first {
			t.Errorf("call info media claim = %q, want %q", c.MediaClaim, first)
		}

		held, err := a.Renew(ctx, []allocator.Lease{
			{CallID: "CA1", PodName: pod, Holder: first},
			{CallID: "CA1", PodName: pod, Holder: second},
			{CallID: "CA1", PodName: pod},
		})
		if err != nil {
			t.Fatal(err)
		}
		if want := []bool{true, false, true}; !equal(held, want) {
			t.Errorf("renew by holder, stranger, unchecked = %v, want %v", held, want)
		}

		if dropped, err := a.DropMediaClaim(ctx, "CA1", second); err != nil || dropped {
			t.Fatalf("a stranger dropping the claim = %v, %v; want left alone", dropped, err)
		}
		if dropped, err := a.DropMediaClaim(ctx, "CA1", first); err != nil || !dropped {
			t.Fatalf("the holder dropping its claim = %v, %v", dropped, err)
		}
		if held, _ := a.Renew(ctx, []allocator.Lease{{CallID: "CA1", PodName: pod, Holder: first}}); held[0] {
			t.Error("a socket that dropped its claim still renewed the call")
		}
		if _, err := a.Call(ctx, "CA1"); err != nil {
			t.Fatalf("dropping the claim ended the call: %v", err)
		}
		if _, err := a.ClaimMedia(ctx, "CA1", pod, second); err != nil {
			t.Fatalf("claim after the first holder dropped it: %v", err)
		}

		if _, err := a.Release(ctx, "CA1"); err != nil {
			t.Fatal(err)
		}
		if _, err := a.ClaimMedia(ctx, "CA1", pod, second); !errors.Is(err, allocator.ErrCallNotFound) {
			t.Errorf("claim after release: %v, want ErrCallNotFound", err)
		}
		if dropped, err := a.DropMediaClaim(ctx, "CA1", second); err != nil || dropped {
			t.Errorf("drop after release = %v, %v; want nothing to drop", dropped, err)
		}
		if _, err := a.ClaimMedia(ctx, "CA1", pod, ""); !errors.Is(err, allocator.ErrInvalidID) {
			t.Errorf("claim without a holder: %v, want ErrInvalidID", err)
		}
	})
}

// A replica killed with -9 never drops its socket's claim: the claim ends
// with the call, when its lease runs out and the sweep ends it.
func TestClaimOfADeadReplicaEndsWithTheCall(t *testing.T) {
	forEachBackend(t, func(t *testing.T, rdb redis.UniversalClient) {
		ctx := context.Background()
		a := allocatortest.New(t, rdb)
		k := a.Keys()
		register(t, a, "gold", "g0")
		mustAllocate(t, a, "CA1", "")
		if _, err := a.ClaimMedia(ctx, "CA1", "g0", "dead-replica/1"); err != nil {
			t.Fatal(err)
		}
		rdb.Del(ctx, k.Lease("g0")) // nobody renews: the lease runs out
		if res, err := a.SweepPods(ctx, "", []string{"g0"}); err != nil || len(res.Recovered) != 1 {
			t.Fatalf("sweep = %+v, %v", res, err)
		}
		if _, err := a.ClaimMedia(ctx, "CA1", "g0", "live-replica/1"); !errors.Is(err, allocator.ErrCallNotFound) {
			t.Errorf("claim after the sweep: %v, want ErrCallNotFound (the call ended)", err)
		}
	})
}

// A socket that reached no pod and leaves its call to the provider's retry
// drops its claim and counts the failure: the next claim, from any
// replica, sees it. A stranger's drop counts nothing. If no retry comes,
// the call's lease runs out and the sweep ends the call.
func TestFailedMediaClaimIsCountedAndEndsWithTheLease(t *testing.T) {
	forEachBackend(t, func(t *testing.T, rdb redis.UniversalClient) {
		ctx := context.Background()
		a := allocatortest.New(t, rdb)
		register(t, a, "gold", "g0")
		mustAllocate(t, a, "CA1", "")
		c, err := a.ClaimMediaOn(ctx, "CA1", "g0", "replica-a/1", "replica-a")
		if err != nil || c.FailedHandshakes != 0 {
			t.Fatalf("first claim = %+v, %v; want no failed handshake", c, err)
		}
		if dropped, err := a.DropFailedMediaClaim(ctx, "CA1", "replica-b/9"); err != nil || dropped {
			t.Fatalf("a stranger's failed drop = %v, %v; want left alone", dropped, err)
		}
		if dropped, err := a.DropFailedMediaClaim(ctx, "CA1", "replica-a/1"); err != nil || !dropped {
			t.Fatalf("the holder's failed drop = %v, %v", dropped, err)
		}
		c, err = a.ClaimMediaOn(ctx, "CA1", "g0", "replica-b/1", "replica-b")
		if err != nil || c.FailedHandshakes != 1 {
			t.Fatalf("the retry's claim = %+v, %v; want FailedHandshakes 1", c, err)
		}
		if _, err := a.DropMediaClaim(ctx, "CA1", "replica-b/1"); err != nil {
			t.Fatal(err)
		}
		if c, _ := a.ClaimMediaOn(ctx, "CA1", "g0", "replica-b/2", "replica-b"); c.FailedHandshakes != 1 {
			t.Errorf("after a plain drop FailedHandshakes = %d, want still 1", c.FailedHandshakes)
		}
		if _, err := a.DropFailedMediaClaim(ctx, "CA1", "replica-b/2"); err != nil {
			t.Fatal(err)
		}

		rdb.Del(ctx, a.Keys().Lease("g0")) // no retry came: the lease runs out
		if res, err := a.SweepPods(ctx, "", []string{"g0"}); err != nil || len(res.Recovered) != 1 {
			t.Fatalf("sweep = %+v, %v", res, err)
		}
		if _, err := a.ClaimMedia(ctx, "CA1", "g0", "replica-c/1"); !errors.Is(err, allocator.ErrCallNotFound) {
			t.Errorf("claim after the sweep: %v, want ErrCallNotFound (the call ended)", err)
		}
	})
}
