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

// expireNow makes key expire and waits until Redis has dropped it, as it
// would once its TTL ran out.
func expireNow(t *testing.T, rdb redis.UniversalClient, key string) {
	t.Helper()
	ctx := context.Background()
	rdb.PExpire(ctx, key, time.Millisecond)
	deadline := time.Now().Add(5 * time.Second)
	for rdb.Exists(ctx, key).Val() == 1 {
		if time.Now().After(deadline) {
			t.Fatalf("%s did not expire", key)
		}
		time.Sleep(2 * time.Millisecond) // polling an expiry, not synchronising goroutines
	}
}

// endedHow is the code of how in a mark's score (keys.go's EndedMarks).
var endedHow = map[string]int64{"released": 1, "expired": 2, "unregistered": 3}

// markOf is how callID ended and when, by its compact mark; ok false when
// it has none.
func markOf(t *testing.T, rdb redis.UniversalClient, k allocator.Keys, callID string) (how string, at time.Time, ok bool) {
	t.Helper()
	score, err := rdb.ZScore(context.Background(), k.EndedMarksOf(callID), callID).Result()
	if errors.Is(err, redis.Nil) {
		return "", time.Time{}, false
	}
	if err != nil {
		t.Fatal(err)
	}
	n := int64(score)
	for name, code := range endedHow {
		if n%4 == code {
			how = name
		}
	}
	return how, time.UnixMilli(n / 4), true
}

// setMark writes callID's compact mark as if it had ended at at.
func setMark(t *testing.T, rdb redis.UniversalClient, k allocator.Keys, callID, how string, at time.Time) {
	t.Helper()
	score := float64(at.UnixMilli()*4 + endedHow[how])
	if err := rdb.ZAdd(context.Background(), k.EndedMarksOf(callID), redis.Z{Score: score, Member: callID}).Err(); err != nil {
		t.Fatal(err)
	}
}

// A call stays ended for the providers' whole retry horizon
// (allocator.ended_ttl), not only while its record (the call info TTL)
// lives: a signed webhook replayed after the record expired allocated the
// call again.
func TestEndedCallStaysEndedPastItsRecord(t *testing.T) {
	forEachBackend(t, func(t *testing.T, rdb redis.UniversalClient) {
		ctx := context.Background()
		a := allocatortest.New(t, rdb)
		k := a.Keys()
		register(t, a, "gold", "g0")
		register(t, a, "basic", "s0")
		mustAllocate(t, a, "CA-rel", "")
		mustAllocate(t, a, "CA-swept", "")
		if _, err := a.Release(ctx, "CA-rel"); err != nil {
			t.Fatal(err)
		}
		// CA-swept dies without a release: the sweep ends it.
		rdb.ZAdd(ctx, k.PodCalls("s0"), redis.Z{Score: 1, Member: "CA-swept"})
		if res, err := a.SweepPods(ctx, "", []string{"g0", "s0"}); err != nil || res.CallsExpired != 1 {
			t.Fatalf("sweep = %+v, %v; want one call expired", res, err)
		}
		for call, how := range map[string]string{"CA-rel": "released", "CA-swept": "expired"} {
			got, at, ok := markOf(t, rdb, k, call)
			if !ok || got != how || time.Since(at).Abs() > 5*time.Second {
				t.Errorf("mark of %s = %q at %v (%v), want %q now", call, got, at, ok, how)
			}
			expireNow(t, rdb, k.CallEnded(call))
			al, err := a.Allocate(ctx, allocator.Request{CallID: call, Creator: "provider:twilio"})
			if !errors.Is(err, allocator.ErrCallEnded) {
				t.Errorf("replay of %s after its record expired = %+v, %v; want ErrCallEnded", call, al, err)
			}
		}
		if n := rdb.Exists(ctx, k.Call("CA-rel"), k.Call("CA-swept")).Val(); n != 0 {
			t.Errorf("refused replays wrote %d call infos", n)
		}
	})
}

// allocate reads the marks of the whole ended TTL, and none older: a mark from three hours ago refuses its call under the default
// 24h, a mark from five hours ago does not under a 4h ended TTL; an
// unregistered pod's calls are marked too.
func TestEndedMarksSpanTheEndedTTL(t *testing.T) {
	forEachBackend(t, func(t *testing.T, rdb redis.UniversalClient) {
		ctx := context.Background()
		a := allocatortest.New(t, rdb)
		k := a.Keys()
		register(t, a, "gold", "g0", "g1")
		now := time.Now()
		setMark(t, rdb, k, "CA-3h", "released", now.Add(-3*time.Hour))
		setMark(t, rdb, k, "CA-5h", "expired", now.Add(-5*time.Hour))
		if _, err := a.Allocate(ctx, allocator.Request{CallID: "CA-3h"}); !errors.Is(err, allocator.ErrCallEnded) {
			t.Errorf("a call marked 3h ago: %v, want ErrCallEnded", err)
		}
		cfg := a.Config()
		cfg.EndedTTL = 4 * time.Hour
		a.Apply(cfg)
		if _, err := a.Allocate(ctx, allocator.Request{CallID: "CA-5h"}); err != nil {
			t.Errorf("a call marked 5h ago under a 4h ended TTL: %v, want a pod", err)
		}

		al := mustAllocate(t, a, "CA-unreg", "")
		if u, err := a.UnregisterPod(ctx, "", al.PodName); err != nil || u.CallsEnded != 1 {
			t.Fatalf("unregister %s = %+v, %v; want its call ended", al.PodName, u, err)
		}
		expireNow(t, rdb, k.CallEnded("CA-unreg"))
		if _, err := a.Allocate(ctx, allocator.Request{CallID: "CA-unreg"}); !errors.Is(err, allocator.ErrCallEnded) {
			t.Errorf("a call of an unregistered pod, past its record: %v, want ErrCallEnded", err)
		}
	})
}
