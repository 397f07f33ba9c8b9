package allocator_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/edge-voice/edge/allocator"
	"github.com/edge-voice/edge/allocator/allocatortest"
	"github.com/edge-voice/edge/internal/testredis"
)

// One call sent to both routers at once (a provider's retry landing on the
// other router while the webhooks move): the predecessor takes its
// idempotency lock ({_lock: 1}) before it picks a pod, and edge took that
// hash for a free call and allocated over it. Replayed against the
// predecessor's binary beside edge, 20 and 15 of 30 such calls got two pods.
// edge must answer the predecessor's pod instead: none of 30 gets two.
func TestTwoRoutersRacingOneCallGetOnePod(t *testing.T) {
	ctx := context.Background()
	rdb := testredis.Start(t).Client()
	a := allocatortest.New(t, rdb, migration)
	const trials = 30
	var pods []string
	for i := range 2 * trials {
		pods = append(pods, fmt.Sprintf("g%02d", i))
	}
	register(t, a, "gold", pods...)
	pred := &predecessor{rdb: rdb, k: a.Keys(), tiers: a.Config().Tiers}

	doubles := 0
	for i := range trials {
		call := fmt.Sprintf("CA-race-%02d", i)
		start := make(chan struct{})
		var (
			wg       sync.WaitGroup
			predPod  string
			edgeAl   allocator.Allocation
			edgeErr  error
			predSeen bool
		)
		wg.Go(func() {
			<-start
			predPod, predSeen = pred.allocateCall(ctx, call)
		})
		wg.Go(func() {
			<-start
			edgeAl, edgeErr = a.Allocate(ctx, allocator.Request{CallID: call})
		})
		close(start)
		wg.Wait()
		if edgeErr != nil {
			t.Fatalf("trial %d: edge: %v", i, edgeErr)
		}
		if predPod == "" {
			t.Fatalf("trial %d: the predecessor found no pod", i)
		}
		// Every pod whose pod info names the call holds it.
		holding := 0
		for _, p := range pods {
			if rdb.HGet(ctx, a.Keys().PodInfo(p), "allocated_call_sid").Val() == call {
				holding++
			}
		}
		if holding > 1 || predPod != edgeAl.PodName {
			doubles++
			t.Logf("trial %d: predecessor answered %s (existing %v), edge %s (existing %v); %d pods hold the call",
				i, predPod, predSeen, edgeAl.PodName, edgeAl.WasExisting, holding)
		}
	}
	if doubles > 0 {
		t.Fatalf("%d of %d calls sent to both routers got two pods", doubles, trials)
	}

	// Every call ends through edge and every pod is back.
	for i := range trials {
		if _, err := a.Release(ctx, fmt.Sprintf("CA-race-%02d", i)); err != nil {
			t.Fatal(err)
		}
	}
	sweepAll(t, a, pods...)
	if n := rdb.SCard(ctx, a.Keys().PoolAvailable("gold")).Val(); n != int64(len(pods)) {
		t.Fatalf("%d of %d gold pods are back", n, len(pods))
	}
}

