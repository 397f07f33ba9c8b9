package allocator_test

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/edge-voice/edge/allocator"
	"github.com/edge-voice/edge/allocator/allocatortest"
	"github.com/edge-voice/edge/internal/testredis"
)

// A call's timeline is written by the scripts that already run: claim
// stamps the socket's opening, the release at the socket's end keeps its
// close and counters in the tombstone, which keeps the call info's fields
// but the media claim. An older edge's STRING tombstone still reads.
func TestCallTimeline(t *testing.T) {
	forEachBackend(t, func(t *testing.T, rdb redis.UniversalClient) {
		ctx := context.Background()
		a := allocatortest.New(t, rdb)
		k := a.Keys()
		register(t, a, "gold", "g0", "g1")
		if _, err := a.Allocate(ctx, allocator.Request{CallID: "CA-t", MerchantID: "m1", Creator: "provider:twilio"}); err != nil {
			t.Fatal(err)
		}
		tl, err := a.Timeline(ctx, "CA-t")
		if err != nil || tl.State != "live" || tl.MerchantID != "m1" || tl.Creator != "provider:twilio" ||
			tl.Pod == "" || tl.AllocatedAt.IsZero() || !tl.SocketOpenedAt.IsZero() || tl.Relayed != nil {
			t.Fatalf("live timeline before the socket = %+v, %v", tl, err)
		}
		c, err := a.ClaimMediaOn(ctx, "CA-t", tl.Pod, "replica-a/1", "replica-a")
		if err != nil || c.MerchantID != "m1" || c.Creator != "provider:twilio" || c.Pod != tl.Pod {
			t.Fatalf("claim = %+v, %v", c, err)
		}
		tl, _ = a.Timeline(ctx, "CA-t")
		if tl.SocketOpenedAt.IsZero() || tl.SocketReplica != "replica-a" {
			t.Fatalf("live timeline after the claim = %+v", tl)
		}
		closed := time.Now().Truncate(time.Millisecond)
		end := allocator.SocketEnd{Ended: "socket_close", ClosedBy: "client", CloseCode: "1000", Closed: closed,
			MessagesIn: 3, MessagesOut: 4, BytesIn: 30, BytesOut: 40}
		if _, err := a.ReleaseSocketEnd(ctx, "CA-t", end); err != nil {
			t.Fatal(err)
		}
		tl, err = a.Timeline(ctx, "CA-t")
		want := allocator.Relayed{MessagesIn: 3, MessagesOut: 4, BytesIn: 30, BytesOut: 40}
		if err != nil || tl.State != "ended" || tl.How != "released" || tl.ReleasedBy != "socket" ||
			tl.SocketEnd != "socket_close" || tl.ClosedBy != "client" || tl.CloseCode != "1000" ||
			!tl.SocketClosedAt.Equal(closed) || tl.EndedAt.IsZero() || tl.SocketReplica != "replica-a" ||
			tl.MerchantID != "m1" || tl.Pod == "" || tl.Relayed == nil || *tl.Relayed != want {
			t.Fatalf("ended timeline = %+v (relayed %+v), %v", tl, tl.Relayed, err)
		}
		if rdb.HExists(ctx, k.CallEnded("CA-t"), "media_claim").Val() {
			t.Error("the tombstone keeps the media claim")
		}
		// The tombstone still refuses a replay.
		if _, err := a.Allocate(ctx, allocator.Request{CallID: "CA-t"}); !errors.Is(err, allocator.ErrCallEnded) {
			t.Errorf("replay: %v, want ErrCallEnded", err)
		}

		if _, err := a.Timeline(ctx, "CA-never"); !errors.Is(err, allocator.ErrCallNotFound) {
			t.Errorf("unknown call: %v, want ErrCallNotFound", err)
		}
		if _, err := a.Timeline(ctx, "bad id!"); !errors.Is(err, allocator.ErrInvalidID) {
			t.Errorf("bad id: %v, want ErrInvalidID", err)
		}
		rdb.Set(ctx, k.CallEnded("CA-old"), "expired", time.Hour)
		if tl, err := a.Timeline(ctx, "CA-old"); err != nil || tl.How != "expired" || tl.State != "ended" {
			t.Errorf("older tombstone: %+v, %v", tl, err)
		}
		if _, err := a.Allocate(ctx, allocator.Request{CallID: "CA-old"}); !errors.Is(err, allocator.ErrCallEnded) {
			t.Errorf("replay over an older tombstone: %v, want ErrCallEnded", err)
		}
	})
}

// A pod's live calls: the one holding an exclusive pod, every call of a
// shared one.
func TestPodCalls(t *testing.T) {
	forEachBackend(t, func(t *testing.T, rdb redis.UniversalClient) {
		ctx := context.Background()
		a := allocatortest.New(t, rdb)
		register(t, a, "gold", "g0")
		register(t, a, "basic", "s0")
		ex := mustAllocate(t, a, "CA-1", "")
		mustAllocate(t, a, "CA-2", "")
		mustAllocate(t, a, "CA-3", "")
		if got, err := a.PodCalls(ctx, ex.PodName); err != nil || len(got) != 1 || got[0] != "CA-1" {
			t.Errorf("exclusive pod's calls = %v, %v", got, err)
		}
		if got, err := a.PodCalls(ctx, "s0"); err != nil || len(got) != 2 {
			t.Errorf("shared pod's calls = %v, %v", got, err)
		}
		if _, err := a.PodCalls(ctx, "nope"); !errors.Is(err, allocator.ErrPodNotFound) {
			t.Errorf("unknown pod: %v", err)
		}
	})
}

// The timeline's allocated_at had second precision (the predecessor's
// allocated_at field, unix seconds) beside socket times in milliseconds.
// The call info keeps allocated_at in seconds, for the predecessor, and
// adds allocated_at_ms, which the timeline reads: live and ended.
func TestTimelineAllocatedAtInMilliseconds(t *testing.T) {
	ctx := context.Background()
	rdb := testredis.Start(t).Client()
	a := allocatortest.New(t, rdb)
	register(t, a, "gold", "g0")
	before := time.Now().Truncate(time.Millisecond)
	if _, err := a.Allocate(ctx, allocator.Request{CallID: "CA-ms", MerchantID: "m1"}); err != nil {
		t.Fatal(err)
	}
	h := rdb.HGetAll(ctx, a.Keys().Call("CA-ms")).Val()
	ms, err := strconv.ParseInt(h["allocated_at_ms"], 10, 64)
	if err != nil {
		t.Fatalf("call info %v has no allocated_at_ms", h)
	}
	if secs, _ := strconv.ParseInt(h["allocated_at"], 10, 64); secs != ms/1000 {
		t.Fatalf("allocated_at %q is not the seconds of allocated_at_ms %d", h["allocated_at"], ms)
	}
	for _, when := range []string{"live", "ended"} {
		tl, err := a.Timeline(ctx, "CA-ms")
		if err != nil {
			t.Fatal(err)
		}
		if !tl.AllocatedAt.Equal(time.UnixMilli(ms)) || tl.AllocatedAt.Before(before) {
			t.Fatalf("%s timeline allocated_at = %v, want %v (ms)", when, tl.AllocatedAt, time.UnixMilli(ms))
		}
		if _, err := a.Release(ctx, "CA-ms"); err != nil && when == "live" {
			t.Fatal(err)
		}
	}
}
