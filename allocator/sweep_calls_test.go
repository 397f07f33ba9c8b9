package allocator_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/edge-voice/edge/allocator"
	"github.com/edge-voice/edge/allocator/allocatortest"
)

// A call the sweep found dead is over everywhere: its call info is gone, so
// its late release answers not found, a retry of its webhook gets a hangup
// (ErrCallEnded) rather than a pod, and nothing can admit its socket to the
// pod's next call.
func TestSweepEndsDeadCalls(t *testing.T) {
	forEachBackend(t, func(t *testing.T, rdb redis.UniversalClient) {
		ctx := context.Background()
		a := allocatortest.New(t, rdb)
		k := a.Keys()
		register(t, a, "gold", "g0")
		register(t, a, "basic", "s0")
		mustAllocate(t, a, "CA-ex", "")
		mustAllocate(t, a, "CA-sh", "")
		mustAllocate(t, a, "CA-live", "") // s0, stays live
		// Both dead calls' leases run out.
		rdb.Del(ctx, k.Lease("g0"))
		rdb.ZAdd(ctx, k.PodCalls("s0"), redis.Z{Score: 1, Member: "CA-sh"})

		res, err := a.SweepPods(ctx, "", []string{"g0", "s0"})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Recovered) != 1 || res.CallsExpired != 1 {
			t.Fatalf("sweep = %+v, want g0 recovered and one shared call expired", res)
		}
		// Both ended calls are named, for the sweep's log line.
		if got := strings.Join(res.Recovered, ",") + " " + strings.Join(res.CallsEnded, ","); got != "g0 CA-sh,CA-ex" && got != "g0 CA-ex,CA-sh" {
			t.Errorf("recovered pods and ended calls = %q, want g0 and CA-ex, CA-sh", got)
		}
		for _, call := range []string{"CA-ex", "CA-sh"} {
			if _, err := a.Call(ctx, call); !errors.Is(err, allocator.ErrCallNotFound) {
				t.Errorf("%s after the sweep: err = %v, want not found", call, err)
			}
			if _, err := a.Release(ctx, call); !errors.Is(err, allocator.ErrCallNotFound) {
				t.Errorf("late release of %s: err = %v, want not found", call, err)
			}
		}
		if _, err := a.Call(ctx, "CA-live"); err != nil {
			t.Errorf("the live shared call lost its info: %v", err)
		}
		if got := rdb.ZScore(ctx, k.PoolAvailable("basic"), "s0").Val(); got != 1 {
			t.Errorf("s0 load = %v, want 1", got)
		}
		// A webhook retry of a dead call gets no pod, old or new.
		for _, call := range []string{"CA-ex", "CA-sh"} {
			if al, err := a.Allocate(ctx, allocator.Request{CallID: call}); !errors.Is(err, allocator.ErrCallEnded) {
				t.Errorf("retry of swept %s: %+v, %v; want ErrCallEnded", call, al, err)
			}
			if got := rdb.HGet(ctx, k.CallEnded(call), "how").Val(); got != "expired" {
				t.Errorf("tombstone of %s = %q, want expired", call, got)
			}
		}
	})
}
