package allocator_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/edge-voice/edge/allocator"
	"github.com/edge-voice/edge/allocator/allocatortest"
	"github.com/edge-voice/edge/internal/testredis"
)

// The predecessor's release is seven commands (SADD the pod back, then DEL
// its lease, then reset its pod info, ...), and while both routers share
// the Redis edge's allocation may run between any two of them. A replay of
// the migration drill once saw an edge call dropped 0.7 s into step 2
// (lease_lost). This test runs edge's allocation of a new call at every
// point of the predecessor's release of the pod's call, one exclusive pod,
// with either pod info reset (the fields the run of the predecessor's
// binary showed, and the allocation fields cleared as the seeds document
// its releaser), and then what edge does next: the call's socket renews
// its lease, the leader syncs and sweeps the pod, and both routers
// allocate another call. An edge call that got the pod must keep it (its
// renewal held: no lease_lost) and no second call may get the pod while it
// does; a pod edge did not get must be free again for the next call.
func TestPredecessorReleaseInterleavedWithEdgeAllocate(t *testing.T) {
	steps := len((&predecessor{}).releaseSteps(context.Background(), "", resetStatus))
	for _, reset := range []predReset{resetStatus, resetClears} {
		for cut := 0; cut <= steps; cut++ {
			for _, then := range []string{"renewed", "released"} {
				t.Run(fmt.Sprintf("%s/after %d steps/%s", reset, cut, then), func(t *testing.T) {
					interleave(t, reset, cut, then == "released")
				})
			}
		}
	}
}

// interleave runs edge's allocation after cut steps of the predecessor's
// release, the rest of the release, then edge's call's first renewal (or,
// with release, its release before any renewal), the leader's sync and
// sweep, and both routers' next allocations.
func interleave(t *testing.T, reset predReset, cut int, release bool) {
	ctx := context.Background()
	rdb := testredis.Start(t).Client()
	a := allocatortest.New(t, rdb, migration)
	k := a.Keys()
	mustSync(t, a, ready("g0")...)
	pred := &predecessor{rdb: rdb, k: k, tiers: a.Config().Tiers}
	if pod := pred.allocate(ctx, "CA-pred"); pod != "g0" {
		t.Fatalf("the predecessor's call got %q", pod)
	}
	steps := pred.releaseSteps(ctx, "CA-pred", reset)
	for _, s := range steps[:cut] {
		s.run()
	}
	al, err := a.Allocate(ctx, allocator.Request{CallID: "CA-edge"})
	if err != nil && !errors.Is(err, allocator.ErrNoCapacity) {
		t.Fatalf("edge's allocation: %v", err)
	}
	got := err == nil
	if got && al.PodName != "g0" {
		t.Fatalf("edge's allocation got %q", al.PodName)
	}
	for _, s := range steps[cut:] {
		s.run()
	}
	between := fmt.Sprintf("between the predecessor's %q and %q", stepName(steps, cut-1), stepName(steps, cut))

	if got && release {
		rel, err := a.Release(ctx, "CA-edge")
		if err != nil || !rel.ReleasedToPool {
			t.Fatalf("release of edge's call allocated %s: %+v %v, want g0 back in its pool", between, rel, err)
		}
		got = false
	} else if got {
		held, err := a.Renew(ctx, []allocator.Lease{{CallID: "CA-edge", PodName: "g0"}})
		if err != nil {
			t.Fatal(err)
		}
		if !held[0] {
			t.Fatalf("edge's call allocated %s lost its pod at its first renewal (lease_lost)", between)
		}
	}
	mustSync(t, a, ready("g0")...)
	sweepAll(t, a, "g0")

	next, err := a.Allocate(ctx, allocator.Request{CallID: "CA-next"})
	switch {
	case got && err == nil:
		t.Fatalf("edge gave g0 to CA-next while CA-edge holds it")
	case got && !errors.Is(err, allocator.ErrNoCapacity):
		t.Fatalf("edge's next allocation: %v", err)
	case !got && (err != nil || next.PodName != "g0"):
		t.Fatalf("g0 was freed and no call holds it: the next allocation got %+v %v", next, err)
	}
	if got {
		if pod := pred.allocate(ctx, "CA-pred-next"); pod != "" {
			t.Fatalf("the predecessor gave %s to a call while CA-edge holds it", pod)
		}
		if held, err := a.Renew(ctx, []allocator.Lease{{CallID: "CA-edge", PodName: "g0"}}); err != nil || !held[0] {
			t.Fatalf("edge's call after the sync and the sweep: held %v, %v", held, err)
		}
	}
}

// stepName is the name of steps[i], or where the release stands outside.
func stepName(steps []predStep, i int) string {
	switch {
	case i < 0:
		return "(start)"
	case i >= len(steps):
		return "(end)"
	}
	return steps[i].name
}

// The predecessor's release of an edge call on a shared pod lowers the
// pod's score (its release script) before it deletes the call info; a sweep
// between the two sees the call live and the score one short. Migration
// mode's sweep raised the score to the live calls there, and once the call
// info was gone it dropped the call's per-call lease without lowering the
// score again (the predecessor had): a slot stayed counted for good (the
// migration drill found both shared pods full of such slots). It now
// raises a score only when the shortfall lasts (a second sweep a second
// later still sees it: the predecessor's double release, its zombie
// cleanup's ZADD 0).
func TestSweepKeepsNoSlotThePredecessorsReleaseGaveBack(t *testing.T) {
	ctx := context.Background()
	rdb := testredis.Start(t).Client()
	a := allocatortest.New(t, rdb, migration)
	k := a.Keys()
	register(t, a, "basic", "b0")
	pred := &predecessor{rdb: rdb, k: k, tiers: a.Config().Tiers}
	mustAllocate(t, a, "CA-e1", "")
	mustAllocate(t, a, "CA-e2", "")
	rest := runSteps(t, pred.releaseSteps(ctx, "CA-e1", resetStatus), "return the pod")
	sweepAll(t, a, "b0")
	runSteps(t, rest, "")
	sweepAll(t, a, "b0")
	if s := score(t, rdb, a, "basic", "b0"); s != 1 {
		t.Fatalf("score after the predecessor released one of two edge calls = %v, want 1 (CA-e2)", s)
	}
	for _, call := range []string{"CA-e3", "CA-e4"} {
		mustAllocate(t, a, call, "")
	}

	// A shortfall that lasts is raised: the score is set below the live
	// calls, and the sweep that first sees it noted it a while ago.
	rdb.ZAdd(ctx, k.PoolAvailable("basic"), redis.Z{Score: 1, Member: "b0"})
	sweepAll(t, a, "b0")
	if s := score(t, rdb, a, "basic", "b0"); s != 1 {
		t.Fatalf("score raised at the first sight of a shortfall: %v", s)
	}
	seen := rdb.HGet(ctx, k.PodInfo("b0"), "load_deficit_at").Val()
	if seen == "" {
		t.Fatal("the sweep did not note the shortfall")
	}
	at, _ := strconv.ParseInt(seen, 10, 64)
	rdb.HSet(ctx, k.PodInfo("b0"), "load_deficit_at", at-2000)
	sweepAll(t, a, "b0")
	if s := score(t, rdb, a, "basic", "b0"); s != 3 {
		t.Fatalf("score after the shortfall lasted = %v, want 3 (the live calls)", s)
	}
	if rdb.HExists(ctx, k.PodInfo("b0"), "load_deficit_at").Val() {
		t.Error("load_deficit_at left after the score was raised")
	}
}
