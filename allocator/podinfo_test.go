package allocator_test

import (
	"context"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/edge-voice/edge/allocator/allocatortest"
)

// A failed read inside PodInfo's pipeline is an error, not an empty field,
// even when an earlier read found nothing (a pod with no lease).
func TestPodInfoReadErrorIsNotMissing(t *testing.T) {
	forEachBackend(t, func(t *testing.T, rdb redis.UniversalClient) {
		ctx := context.Background()
		a := allocatortest.New(t, rdb)
		k := a.Keys()
		register(t, a, "basic", "b0")
		rdb.Set(ctx, k.PodCalls("b0"), "not a zset", 0) // ZRANGE fails with WRONGTYPE
		info, err := a.PodInfo(ctx, "b0")
		if err == nil {
			t.Fatalf("PodInfo = %+v, nil; want the ZRANGE error", info)
		}
	})
}
