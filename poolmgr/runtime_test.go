package poolmgr

import (
	"context"
	"testing"
	"time"

	"github.com/edge-voice/edge/allocator"
	"github.com/edge-voice/edge/allocator/allocatortest"
	"github.com/edge-voice/edge/internal/testwait"
)

func staticPods(names ...string) []allocator.PodState {
	var out []allocator.PodState
	for _, n := range names {
		out = append(out, allocator.PodState{Name: n, Address: "127.0.0.1:9"})
	}
	return out
}

// A tier config changed at run time (in Redis, by an operator) reaches the
// allocator through the refresh; the next reconcile rebalances idle pods to
// the new targets. An invalid value keeps the last good config.
func TestTierChangeAtRuntime(t *testing.T) {
	_, rdb := startRedis(t)
	ctx := context.Background()
	a := allocatortest.New(t, rdb, goldAndBasic)
	k := a.Keys()
	if _, _, err := a.BootstrapTierConfig(ctx, allocatortest.Tiers("gold", "basic")); err != nil {
		t.Fatal(err)
	}
	reg := NewRegistry()
	(&StaticSource{Registry: reg}).Set(staticPods("p0", "p1", "p2", "p3"))
	m := newManager(t, a, reg, &alwaysLeader{})
	run(t, m)
	testwait.Until(t, 10*time.Second, "gold 1, basic 3", func() bool {
		return rdb.SCard(ctx, k.PoolAssigned("gold")).Val() == 1 && rdb.SCard(ctx, k.PoolAssigned("basic")).Val() == 3
	})
	metrics := m.Metrics
	refresher := &TierRefresher{
		Load: a.LoadTierConfig, Current: func() allocator.TierConfig { return a.Config().Tiers },
		Apply: func(tc allocator.TierConfig) {
			cfg := a.Config()
			cfg.Tiers = tc
			a.Apply(cfg)
		},
		Interval: func() time.Duration { return time.Hour }, Log: quietLog(), Metrics: metrics,
	}

	// An operator raises gold's target to 3.
	tc := allocatortest.Tiers("gold", "basic")
	tc.Tiers["gold"] = allocator.Tier{Type: allocator.Exclusive, Target: 3}
	if err := a.StoreTierConfig(ctx, tc); err != nil {
		t.Fatal(err)
	}
	refresher.Refresh(ctx)
	if got := a.Config().Tiers.Tiers["gold"].Target; got != 3 {
		t.Fatalf("gold target after refresh = %d", got)
	}
	testwait.Until(t, 10*time.Second, "rebalanced to gold 3, basic 1", func() bool {
		return rdb.SCard(ctx, k.PoolAssigned("gold")).Val() == 3 && rdb.SCard(ctx, k.PoolAssigned("basic")).Val() == 1
	})

	// Someone writes garbage by hand: the last good config stays.
	rdb.Set(ctx, k.TierConfig(), `{"tiers":{"gold":{"type":"weird"}}}`, 0)
	refresher.Refresh(ctx)
	if got := a.Config().Tiers.Tiers["gold"].Target; got != 3 {
		t.Fatalf("invalid config applied: gold target %d", got)
	}
	if n := value(metrics.TierConfigLoads.WithLabelValues("invalid")); n != 1 {
		t.Fatalf("invalid refreshes counted = %v", n)
	}
}

// Redis stopped under a running leader: the loops report errors and keep
// going; nothing is concluded from a failed read; when Redis comes back
// (empty, as a cache-only Redis after a crash) the reconciler rebuilds the
// pools from the source.
func TestRedisOutageUnderRunningLoops(t *testing.T) {
	srv, rdb := startRedis(t)
	ctx := context.Background()
	a := allocatortest.New(t, rdb, goldAndBasic)
	k := a.Keys()
	reg := NewRegistry()
	(&StaticSource{Registry: reg}).Set(staticPods("p0", "p1"))
	m := newManager(t, a, reg, &alwaysLeader{})
	run(t, m)
	testwait.Until(t, 10*time.Second, "pods registered", func() bool { return rdb.SCard(ctx, k.PoolAssigned("basic")).Val() == 1 })

	srv.Stop()
	sweepErrs := func() float64 { return value(m.Metrics.LoopErrors.WithLabelValues("sweep")) }
	testwait.Until(t, 10*time.Second, "a failed sweep", func() bool { return sweepErrs() > 0 })
	if z := value(m.Metrics.Zombies); z != 0 {
		t.Fatalf("zombies recovered while Redis was down: %v", z)
	}
	srv.Restart()
	testwait.Until(t, 10*time.Second, "pools rebuilt after the restart", func() bool {
		return rdb.SIsMember(ctx, k.PoolAvailable("gold"), "p0").Val() && rdb.ZCard(ctx, k.PoolAvailable("basic")).Val() == 1
	})
}
