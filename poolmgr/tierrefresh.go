package poolmgr

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/edge-voice/edge/allocator"
)

// TierRefresher re-reads voice:tier:config on every replica so that
// operators change tiers at run time (the admin API writes it). An invalid
// value keeps the last good config, is logged and counted.
type TierRefresher struct {
	Load func(ctx context.Context) (allocator.TierConfig, error)
	// Current is the config in effect; Apply swaps in a new one.
	Current func() allocator.TierConfig
	Apply   func(allocator.TierConfig)
	// Restore writes the config in effect back when Redis has none (it was
	// restarted empty), only if it is still missing (SETNX), and returns
	// the config Redis then holds and whether this write put it there
	// (allocator.Allocator.BootstrapTierConfig): nil leaves it missing.
	Restore func(ctx context.Context, tc allocator.TierConfig) (allocator.TierConfig, bool, error)
	// Merchants keeps the merchant config and merchant pool targets this
	// replica last read, and writes them back when the tier config is found
	// missing (Redis restarted empty: those keys live only in Redis); nil
	// leaves them lost.
	Merchants MerchantStore
	Interval  func() time.Duration
	Log       *slog.Logger
	Metrics   *Metrics

	// mu serialises Refresh: the periodic pass and the one the heartbeat
	// runs after Redis lost its data.
	mu        sync.Mutex
	merchants allocator.MerchantSnapshot // the last one read beside a tier config
}

// MerchantStore reads and writes back the merchant state
// (allocator.Allocator implements it).
type MerchantStore interface {
	SnapshotMerchants(ctx context.Context) (allocator.MerchantSnapshot, bool, error)
	RestoreMerchants(ctx context.Context, snap allocator.MerchantSnapshot) (int, error)
}

// Run refreshes at once, then every Interval until ctx ends: the first
// pass takes this replica's copy of the merchant config, which it writes
// back should Redis lose its data.
func (t *TierRefresher) Run(ctx context.Context) error {
	t.Refresh(ctx)
	for sleep(ctx, t.Interval()) {
		t.Refresh(ctx)
	}
	return nil
}

// Refresh reads and applies the tier config once.
func (t *TierRefresher) Refresh(ctx context.Context) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.snapshotMerchants(ctx)
	start := time.Now()
	tc, err := t.Load(ctx)
	t.Metrics.observe("tier_refresh", start, err)
	if errors.Is(err, allocator.ErrTierConfigMissing) && t.Restore != nil {
		stored, created, rerr := t.Restore(ctx, t.Current())
		switch {
		case rerr != nil:
			t.Metrics.TierConfigLoads.WithLabelValues("error").Inc()
			t.Log.Warn("tier config missing from Redis; restoring it failed", "err", rerr)
			return
		case created:
			t.Metrics.TierConfigLoads.WithLabelValues("restored").Inc()
			t.Log.Warn("tier config was missing from Redis (restarted empty?): restored this replica's copy", "chain", t.Current().DefaultChain)
			t.restoreMerchants(ctx)
			return
		}
		// Another replica wrote its copy between this one's read and its
		// SETNX: nothing was written here. What Redis holds now is
		// refreshed as any other.
		t.Log.Info("tier config was missing from Redis (restarted empty?); another replica restored it first: nothing written", "chain", stored.DefaultChain)
		t.restoreMerchants(ctx)
		tc, err = stored, nil
	}
	switch {
	case errors.Is(err, allocator.ErrInvalidConfig):
		t.Metrics.TierConfigLoads.WithLabelValues("invalid").Inc()
		t.Log.Error("tier config in Redis is invalid; keeping the last good one", "err", err)
		return
	case err != nil:
		t.Metrics.TierConfigLoads.WithLabelValues("error").Inc()
		if ctx.Err() == nil {
			t.Log.Warn("tier config refresh failed", "err", err)
		}
		return
	}
	if sameTiers(tc, t.Current()) {
		t.Metrics.TierConfigLoads.WithLabelValues("unchanged").Inc()
		return
	}
	t.Apply(tc)
	t.Metrics.TierConfigLoads.WithLabelValues("applied").Inc()
	t.Log.Info("tier config changed", "chain", tc.DefaultChain, "tiers", len(tc.Tiers))
}

// TakeMerchants takes this replica's copy of the merchant state now,
// rather than at the next refresh: an operator's change through this
// replica's admin API is then in the copy written back should Redis lose
// its data before the next refresh.
func (t *TierRefresher) TakeMerchants(ctx context.Context) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.snapshotMerchants(ctx)
}

// snapshotMerchants keeps the merchant state when it was read beside a tier
// config; a Redis that has just lost everything (no tier config) must not
// replace the copy with nothing.
func (t *TierRefresher) snapshotMerchants(ctx context.Context) {
	if t.Merchants == nil {
		return
	}
	snap, tiersPresent, err := t.Merchants.SnapshotMerchants(ctx)
	if err == nil && tiersPresent {
		t.merchants = snap
	}
}

// restoreMerchants writes the last merchant state back after the tier
// config was found missing. HSETNX: an entry written meanwhile wins.
func (t *TierRefresher) restoreMerchants(ctx context.Context) {
	if t.Merchants == nil || t.merchants.Empty() {
		return
	}
	n, err := t.Merchants.RestoreMerchants(ctx, t.merchants)
	if err != nil {
		t.Metrics.TierConfigLoads.WithLabelValues("error").Inc()
		t.Log.Warn("merchant config missing from Redis; restoring it failed", "err", err)
		return
	}
	if n == 0 {
		// Every entry was there: only the tier config was lost (its key
		// deleted alone), or another replica (or an operator) wrote them
		// first. Nothing was restored here, nothing to warn about.
		t.Log.Info("merchant config and pool targets: nothing written back, every entry of this replica's copy is in Redis (not lost, or another replica restored it first)",
			"merchants", len(t.merchants.Configs), "targets", len(t.merchants.Targets), "written", 0)
		return
	}
	t.Metrics.TierConfigLoads.WithLabelValues("merchants_restored").Inc()
	t.Log.Warn("merchant config and pool targets were missing from Redis (restarted empty?): restored from this replica's copy",
		"merchants", len(t.merchants.Configs), "targets", len(t.merchants.Targets), "written", n)
}

func sameTiers(a, b allocator.TierConfig) bool {
	x, err1 := a.Marshal()
	y, err2 := b.Marshal()
	return err1 == nil && err2 == nil && bytes.Equal(x, y)
}