// While the predecessor holds a call's lock, edge's allocate of the call
// waits for it and answers the pod the predecessor stores, as the
// predecessor answers a duplicate of a call it allocated.
func TestAllocateWaitsForThePredecessorsLock(t *testing.T) {
	ctx := context.Background()
	srv := testredis.Start(t)
	rdb := srv.Client()
	a := allocatortest.New(t, rdb, migration)
	register(t, a, "gold", "g0", "g1")
	pred := &predecessor{rdb: rdb, k: a.Keys(), tiers: a.Config().Tiers}
	if _, locked := pred.lock(ctx, "CA1"); !locked {
		t.Fatal("the predecessor did not take the lock")
	}
	// edge has looked at the call (and found the lock) once Redis ran a
	// script after this point.
	scripts := func() int64 {
		st := srv.CommandStats(ctx, rdb)
		return st["evalsha"] + st["eval"]
	}
	before := scripts()
	type result struct {
		al  allocator.Allocation
		err error
	}
	done := make(chan result, 1)
	go func() {
		al, err := a.Allocate(ctx, allocator.Request{CallID: "CA1", Creator: "provider:twilio"})
		done <- result{al, err}
	}()
	for scripts() == before {
		select {
		case r := <-done:
			t.Fatalf("edge answered %+v, %v while the predecessor held the lock", r.al, r.err)
		default:
		}
	}
	pod := pred.allocateLocked(ctx, "CA1")
	r := <-done
	if r.err != nil {
		t.Fatal(r.err)
	}
	if r.al.PodName != pod || !r.al.WasExisting {
		t.Fatalf("edge answered %+v, want the predecessor's %s as existing", r.al, pod)
	}
	if n := rdb.SCard(ctx, a.Keys().PoolAvailable("gold")).Val(); n != 1 {
		t.Fatalf("%d gold pods free, want 1: the call holds one", n)
	}
}

// A lock the predecessor never resolves (its allocation failed: the lock
// stays 30 s) gets a refusal after a short wait, with nothing taken.
func TestAllocateRefusesAtAnUnresolvedPredecessorLock(t *testing.T) {
	ctx := context.Background()
	rdb := testredis.Start(t).Client()
	a := allocatortest.New(t, rdb, migration)
	register(t, a, "gold", "g0")
	pred := &predecessor{rdb: rdb, k: a.Keys(), tiers: a.Config().Tiers}
	pred.lock(ctx, "CA1")
	start := time.Now()
	al, err := a.Allocate(ctx, allocator.Request{CallID: "CA1"})
	var nc *allocator.NoCapacityError
	if !errors.As(err, &nc) || nc.Reason != allocator.ReasonInProgress {
		t.Fatalf("allocate under the predecessor's lock = %+v, %v; want a refusal in_progress", al, err)
	}
	if waited := time.Since(start); waited > allocator.PredecessorLockWait+time.Second {
		t.Errorf("waited %v, more than the lock wait", waited)
	}
	if !rdb.SIsMember(ctx, a.Keys().PoolAvailable("gold"), "g0").Val() {
		t.Fatal("g0 was taken")
	}
	if got := rdb.HGetAll(ctx, a.Keys().Call("CA1")).Val(); len(got) != 1 || got["_lock"] != "1" {
		t.Fatalf("call info = %v, want the predecessor's lock alone", got)
	}
	// A context ending first ends the wait.
	short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	if _, err := a.Allocate(short, allocator.Request{CallID: "CA1"}); !errors.Is(err, allocator.ErrNoCapacity) {
		t.Fatalf("allocate with a short deadline: %v", err)
	}
}

