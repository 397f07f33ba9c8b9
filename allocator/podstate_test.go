package allocator_test

import (
	"context"
	"errors"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/edge-voice/edge/allocator"
	"github.com/edge-voice/edge/allocator/allocatortest"
)

// Pods lists every registered pod with its one-word state: a free pod is
// available, one serving a call allocated (with the call), a drained one
// draining, one the source reports not ready unready, one whose dials
// failed ejected.
func TestPodsStates(t *testing.T) {
	forEachBackend(t, func(t *testing.T, rdb redis.UniversalClient) {
		ctx := context.Background()
		a := allocatortest.New(t, rdb, func(c *allocator.Config) {
			c.Tiers.DefaultChain = []string{"gold"}
			g := c.Tiers.Tiers["gold"]
			g.Target = 5
			c.Tiers.Tiers["gold"] = g
		})
		register(t, a, "gold", "g0", "g1", "g2", "g3", "g4")
		register(t, a, "basic", "b0")
		mustAllocate(t, a, "CA1", "")
		al := mustAllocate(t, a, "CA2", "")
		if _, err := a.Drain(ctx, al.PodName); err != nil {
			t.Fatal(err)
		}
		// A free pod the source reports not ready.
		var idle string
		for _, p := range []string{"g0", "g1", "g2", "g3", "g4"} {
			if info, _ := a.PodInfo(ctx, p); info.Lease == "" {
				idle = p
			}
		}
		mustSync(t, a, allocator.PodState{Name: idle, Tier: "gold"})
		if _, _, err := a.PodFailed(ctx, "b0", "timeout", allocator.Ejection{Backoff: 1e9, MaxBackoff: 8e9, MaxPercent: 100}); err != nil {
			t.Fatal(err)
		}
		pods, err := a.Pods(ctx)
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]allocator.PodInfo{}
		counts := map[string]int{}
		for _, p := range pods {
			got[p.Name] = p
			counts[p.State]++
		}
		if len(pods) != 6 {
			t.Fatalf("Pods listed %d pods, want 6: %+v", len(pods), pods)
		}
		if got["b0"].State != allocator.StateEjected || got["b0"].Tier != "basic" {
			t.Errorf("b0 = %+v, want ejected in basic", got["b0"])
		}
		if got[idle].State != allocator.StateUnready {
			t.Errorf("%s = %+v, want unready", idle, got[idle])
		}
		if p := got[al.PodName]; p.State != allocator.StateDraining || len(p.LiveCalls()) != 1 || p.LiveCalls()[0] != "CA2" {
			t.Errorf("drained pod = %+v, want draining with CA2", p)
		}
		if counts[allocator.StateAllocated] != 1 || counts[allocator.StateAvailable] != 2 {
			t.Errorf("states = %v, want 1 allocated (CA1) and 2 available", counts)
		}
		for _, p := range pods {
			if p.Address != "127.0.0.1:8000" {
				t.Errorf("%s address = %q", p.Name, p.Address)
			}
		}
	})
}

// Undrain ends a drain: an idle drained pod takes calls again at once; a
// pod that was not draining stays as it is; ids are validated.
func TestUndrain(t *testing.T) {
	forEachBackend(t, func(t *testing.T, rdb redis.UniversalClient) {
		ctx := context.Background()
		a := allocatortest.New(t, rdb, func(c *allocator.Config) { c.Tiers.DefaultChain = []string{"gold"} })
		register(t, a, "gold", "g0")
		register(t, a, "basic", "b0")
		for _, pod := range []string{"g0", "b0"} {
			if _, err := a.Drain(ctx, pod); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := a.Allocate(ctx, allocator.Request{CallID: "CA1"}); !errors.Is(err, allocator.ErrNoCapacity) {
			t.Fatalf("allocate with the only pod drained: %v, want no capacity", err)
		}
		for _, pod := range []string{"g0", "b0"} {
			u, err := a.Undrain(ctx, pod)
			if err != nil || !u.WasDraining || !u.BackInPool {
				t.Fatalf("undrain %s = %+v, %v", pod, u, err)
			}
		}
		if al := mustAllocate(t, a, "CA1", ""); al.PodName != "g0" {
			t.Fatalf("allocated %s, want g0 back", al.PodName)
		}
		info, err := a.PodInfo(ctx, "b0")
		if err != nil || info.State != allocator.StateAvailable || info.Draining {
			t.Fatalf("b0 after undrain = %+v, %v", info, err)
		}
		u, err := a.Undrain(ctx, "b0")
		if err != nil || u.WasDraining || u.BackInPool {
			t.Fatalf("undrain of a pod not draining = %+v, %v; want nothing changed", u, err)
		}
		if _, err := a.Undrain(ctx, "nope"); !errors.Is(err, allocator.ErrPodNotFound) {
			t.Fatalf("undrain unknown pod: %v", err)
		}
		if _, err := a.Undrain(ctx, "a:b"); !errors.Is(err, allocator.ErrInvalidID) {
			t.Fatalf("undrain a:b: %v", err)
		}
	})
}

// A drained exclusive pod serving a call is not put back while the call
// lives; undrained, its call's release returns it to the pool.
func TestUndrainBusyPodReturnsOnRelease(t *testing.T) {
	forEachBackend(t, func(t *testing.T, rdb redis.UniversalClient) {
		ctx := context.Background()
		a := allocatortest.New(t, rdb, func(c *allocator.Config) { c.Tiers.DefaultChain = []string{"gold"} })
		register(t, a, "gold", "g0")
		mustAllocate(t, a, "CA1", "")
		a.Drain(ctx, "g0")
		u, err := a.Undrain(ctx, "g0")
		if err != nil || !u.WasDraining || u.BackInPool {
			t.Fatalf("undrain busy = %+v, %v; want was draining, not back", u, err)
		}
		if _, err := a.Allocate(ctx, allocator.Request{CallID: "CA2"}); !errors.Is(err, allocator.ErrNoCapacity) {
			t.Fatalf("allocate while g0 serves CA1: %v", err)
		}
		rel, err := a.Release(ctx, "CA1")
		if err != nil || !rel.ReleasedToPool {
			t.Fatalf("release = %+v, %v; want back to the pool", rel, err)
		}
		mustAllocate(t, a, "CA2", "")
	})
}

// Leader names the holder of the Redis leader lock.
func TestLeaderNamesTheLockHolder(t *testing.T) {
	forEachBackend(t, func(t *testing.T, rdb redis.UniversalClient) {
		ctx := context.Background()
		a := allocatortest.New(t, rdb)
		if l, err := a.Leader(ctx); err != nil || l != "" {
			t.Fatalf("Leader with no lock = %q, %v", l, err)
		}
		if _, ok, err := a.AcquireLeaderLock(ctx, "edge-7f/x", 1e10); err != nil || !ok {
			t.Fatal(ok, err)
		}
		if l, err := a.Leader(ctx); err != nil || l != "edge-7f/x" {
			t.Fatalf("Leader = %q, %v", l, err)
		}
	})
}
