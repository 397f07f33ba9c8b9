package allocator_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/edge-voice/edge/allocator"
	"github.com/edge-voice/edge/allocator/allocatortest"
	"github.com/edge-voice/edge/internal/testredis"
)

// A data set epoch an older edge stored (without voice:epoch_seen) is the
// one a replica knows: allocations go on, with no recovery hold, and the
// first marks it seen for the ones after. A replica that knows an epoch
// Redis no longer holds (Redis emptied) still holds allocations back.
func TestEpochOfAnOlderEdgeIsNoDataLoss(t *testing.T) {
	ctx := context.Background()
	rdb := testredis.Start(t).Client()
	a := allocatortest.New(t, rdb)
	k := a.Keys()
	const epoch = "1700000000000-older"
	rdb.Set(ctx, k.Epoch(), epoch, 0)
	register(t, a, "gold", "g0", "g1")
	if _, err := a.Heartbeat(ctx, "r1"); err != nil {
		t.Fatal(err)
	}
	mustAllocate(t, a, "CA1", "")
	if rdb.Exists(ctx, k.EpochSeen(epoch)).Val() != 1 {
		t.Errorf("%s not written by the first allocation", k.EpochSeen(epoch))
	}
	mustAllocate(t, a, "CA2", "")
	if rdb.Exists(ctx, k.Recovering()).Val() != 0 {
		t.Error("a recovery hold started for an epoch that did not change")
	}
	// Redis emptied: the epoch and its mark are gone with the data.
	rdb.FlushAll(ctx)
	register(t, a, "gold", "g0")
	short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	if al, err := a.Allocate(short, allocator.Request{CallID: "CA3"}); !errors.Is(err, allocator.ErrRecovering) {
		t.Errorf("allocate right after Redis lost its data = %+v, %v; want the recovery hold", al, err)
	}
}