// A call record both routers wrote: edge allocated over the predecessor's
// lock (before it respected the lock), then the predecessor stored its own
// pod over edge's fields. The record names the predecessor's pod and
// source pool with edge's pool_type and creator. edge's release frees both
// pods in one step: before, it deleted the record and then failed with
// WRONGTYPE (an exclusive release into a shared pool), or freed neither,
// and the shared pod's score stayed counted for good in migration mode.
func TestReleaseOfACallRecordBothRoutersWrote(t *testing.T) {
	type pod struct{ name, tier string }
	for name, tc := range map[string]struct{ edge, pred pod }{
		"edge exclusive, predecessor shared":    {pod{"g0", "gold"}, pod{"b0", "basic"}},
		"edge shared, predecessor exclusive":    {pod{"b0", "basic"}, pod{"s0", "standard"}},
		"edge shared, predecessor shared":       {pod{"b0", "basic"}, pod{"b1", "basic"}},
		"edge exclusive, predecessor exclusive": {pod{"g0", "gold"}, pod{"s0", "standard"}},
	} {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			rdb := testredis.Start(t).Client()
			a := allocatortest.New(t, rdb, migration)
			k := a.Keys()
			shared := func(p pod) bool { return p.tier == "basic" }
			register(t, a, tc.edge.tier, tc.edge.name)
			if al := mustAllocate(t, a, "CA1", ""); al.PodName != tc.edge.name {
				t.Fatalf("edge allocated %s, want %s", al.PodName, tc.edge.name)
			}
			register(t, a, tc.pred.tier, tc.pred.name)
			// The predecessor's pick and store, after edge's allocation.
			pred := &predecessor{rdb: rdb, k: k, tiers: a.Config().Tiers}
			if shared(tc.pred) {
				rdb.ZIncrBy(ctx, k.PoolAvailable(tc.pred.tier), 1, tc.pred.name)
			} else {
				rdb.SRem(ctx, k.PoolAvailable(tc.pred.tier), tc.pred.name)
			}
			pred.store(ctx, "CA1", tc.pred.name, tc.pred.tier)

			if _, err := a.Release(ctx, "CA1"); err != nil {
				t.Fatalf("release of the mixed record: %v", err)
			}
			if n := rdb.Exists(ctx, k.Call("CA1")).Val(); n != 0 {
				t.Error("the call info is still there")
			}
			for _, p := range []pod{tc.edge, tc.pred} {
				if shared(p) {
					if s := score(t, rdb, a, p.tier, p.name); s != 0 {
						t.Errorf("%s keeps score %v with no call", p.name, s)
					}
					if n := rdb.ZCard(ctx, k.PodCalls(p.name)).Val(); n != 0 {
						t.Errorf("%s keeps %d per-call leases", p.name, n)
					}
				} else if !rdb.SIsMember(ctx, k.PoolAvailable(p.tier), p.name).Val() {
					t.Errorf("%s is not back in %s", p.name, p.tier)
				}
				if owner := rdb.HGet(ctx, k.PodInfo(p.name), "allocated_call_sid").Val(); owner != "" {
					t.Errorf("%s still names %s as its call", p.name, owner)
				}
				if rdb.Exists(ctx, k.Lease(p.name)).Val() != 0 {
					t.Errorf("%s keeps its lease", p.name)
				}
			}
			if rdb.SIsMember(ctx, k.PredecessorPodCalls(tc.pred.name), "CA1").Val() {
				t.Errorf("%s still lists CA1", k.PredecessorPodCalls(tc.pred.name))
			}
			// The sweep leaves it so: nothing counted is left behind.
			sweepAll(t, a, tc.edge.name, tc.pred.name)
			for _, p := range []pod{tc.edge, tc.pred} {
				if shared(p) {
					if s := score(t, rdb, a, p.tier, p.name); s != 0 {
						t.Errorf("after the sweep %s has score %v", p.name, s)
					}
				}
			}
		})
	}
}

// A key of the wrong type makes release change nothing at all: its script
// checks the types of what it will write before it writes anything.
// Before, the call info was already deleted (and its tombstone written)
// when the write failed, so the call could not be released again.
func TestReleaseWritesNothingWhenAKeyHasTheWrongType(t *testing.T) {
	ctx := context.Background()
	rdb := testredis.Start(t).Client()
	a := allocatortest.New(t, rdb)
	k := a.Keys()
	register(t, a, "gold", "g0")
	mustAllocate(t, a, "CA1", "")
	// Something other than edge or the predecessor wrote the pod info.
	rdb.Del(ctx, k.PodInfo("g0"))
	rdb.Set(ctx, k.PodInfo("g0"), "garbage", 0)
	before := rdb.HGetAll(ctx, k.Call("CA1")).Val()
	if _, err := a.Release(ctx, "CA1"); err == nil {
		t.Fatal("release over a pod info that is a STRING succeeded")
	}
	if after := rdb.HGetAll(ctx, k.Call("CA1")).Val(); len(after) != len(before) {
		t.Fatalf("call info after the failed release = %v, want %v untouched", after, before)
	}
	if rdb.Exists(ctx, k.CallEnded("CA1")).Val() != 0 {
		t.Fatal("a tombstone was written by a release that failed")
	}
	if rdb.Get(ctx, k.Lease("g0")).Val() != "CA1" {
		t.Fatal("the lease was touched by a release that failed")
	}
}

