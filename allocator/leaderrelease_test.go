package allocator_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/edge-voice/edge/allocator/allocatortest"
)

// Giving the Redis leader lock up is announced to subscribers, on a real
// Redis and on miniredis (the embedded dev mode runs the same script).
func TestLeaderLockReleaseIsAnnounced(t *testing.T) {
	forEachBackend(t, func(t *testing.T, rdb redis.UniversalClient) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		a := allocatortest.New(t, rdb)
		released := a.LeaderReleases(ctx)
		value, ok, err := a.AcquireLeaderLock(ctx, "edge-a", time.Minute)
		if err != nil || !ok {
			t.Fatalf("acquire: %v %v", ok, err)
		}
		if err := a.ReleaseLeaderLock(ctx, value); err != nil {
			t.Fatal(err)
		}
		select {
		case <-released:
		case <-time.After(5 * time.Second):
			t.Fatal("release not announced")
		}
	})
}
