package allocator_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/edge-voice/edge/allocator"
	"github.com/edge-voice/edge/allocator/allocatortest"
)

// A provider's end of a call whose media socket never opened releases it at
// once: the pod is back in its pool, and the tombstone, which names the
// event, refuses a late socket and a replayed webhook. A duplicate or a
// later event changes nothing.
func TestProviderEndReleasesACallWithoutSocket(t *testing.T) {
	forEachBackend(t, func(t *testing.T, rdb redis.UniversalClient) {
		ctx := context.Background()
		a := allocatortest.New(t, rdb)
		k := a.Keys()
		register(t, a, "gold", "g0")
		if _, err := a.Allocate(ctx, allocator.Request{CallID: "CA-hup", Creator: "provider:twilio"}); err != nil {
			t.Fatal(err)
		}
		end, err := a.EndByProvider(ctx, "CA-hup", "provider:twilio", "", "completed")
		if err != nil || end.SocketOpen || !end.Released.ReleasedToPool || end.Released.PodName != "g0" {
			t.Fatalf("EndByProvider = %+v, %v; want g0 released to its pool", end, err)
		}
		if !rdb.SIsMember(ctx, k.PoolAvailable("gold"), "g0").Val() {
			t.Error("g0 is not back in its pool")
		}
		tl, err := a.Timeline(ctx, "CA-hup")
		if err != nil || tl.State != "ended" || tl.ReleasedBy != "provider" || tl.EndedBy != "provider:completed" || tl.ProviderEndedAt.IsZero() {
			t.Errorf("timeline = %+v, %v; want ended, released_by provider, ended_by provider:completed", tl, err)
		}
		if _, err := a.ClaimMedia(ctx, "CA-hup", "g0", "late-socket"); err == nil {
			t.Error("a late socket claimed the ended call")
		}
		if _, err := a.Allocate(ctx, allocator.Request{CallID: "CA-hup", Creator: "provider:twilio"}); !errors.Is(err, allocator.ErrCallEnded) {
			t.Errorf("replayed webhook: %v, want ErrCallEnded", err)
		}
		before := dumpKeys(t, rdb, k.CallEnded("CA-hup"), k.PoolAvailable("gold"), k.PodInfo("g0"))
		for _, ev := range []string{"completed", "stream-stopped"} {
			if _, err := a.EndByProvider(ctx, "CA-hup", "provider:twilio", "", ev); !errors.Is(err, allocator.ErrCallNotFound) {
				t.Errorf("repeated end (%s): %v, want ErrCallNotFound", ev, err)
			}
		}
		if after := dumpKeys(t, rdb, k.CallEnded("CA-hup"), k.PoolAvailable("gold"), k.PodInfo("g0")); !equalDumps(before, after) {
			t.Error("a repeated end changed the record or the pool")
		}
	})
}

// With the socket open, a provider's end releases nothing (the socket ends
// the call on the provider's close): the call keeps the first event, its
// lease is renewed no more (so a socket never closed still ends at the next
// renewal), a replayed webhook is refused, and the socket's release keeps
// who ended it in the record.
func TestProviderEndWithSocketOpenMarksTheCall(t *testing.T) {
	forEachBackend(t, func(t *testing.T, rdb redis.UniversalClient) {
		ctx := context.Background()
		a := allocatortest.New(t, rdb)
		k := a.Keys()
		register(t, a, "gold", "g0")
		if _, err := a.Allocate(ctx, allocator.Request{CallID: "CA-live", Creator: "provider:twilio"}); err != nil {
			t.Fatal(err)
		}
		if _, err := a.ClaimMedia(ctx, "CA-live", "g0", "socket-1"); err != nil {
			t.Fatal(err)
		}
		for _, ev := range []string{"stream-stopped", "completed"} {
			end, err := a.EndByProvider(ctx, "CA-live", "provider:twilio", "", ev)
			if err != nil || !end.SocketOpen || end.Released.PodName != "" {
				t.Fatalf("EndByProvider(%s) = %+v, %v; want SocketOpen and nothing released", ev, end, err)
			}
		}
		if rdb.SIsMember(ctx, k.PoolAvailable("gold"), "g0").Val() {
			t.Fatal("g0 went back to its pool under an open socket")
		}
		tl, err := a.Timeline(ctx, "CA-live")
		if err != nil || tl.State != "live" || tl.EndedBy != "provider:stream-stopped" {
			t.Errorf("timeline = %+v, %v; want live, ended_by the first event", tl, err)
		}
		held, err := a.Renew(ctx, []allocator.Lease{{CallID: "CA-live", PodName: "g0", Holder: "socket-1"}})
		if err != nil || len(held) != 1 || held[0] {
			t.Errorf("renew = %v, %v; want not renewed", held, err)
		}
		if _, err := a.Allocate(ctx, allocator.Request{CallID: "CA-live", Creator: "provider:twilio"}); !errors.Is(err, allocator.ErrCallEnded) {
			t.Errorf("replayed webhook: %v, want ErrCallEnded", err)
		}
		if _, err := a.ReleaseSocketEnd(ctx, "CA-live", allocator.SocketEnd{Ended: "socket_close", ClosedBy: "client"}); err != nil {
			t.Fatal(err)
		}
		tl, err = a.Timeline(ctx, "CA-live")
		if err != nil || tl.State != "ended" || tl.ReleasedBy != "socket" || tl.EndedBy != "provider:stream-stopped" {
			t.Errorf("timeline after the socket's end = %+v, %v", tl, err)
		}
		if !rdb.SIsMember(ctx, k.PoolAvailable("gold"), "g0").Val() {
			t.Error("g0 is not back in its pool after the socket's end")
		}
	})
}

