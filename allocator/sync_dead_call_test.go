package allocator_test

import (
	"context"
	"errors"
	"testing"

	"github.com/edge-voice/edge/allocator"
	"github.com/edge-voice/edge/allocator/allocatortest"
	"github.com/edge-voice/edge/internal/testredis"
)

// A reconcile (sync) that finds an exclusive pod whose call died (no live
// lease) gives the pod back and ends the call as the sweep would: call info
// deleted, tombstone written. It used to leave the call info naming the pod,
// so a replayed webhook of the dead call was answered with a pod that the
// next call got too (found by the fault suite after kill -9 of the leader,
// whose successor reconciles before it sweeps).
func TestSyncEndsTheDeadCallOfAPodItFrees(t *testing.T) {
	ctx := context.Background()
	rdb := testredis.Start(t).Client()
	a := allocatortest.New(t, rdb)
	k := a.Keys()
	mustSync(t, a, ready("g0")...)
	mustAllocate(t, a, "CA-dead", "")
	rdb.Del(ctx, k.Lease("g0")) // the call's socket died with its replica

	mustSync(t, a, ready("g0")...)
	if !rdb.SIsMember(ctx, k.PoolAvailable("gold"), "g0").Val() {
		t.Fatal("g0 not given back")
	}
	if n := rdb.Exists(ctx, k.Call("CA-dead")).Val(); n != 0 {
		t.Fatal("the dead call's info still names g0")
	}
	if got := rdb.HGet(ctx, k.CallEnded("CA-dead"), "how").Val(); got != "expired" {
		t.Errorf("tombstone = %q, want expired", got)
	}
	if _, err := a.Allocate(ctx, allocator.Request{CallID: "CA-dead"}); !errors.Is(err, allocator.ErrCallEnded) {
		t.Fatalf("replayed webhook of the dead call: %v, want ErrCallEnded", err)
	}
	if al := mustAllocate(t, a, "CA-next", ""); al.PodName != "g0" {
		t.Fatalf("next call got %q", al.PodName)
	}
	checkLive(t, rdb, a, map[string]string{"g0": "gold"})
}