// The predecessor keeps each pod's calls in voice:pod:<pod>:calls and
// takes a call out at its release; edge's release of a call must take it
// out too, or the set grows with every call the predecessor allocated and
// edge released (1,041 stale entries after 59 s of mixed traffic).
func TestReleaseRemovesTheCallFromThePredecessorsPodSet(t *testing.T) {
	ctx := context.Background()
	rdb := testredis.Start(t).Client()
	a := allocatortest.New(t, rdb, migration)
	k := a.Keys()
	register(t, a, "gold", "g0")
	register(t, a, "basic", "b0")
	pred := &predecessor{rdb: rdb, k: k, tiers: a.Config().Tiers}
	calls := map[string]string{} // an exclusive call (g0), then a shared one (b0)
	for _, call := range []string{"CA-g", "CA-b"} {
		pod := pred.allocate(ctx, call)
		if pod == "" {
			t.Fatalf("the predecessor found no pod for %s", call)
		}
		if !rdb.SIsMember(ctx, k.PredecessorPodCalls(pod), call).Val() {
			t.Fatalf("the predecessor's store did not list %s on %s", call, pod)
		}
		calls[call] = pod
	}
	for call, pod := range calls {
		if _, err := a.Release(ctx, call); err != nil {
			t.Fatal(err)
		}
		if rdb.SIsMember(ctx, k.PredecessorPodCalls(pod), call).Val() {
			t.Errorf("edge released %s but %s still lists it", call, k.PredecessorPodCalls(pod))
		}
	}
}

// What docs/migration.md (step 4, "Why this order") says of
// proxy.require_token: false, as the allocator answers the proxy for a
// socket without a token: it is bound to the one call a pod's lease and
// pod info name. That is the
// predecessor's exclusive calls, a shared pod holding only the
// predecessor's calls (the call its lease names), and edge's own
// exclusive calls too; a shared pod with edge's per-call leases has no
// single call.
func TestTokenlessSocketsAreBoundToThePodsOneCall(t *testing.T) {
	ctx := context.Background()
	rdb := testredis.Start(t).Client()
	a := allocatortest.New(t, rdb, migration)
	ml := allocator.MediaLeases{Alloc: a}
	pred := &predecessor{rdb: rdb, k: a.Keys(), tiers: a.Config().Tiers}
	register(t, a, "gold", "g0")
	if pod := pred.allocate(ctx, "CA-pred-g"); pod != "g0" {
		t.Fatalf("predecessor got %q", pod)
	}
	register(t, a, "standard", "s0")
	mustAllocate(t, a, "CA-edge-s", "") // s0
	register(t, a, "basic", "b0")
	pred.allocate(ctx, "CA-pred-b1") // b0
	pred.allocate(ctx, "CA-pred-b2") // b0
	for pod, want := range map[string]string{"g0": "CA-pred-g", "s0": "CA-edge-s", "b0": "CA-pred-b2"} {
		if got, err := ml.PodCall(ctx, pod); err != nil || got != want {
			t.Errorf("token-less socket on %s is bound to %q (%v), want %s", pod, got, err, want)
		}
	}
	register(t, a, "basic", "b1")
	rdb.ZAdd(ctx, a.Keys().PoolAvailable("basic"), redis.Z{Score: 5, Member: "b0"}) // b1 next
	mustAllocate(t, a, "CA-edge-b", "")
	if got, err := ml.PodCall(ctx, "b1"); err == nil {
		t.Errorf("a shared pod with edge's per-call lease bound a token-less socket to %s", got)
	}
}