// A provider's callback ends only its own calls: another provider's (or
// the generic API's) call of the same id is left as it is.
func TestProviderEndSparesAnotherCreatorsCall(t *testing.T) {
	forEachBackend(t, func(t *testing.T, rdb redis.UniversalClient) {
		ctx := context.Background()
		a := allocatortest.New(t, rdb)
		k := a.Keys()
		register(t, a, "gold", "g0")
		if _, err := a.Allocate(ctx, allocator.Request{CallID: "CA-other", Creator: "token:crm"}); err != nil {
			t.Fatal(err)
		}
		before := dumpKeys(t, rdb, k.Call("CA-other"), k.PodInfo("g0"), k.Lease("g0"))
		if _, err := a.EndByProvider(ctx, "CA-other", "provider:twilio", "", "completed"); !errors.Is(err, allocator.ErrCallNotFound) {
			t.Errorf("end of another creator's call: %v, want ErrCallNotFound", err)
		}
		if after := dumpKeys(t, rdb, k.Call("CA-other"), k.PodInfo("g0"), k.Lease("g0")); !equalDumps(before, after) {
			t.Error("another creator's call was changed")
		}
		if _, err := a.EndByProvider(ctx, "CA-other", "provider:twilio", "", "bad event!"); !errors.Is(err, allocator.ErrInvalidID) {
			t.Errorf("an event unfit for the record: %v, want ErrInvalidID", err)
		}
	})
}

func dumpKeys(t *testing.T, rdb redis.UniversalClient, keys ...string) []string {
	t.Helper()
	out := make([]string, len(keys))
	for i, key := range keys {
		out[i] = rdb.Dump(context.Background(), key).Val()
	}
	return out
}

func equalDumps(a, b []string) bool {
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return len(a) == len(b)
}

// A caller who hangs up while the call waits for capacity (admission.wait):
// the wait ends at the provider's callback, and the waiting webhook is
// refused at once (woken) instead of given the pod freed later; the pod
// stays free for others.
func TestProviderEndOfAWaitingCall(t *testing.T) {
	forEachBackend(t, func(t *testing.T, rdb redis.UniversalClient) {
		ctx := context.Background()
		a := waitingAllocator(t, rdb, 30*time.Second, nil, onePodTiers)
		k := a.Keys()
		register(t, a, "standard", "p0")
		if _, err := a.Allocate(ctx, allocator.Request{CallID: "CA-holder", Creator: "provider:twilio"}); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() {
			_, err := a.Allocate(ctx, allocator.Request{CallID: "CA-waiting", Creator: "provider:twilio"})
			done <- err
		}()
		awaitWaiters(t, rdb, a, 1)

		// Another provider's callback of the same id ends nothing.
		if _, err := a.EndByProvider(ctx, "CA-waiting", "provider:plivo", "", "hangup"); !errors.Is(err, allocator.ErrCallNotFound) {
			t.Fatalf("another provider's end of a waiting call: %v, want ErrCallNotFound", err)
		}
		end, err := a.EndByProvider(ctx, "CA-waiting", "provider:twilio", "", "canceled")
		if err != nil || !end.Unwaited {
			t.Fatalf("EndByProvider of a waiting call = %+v, %v; want Unwaited", end, err)
		}
		select {
		case err := <-done:
			if !errors.Is(err, allocator.ErrCallEnded) {
				t.Errorf("the waiting webhook: %v, want ErrCallEnded", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("the waiting webhook was not woken by its call's end")
		}
		if n := waiters(t, rdb, a); n != 0 {
			t.Errorf("%d calls still queued", n)
		}
		if _, err := a.Release(ctx, "CA-holder"); err != nil {
			t.Fatal(err)
		}
		if !rdb.SIsMember(ctx, k.PoolAvailable("standard"), "p0").Val() {
			t.Error("p0 did not stay free for others")
		}
		tl, err := a.Timeline(ctx, "CA-waiting")
		if err != nil || tl.State != "ended" || tl.ReleasedBy != "provider" || tl.EndedBy != "provider:canceled" {
			t.Errorf("timeline = %+v, %v", tl, err)
		}
		if _, err := a.Allocate(ctx, allocator.Request{CallID: "CA-waiting", Creator: "provider:twilio"}); !errors.Is(err, allocator.ErrCallEnded) {
			t.Errorf("a retry of the webhook: %v, want ErrCallEnded", err)
		}
		checkNoWaitKeys(t, rdb, k)
	})
}
