package allocator_test

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/edge-voice/edge/allocator"
	"github.com/edge-voice/edge/allocator/allocatortest"
	"github.com/edge-voice/edge/internal/testredis"
)

// The predecessor's release deletes the lease key of whoever holds the pod
// by then: its release of a call returns the pod (SADD), another
// predecessor replica gives the pod to a new call, and the release goes on
// with DEL lease. The new call lives, its pod info and call info naming
// each other, without a lease key. Migration mode's sweep keeps such a
// call; the pod sync (the reconcile, every minute) put the pod back in its
// pool and ended the call, so the next call got the pod too. In migration
// mode sync now keeps it as the sweep does; edge alone (no predecessor, the
// lease key is the truth) it still ends it.
func TestSyncKeepsACallWhoseLeaseThePredecessorsReleaseDeleted(t *testing.T) {
	for name, tc := range map[string]struct {
		mutate func(*allocator.Config)
		kept   bool
	}{
		"migration":  {mutate: migration, kept: true},
		"edge alone": {mutate: func(*allocator.Config) {}, kept: false},
	} {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			rdb := testredis.Start(t).Client()
			a := allocatortest.New(t, rdb, tc.mutate)
			k := a.Keys()
			if res := mustSync(t, a, ready("g0")...); res["g0"].Tier != "gold" {
				t.Fatalf("g0 synced to %+v, want gold", res["g0"])
			}
			pred := &predecessor{rdb: rdb, k: k, tiers: a.Config().Tiers}
			if pod := pred.allocate(ctx, "CA-old"); pod != "g0" {
				t.Fatalf("the predecessor's first call got %q", pod)
			}
			rest := runSteps(t, pred.releaseSteps(ctx, "CA-old", resetStatus), "return the pod")
			if pod := pred.allocate(ctx, "CA-new"); pod != "g0" {
				t.Fatalf("the predecessor's second call got %q, want g0 (returned by the release)", pod)
			}
			runSteps(t, rest, "")
			if n := rdb.Exists(ctx, k.Lease("g0")).Val(); n != 0 {
				t.Fatal("the release left a lease key: the state under test was not reached")
			}

			mustSync(t, a, ready("g0")...)
			alive := rdb.HGet(ctx, k.Call("CA-new"), "pod_name").Val() == "g0"
			available := rdb.SIsMember(ctx, k.PoolAvailable("gold"), "g0").Val()
			if !tc.kept {
				if alive || !available {
					t.Fatalf("edge alone: call alive %v, g0 available %v; want the dead call ended and g0 back", alive, available)
				}
				return
			}
			if !alive || available {
				t.Fatalf("after the sync: CA-new alive %v, g0 available %v; want the live call kept and g0 out of its pool", alive, available)
			}
			if owner := rdb.HGet(ctx, k.PodInfo("g0"), "allocated_call_sid").Val(); owner != "CA-new" {
				t.Fatalf("g0's pod info names %q, want CA-new", owner)
			}
			if res := sweepAll(t, a, "g0"); len(res.Recovered) != 0 {
				t.Fatalf("the sweep recovered %v while CA-new holds it", res.Recovered)
			}
			if al, err := a.Allocate(ctx, allocator.Request{CallID: "CA-third"}); !errors.Is(err, allocator.ErrNoCapacity) {
				t.Fatalf("a second call on g0's pools: %+v %v, want ErrNoCapacity", al, err)
			}
		})
	}
}

// The predecessor lists a pod's calls in voice:pod:<pod>:calls, and its
// reconciler ends every call in that set when the pod dies. A shared pod
// holds several calls; its lease and pod info name only the latest. edge's
// unregister ended the calls its own records name (per-call leases, the
// lease, the pod info) and left the predecessor's others in the set,
// their call info naming a pod that was gone. It now ends every call the
// set lists, as the predecessor's reconciler did, and deletes the set.
func TestUnregisterEndsEveryCallThePredecessorListsForThePod(t *testing.T) {
	ctx := context.Background()
	rdb := testredis.Start(t).Client()
	a := allocatortest.New(t, rdb, migration)
	k := a.Keys()
	register(t, a, "basic", "b0")
	pred := &predecessor{rdb: rdb, k: k, tiers: a.Config().Tiers}
	for _, call := range []string{"CA-p1", "CA-p2"} {
		if pod := pred.allocate(ctx, call); pod != "b0" {
			t.Fatalf("the predecessor's %s got %q", call, pod)
		}
	}
	// edge's call is the latest: the pod's lease and pod info name it.
	if al := mustAllocate(t, a, "CA-e1", ""); al.PodName != "b0" {
		t.Fatalf("edge's call got %q", al.PodName)
	}

	res, err := a.UnregisterPod(ctx, "", "b0")
	if err != nil {
		t.Fatal(err)
	}
	ended := slices.Sorted(slices.Values(res.Calls))
	if want := []string{"CA-e1", "CA-p1", "CA-p2"}; !slices.Equal(ended, want) || res.CallsEnded != 3 {
		t.Errorf("unregister ended %v (%d), want %v", ended, res.CallsEnded, want)
	}
	for _, call := range []string{"CA-p1", "CA-p2", "CA-e1"} {
		if pod := rdb.HGet(ctx, k.Call(call), "pod_name").Val(); pod != "" {
			t.Errorf("%s's call info still names %q", call, pod)
		}
		if how := rdb.HGet(ctx, k.CallEnded(call), "how").Val(); how != "unregistered" {
			t.Errorf("%s's tombstone says %q, want unregistered", call, how)
		}
	}
	if left := rdb.SMembers(ctx, k.PredecessorPodCalls("b0")).Val(); len(left) != 0 {
		t.Errorf("voice:pod:b0:calls still lists %v", left)
	}
}
