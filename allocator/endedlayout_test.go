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

// A rolling upgrade: marks an older edge wrote in its layout (an hourly
// hash per shard, Keys.EndedCalls) keep refusing replays until they
// expire, on a replica that has not looked for them yet and on one that
// has (through Keys.EndedLegacy, which lasts as long as the newest of
// them); once they are gone, the call is no longer refused.
func TestMarksOfTheLayoutBeforeRefuseReplaysUntilTheyExpire(t *testing.T) {
	forEachBackend(t, func(t *testing.T, rdb redis.UniversalClient) {
		ctx := context.Background()
		fresh := allocatortest.New(t, rdb)
		k := fresh.Keys()
		register(t, fresh, "gold", "g0")
		// The older edge's mark_ended, two hours ago.
		at := time.Now().Add(-2 * time.Hour)
		old := k.EndedCallsOf("CA-old", at)
		hour := allocator.EndedBucket.Milliseconds()
		expires := time.UnixMilli((at.UnixMilli()/hour+1)*hour + (24 * time.Hour).Milliseconds())
		rdb.HSet(ctx, old, "CA-old", "released")
		rdb.PExpireAt(ctx, old, expires)

		if _, err := fresh.Allocate(ctx, allocator.Request{CallID: "CA-old"}); !errors.Is(err, allocator.ErrCallEnded) {
			t.Fatalf("replay on a replica that never looked: %v, want ErrCallEnded", err)
		}
		// A replica whose beats turned through the ended TTL (24 h: 25
		// hours, one a beat).
		looked := allocatortest.New(t, rdb)
		for range 25 {
			if _, err := looked.Heartbeat(ctx, "r2"); err != nil {
				t.Fatal(err)
			}
		}
		ttl := rdb.PTTL(ctx, k.EndedLegacy()).Val()
		if want := time.Until(expires) + time.Minute; ttl < want-5*time.Second || ttl > want+5*time.Second {
			t.Errorf("%s lasts %v, want %v (the old hash's expiry and a minute)", k.EndedLegacy(), ttl, want)
		}
		if _, err := looked.Allocate(ctx, allocator.Request{CallID: "CA-old"}); !errors.Is(err, allocator.ErrCallEnded) {
			t.Fatalf("replay on a replica that looked: %v, want ErrCallEnded", err)
		}
		if n := rdb.Exists(ctx, k.Call("CA-old")).Val(); n != 0 {
			t.Fatal("a refused replay wrote the call info")
		}

		// Both expire: the call is no longer refused.
		expireNow(t, rdb, old)
		expireNow(t, rdb, k.EndedLegacy())
		if al := mustAllocate(t, looked, "CA-old", ""); al.PodName != "g0" {
			t.Fatalf("after the old marks expired: %+v, want g0", al)
		}
	})
}

// A replica whose beats turned through the ended TTL and found no mark of
// the layout before leaves Keys.EndedLegacy alone, so that allocations
// look up one mark.
func TestNoMarksOfTheLayoutBeforeNoLegacyKey(t *testing.T) {
	ctx := context.Background()
	rdb := backends[0].open(t)
	a := allocatortest.New(t, rdb)
	for range 25 {
		if _, err := a.Heartbeat(ctx, "r1"); err != nil {
			t.Fatal(err)
		}
	}
	if n := rdb.Exists(ctx, a.Keys().EndedLegacy()).Val(); n != 0 {
		t.Fatalf("%s exists with no mark of the layout before", a.Keys().EndedLegacy())
	}
}

// Marks of ended calls have no TTL: the replicas' beats drop the marks
// past the ended TTL from every set within one turn through them (1,024
// beats), so that a deployment no call ends in any more does not keep a
// day of marks for ever; a mark within the TTL stays and still refuses
// its call.
func TestBeatsDropMarksPastTheEndedTTL(t *testing.T) {
	ctx := context.Background()
	rdb := backends[0].open(t)
	a := allocatortest.New(t, rdb)
	k := a.Keys()
	register(t, a, "gold", "g0")
	// As release.lua writes them: the end in unix ms times 4, plus 1
	// (released).
	score := func(ended time.Time) float64 { return float64(ended.UnixMilli()*4 + 1) }
	rdb.ZAdd(ctx, k.EndedMarksOf("CA-old"), redis.Z{Score: score(time.Now().Add(-25 * time.Hour)), Member: "CA-old"})
	rdb.ZAdd(ctx, k.EndedMarksOf("CA-recent"), redis.Z{Score: score(time.Now().Add(-time.Hour)), Member: "CA-recent"})
	for range allocator.EndedMarkShards / 16 {
		if _, err := a.Heartbeat(ctx, "r1"); err != nil {
			t.Fatal(err)
		}
	}
	if err := rdb.ZScore(ctx, k.EndedMarksOf("CA-old"), "CA-old").Err(); !errors.Is(err, redis.Nil) {
		t.Errorf("a mark 25 hours old is still there after a turn of beats: %v", err)
	}
	if _, err := a.Allocate(ctx, allocator.Request{CallID: "CA-recent"}); !errors.Is(err, allocator.ErrCallEnded) {
		t.Errorf("a call ended an hour ago: %v, want ErrCallEnded", err)
	}
}
