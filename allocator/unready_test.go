package allocator_test

import (
	"context"
	"errors"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/edge-voice/edge/allocator"
	"github.com/edge-voice/edge/allocator/allocatortest"
)

// A pod the source reports not ready (e.g. terminating) takes no new call,
// even if something put it back into its available pool before the next
// sweep (a predecessor replica's release during the cutover).
func TestAllocateSkipsUnreadyPodsPutBack(t *testing.T) {
	forEachBackend(t, func(t *testing.T, rdb redis.UniversalClient) {
		ctx := context.Background()
		a := allocatortest.New(t, rdb)
		k := a.Keys()
		mustSync(t, a,
			allocator.PodState{Name: "g0", Address: "127.0.0.1:1", Tier: "gold", Ready: true},
			allocator.PodState{Name: "b0", Address: "127.0.0.1:1", Tier: "basic", Ready: true})
		mustSync(t, a, allocator.PodState{Name: "g0", Tier: "gold"}, allocator.PodState{Name: "b0", Tier: "basic"})
		rdb.SAdd(ctx, k.PoolAvailable("gold"), "g0")
		rdb.ZAdd(ctx, k.PoolAvailable("basic"), redis.Z{Score: 0, Member: "b0"})
		al, err := a.Allocate(ctx, allocator.Request{CallID: "CA1"})
		if !errors.Is(err, allocator.ErrNoCapacity) {
			t.Fatalf("allocate = %+v, %v; want no capacity (every pod unready)", al, err)
		}
	})
}
