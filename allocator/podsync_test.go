package allocator_test

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/redis/go-redis/v9"

	"github.com/edge-voice/edge/allocator"
	"github.com/edge-voice/edge/allocator/allocatortest"
	"github.com/edge-voice/edge/internal/testredis"
)

func ready(names ...string) []allocator.PodState {
	var out []allocator.PodState
	for _, n := range names {
		out = append(out, allocator.PodState{Name: n, Address: "127.0.0.1:8000", Ready: true})
	}
	return out
}

func mustSync(t *testing.T, a *allocator.Allocator, pods ...allocator.PodState) map[string]allocator.SyncResult {
	t.Helper()
	res, err := a.SyncPods(context.Background(), "", pods)
	if err != nil {
		t.Fatalf("sync: %v", err)
	}
	out := map[string]allocator.SyncResult{}
	for _, r := range res {
		out[r.Pod] = r
	}
	return out
}

// Tier assignment: merchant pools first, then the chain in order, each up to
// its target; the overflow goes to the chain's last tier.
func TestSyncAssignsTiersInOrder(t *testing.T) {
	forEachBackend(t, func(t *testing.T, rdb redis.UniversalClient) {
		ctx := context.Background()
		a := allocatortest.New(t, rdb)
		if err := a.SetMerchantTarget(ctx, "acme", 1); err != nil {
			t.Fatal(err)
		}
		var names []string
		for i := range 7 {
			names = append(names, fmt.Sprintf("p%d", i))
		}
		// One pod per call: the order of events decides, as in production.
		var got []string
		for _, p := range ready(names...) {
			r := mustSync(t, a, p)[p.Name]
			if r.Outcome != allocator.SyncAdded {
				t.Fatalf("%s: outcome %s", p.Name, r.Outcome)
			}
			got = append(got, r.Tier)
		}
		want := []string{"merchant:acme", "gold", "standard", "standard", "basic", "basic", "basic"}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("tiers (-want +got):\n%s", diff)
		}
		k := a.Keys()
		if !rdb.SIsMember(ctx, k.MerchantPods("acme"), "p0").Val() || rdb.ZCard(ctx, k.PoolAvailable("basic")).Val() != 3 {
			t.Fatal("assigned pods are not available")
		}
		// A repeat is idempotent.
		if r := mustSync(t, a, ready("p1")...)["p1"]; r.Outcome != allocator.SyncUnchanged || r.Tier != "gold" {
			t.Fatalf("repeat sync = %+v", r)
		}
	})
}

