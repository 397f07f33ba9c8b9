package poolmgr

import (
	"context"
	"testing"
	"time"

	"github.com/edge-voice/edge/allocator"
	"github.com/edge-voice/edge/allocator/allocatortest"
)

// The merchant config and merchant pool targets live only in Redis. A Redis
// restarted empty (FLUSHALL here) loses them; the tier refresher writes
// back the copy it last read beside a tier config, entry by entry with
// HSETNX: an entry an operator wrote meanwhile is kept, and an entry an
// operator deleted before the restart is not resurrected.
func TestMerchantConfigRestoredAfterRedisEmptied(t *testing.T) {
	_, rdb := startRedis(t)
	ctx := context.Background()
	a := allocatortest.New(t, rdb)
	k := a.Keys()
	if _, _, err := a.BootstrapTierConfig(ctx, allocatortest.Tiers()); err != nil {
		t.Fatal(err)
	}
	rdb.HSet(ctx, k.MerchantConfig(), "acme", `{"tier":"gold","pool":"acme"}`, "globex", `{"tier":"basic"}`, "gone", `{"tier":"basic"}`)
	rdb.HSet(ctx, k.MerchantTargets(), "acme", 2)
	metrics := NewMetrics(nil)
	r := &TierRefresher{
		Load: a.LoadTierConfig, Current: func() allocator.TierConfig { return a.Config().Tiers },
		Apply:     func(allocator.TierConfig) {},
		Restore:   a.BootstrapTierConfig,
		Merchants: a,
		Interval:  func() time.Duration { return time.Hour }, Log: quietLog(), Metrics: metrics,
	}
	r.Refresh(ctx)
	rdb.HDel(ctx, k.MerchantConfig(), "gone") // an operator deletes one ...
	r.Refresh(ctx)                            // ... which this replica sees

	rdb.FlushAll(ctx)
	// Read while the tier config is missing: must not replace the copy.
	r.snapshotMerchants(ctx)
	// An operator re-applies globex with a new value before the refresh.
	rdb.HSet(ctx, k.MerchantConfig(), "globex", `{"tier":"gold"}`)
	r.Refresh(ctx)

	got := rdb.HGetAll(ctx, k.MerchantConfig()).Val()
	want := map[string]string{"acme": `{"tier":"gold","pool":"acme"}`, "globex": `{"tier":"gold"}`}
	if len(got) != len(want) || got["acme"] != want["acme"] || got["globex"] != want["globex"] {
		t.Errorf("merchant config after the restore = %v, want %v", got, want)
	}
	if got := rdb.HGet(ctx, k.MerchantTargets(), "acme").Val(); got != "2" {
		t.Errorf("merchant target acme after the restore = %q, want 2", got)
	}
	if rdb.Exists(ctx, k.TierConfig()).Val() != 1 {
		t.Error("tier config not restored")
	}
	if n := value(metrics.TierConfigLoads.WithLabelValues("merchants_restored")); n != 1 {
		t.Errorf("merchants_restored counted %v, want 1", n)
	}
	// A later refresh with everything present writes nothing.
	r.Refresh(ctx)
	if n := value(metrics.TierConfigLoads.WithLabelValues("merchants_restored")); n != 1 {
		t.Errorf("merchants_restored counted %v after a normal refresh, want 1", n)
	}
}