// Racing events must not overshoot a target: the count and the write are one
// script.
func TestSyncConcurrentAssignmentNeverOvershoots(t *testing.T) {
	rdb := testredis.Start(t).Client()
	a := allocatortest.New(t, rdb)
	var wg sync.WaitGroup
	for i := range 40 {
		wg.Go(func() {
			if _, err := a.SyncPods(context.Background(), "", ready(fmt.Sprintf("p%02d", i))); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	k := a.Keys()
	ctx := context.Background()
	for tier, want := range map[string]int64{"gold": 1, "standard": 2, "basic": 37} {
		if n := rdb.SCard(ctx, k.PoolAssigned(tier)).Val(); n != want {
			t.Errorf("%s assigned = %d, want %d", tier, n, want)
		}
	}
}

// A readiness flap must not destroy a live call: not ready leaves the
// available pool only; ready again returns an idle pod, not a busy one.
func TestSyncUnreadyKeepsCalls(t *testing.T) {
	forEachBackend(t, func(t *testing.T, rdb redis.UniversalClient) {
		ctx := context.Background()
		a := allocatortest.New(t, rdb)
		k := a.Keys()
		mustSync(t, a, ready("g0", "s0")...)
		al := mustAllocate(t, a, "CA1", "")
		if al.PodName != "g0" {
			t.Fatalf("allocated %s, want g0", al.PodName)
		}
		unready := []allocator.PodState{{Name: "g0"}, {Name: "s0"}, {Name: "never"}}
		res := mustSync(t, a, unready...)
		if res["g0"].Outcome != allocator.SyncUnready || res["never"].Outcome != allocator.SyncUnknown {
			t.Fatalf("unready sync = %+v", res)
		}
		if rdb.SIsMember(ctx, k.PoolAvailable("standard"), "s0").Val() {
			t.Fatal("unready s0 still available")
		}
		if _, err := a.Call(ctx, "CA1"); err != nil {
			t.Fatalf("call on an unready pod was ended: %v", err)
		}
		// The sweep must not "recover" the unready idle pod either.
		if _, err := a.SweepPods(ctx, "", []string{"g0", "s0"}); err != nil {
			t.Fatal(err)
		}
		if rdb.SIsMember(ctx, k.PoolAvailable("standard"), "s0").Val() {
			t.Fatal("sweep made an unready pod available")
		}
		// Ready again: the idle one returns, the busy one waits for its release.
		mustSync(t, a, ready("g0", "s0")...)
		if !rdb.SIsMember(ctx, k.PoolAvailable("standard"), "s0").Val() || rdb.SIsMember(ctx, k.PoolAvailable("gold"), "g0").Val() {
			t.Fatal("ready again: want s0 available and busy g0 not")
		}
		if rel, err := a.Release(ctx, "CA1"); err != nil || !rel.ReleasedToPool {
			t.Fatalf("release after the flap = %+v, %v", rel, err)
		}
	})
}

func TestSyncRefusesBadInput(t *testing.T) {
	a := allocatortest.New(t, testredis.Start(t).Client())
	for name, p := range map[string]allocator.PodState{
		"name":    {Name: "a:b", Ready: true},
		"address": {Name: "a", Address: `1.2.3.4:80","x":"`, Ready: true},
		"host":    {Name: "a", Address: "example.com:80", Ready: true},
		"tier":    {Name: "a", Tier: "x:y", Ready: true},
	} {
		if _, err := a.SyncPods(context.Background(), "", []allocator.PodState{p}); !errors.Is(err, allocator.ErrInvalidID) {
			t.Errorf("%s: err = %v, want ErrInvalidID", name, err)
		}
	}
	res, err := a.SyncPods(context.Background(), "", []allocator.PodState{{Name: "a", Tier: "nope", Ready: true}})
	if err != nil || res[0].Outcome != allocator.SyncBadTier {
		t.Fatalf("unknown tier: %+v, %v", res, err)
	}
}

func TestRebalanceMovesOnlyIdlePods(t *testing.T) {
	forEachBackend(t, func(t *testing.T, rdb redis.UniversalClient) {
		ctx := context.Background()
		a := allocatortest.New(t, rdb)
		k := a.Keys()
		mustSync(t, a, ready("p0", "p1", "p2", "p3", "p4", "p5")...) // gold 1, standard 2, basic 3
		// A pod pinned to basic by its source never moves.
		mustSync(t, a, allocator.PodState{Name: "pinned", Address: "127.0.0.1:1", Tier: "basic", Ready: true})
		// basic: p3 busy, p4 p5 idle, pinned idle. Raise gold's target to 4
		// at run time: only p4 and p5 may go.
		mustAllocate(t, a, "CA1", "")
		mustAllocate(t, a, "CA2", "")
		mustAllocate(t, a, "CA3", "")
		busy := mustAllocate(t, a, "CA4", "") // first shared pod by name
		cfg := a.Config()
		tiers := cfg.Tiers
		tiers.Tiers = map[string]allocator.Tier{"gold": {Type: allocator.Exclusive, Target: 4}, "standard": tiers.Tiers["standard"], "basic": tiers.Tiers["basic"]}
		cfg.Tiers = tiers
		a.Apply(cfg)
		moves, err := a.Rebalance(ctx, "", 100)
		if err != nil {
			t.Fatal(err)
		}
		if len(moves) != 2 {
			t.Fatalf("moves = %+v, want 2 idle basic pods to gold", moves)
		}
		for _, m := range moves {
			if m.From != "basic" || m.To != "gold" || m.Pod == busy.PodName {
				t.Errorf("move %+v", m)
			}
			if rdb.Get(ctx, k.PodTier(m.Pod)).Val() != "gold" || !rdb.SIsMember(ctx, k.PoolAvailable("gold"), m.Pod).Val() {
				t.Errorf("%s not in gold's pools", m.Pod)
			}
		}
		if n := rdb.SCard(ctx, k.PoolAssigned("basic")).Val(); n != 2 || rdb.Get(ctx, k.PodTier("pinned")).Val() != "basic" {
			t.Errorf("basic assigned = %d, want 2 (the busy pod and the pinned one)", n)
		}
		// Nothing left to do: a second call moves nothing.
		if moves, _ := a.Rebalance(ctx, "", 100); len(moves) != 0 {
			t.Errorf("second rebalance moved %+v", moves)
		}
	})
}

func TestLeaderLockFencesScripts(t *testing.T) {
	forEachBackend(t, func(t *testing.T, rdb redis.UniversalClient) {
		ctx := context.Background()
		a := allocatortest.New(t, rdb)
		v1, ok, err := a.AcquireLeaderLock(ctx, "one", time.Minute)
		if err != nil || !ok {
			t.Fatalf("acquire: %v %v", ok, err)
		}
		if held, ok, _ := a.AcquireLeaderLock(ctx, "two", time.Minute); ok || held != v1 {
			t.Fatalf("second acquire = %q %v, want refused, held by %q", held, ok, v1)
		}
		if _, err := a.SyncPods(ctx, v1, ready("p0")); err != nil {
			t.Fatalf("sync with the live fence: %v", err)
		}
		if err := a.ReleaseLeaderLock(ctx, v1); err != nil {
			t.Fatal(err)
		}
		v2, ok, _ := a.AcquireLeaderLock(ctx, "two", time.Minute)
		if !ok || v2 == v1 {
			t.Fatalf("reacquire = %q %v", v2, ok)
		}
		// The old leader's token is dead everywhere.
		if ok, _ := a.RenewLeaderLock(ctx, v1, time.Minute); ok {
			t.Fatal("old holder renewed")
		}
		if _, err := a.SyncPods(ctx, v1, ready("p1")); !errors.Is(err, allocator.ErrFenced) {
			t.Fatalf("sync with a stale fence: %v", err)
		}
		if _, err := a.SweepPods(ctx, v1, []string{"p0"}); !errors.Is(err, allocator.ErrFenced) {
			t.Fatalf("sweep with a stale fence: %v", err)
		}
		if _, err := a.Rebalance(ctx, v1, 1); !errors.Is(err, allocator.ErrFenced) {
			t.Fatalf("rebalance with a stale fence: %v", err)
		}
		if ok, _ := a.RenewLeaderLock(ctx, v2, time.Minute); !ok {
			t.Fatal("holder could not renew")
		}
	})
}

// A new address under a pod's name is a new pod (a StatefulSet's
// replacement of a force-deleted pod, its Delete and Add seen as one
// change): a drain of the old one, from its preStop, does not hold the
// replacement out of allocation for the draining TTL. The same address
// synced again stays drained.
func TestSyncNewAddressIsNotDraining(t *testing.T) {
	forEachBackend(t, func(t *testing.T, rdb redis.UniversalClient) {
		ctx := context.Background()
		a := allocatortest.New(t, rdb)
		old := allocator.PodState{Name: "p0", Address: "10.88.0.4:8000", Ready: true}
		mustSync(t, a, old)
		if _, err := a.Drain(ctx, "p0"); err != nil {
			t.Fatal(err)
		}
		mustSync(t, a, old)
		if info, err := a.PodInfo(ctx, "p0"); err != nil || !info.Draining {
			t.Fatalf("drained pod synced again at its address: %+v, %v; want draining", info, err)
		}
		// The replacement: pending without an address, then ready at another.
		mustSync(t, a, allocator.PodState{Name: "p0"})
		mustSync(t, a, allocator.PodState{Name: "p0", Address: "10.88.0.9:8000", Ready: true})
		info, err := a.PodInfo(ctx, "p0")
		if err != nil || info.Draining || info.Status != "available" {
			t.Fatalf("the replacement after its predecessor's drain: %+v, %v; want available, not draining", info, err)
		}
		if _, err := a.Allocate(ctx, allocator.Request{CallID: "CA1"}); err != nil {
			t.Fatalf("the replacement takes no call: %v", err)
		}
	})
}

// DrainInstance drains the pod registered at the caller's address and
// refuses, changing nothing, when another address holds the name.
func TestDrainInstance(t *testing.T) {
	forEachBackend(t, func(t *testing.T, rdb redis.UniversalClient) {
		ctx := context.Background()
		a := allocatortest.New(t, rdb)
		mustSync(t, a, allocator.PodState{Name: "p0", Address: "10.88.0.9:8000", Ready: true},
			allocator.PodState{Name: "p1", Address: "[fd00::7]:8000", Ready: true})
		if _, err := a.DrainInstance(ctx, "p0", netip.MustParseAddr("10.88.0.4")); !errors.Is(err, allocator.ErrPodReplaced) {
			t.Fatalf("drain of p0 at another address: %v, want ErrPodReplaced", err)
		}
		if info, _ := a.PodInfo(ctx, "p0"); info.Draining {
			t.Fatal("a refused drain left p0 draining")
		}
		for pod, ip := range map[string]string{"p0": "10.88.0.9", "p1": "fd00::7"} {
			if d, err := a.DrainInstance(ctx, pod, netip.MustParseAddr(ip)); err != nil || d.PodName != pod {
				t.Fatalf("drain of %s at %s: %+v, %v", pod, ip, d, err)
			}
		}
	})
}
