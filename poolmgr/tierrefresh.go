package poolmgr

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
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
	// restarted empty), only if it is still missing (SETNX): nil leaves it
	// missing.
	Restore  func(ctx context.Context, tc allocator.TierConfig) error
	Interval func() time.Duration
	Log      *slog.Logger
	Metrics  *Metrics
}

// Run refreshes every Interval until ctx ends.
func (t *TierRefresher) Run(ctx context.Context) error {
	for sleep(ctx, t.Interval()) {
		t.Refresh(ctx)
	}
	return nil
}

// Refresh reads and applies the tier config once.
func (t *TierRefresher) Refresh(ctx context.Context) {
	start := time.Now()
	tc, err := t.Load(ctx)
	t.Metrics.observe("tier_refresh", start, err)
	switch {
	case errors.Is(err, allocator.ErrTierConfigMissing) && t.Restore != nil:
		if rerr := t.Restore(ctx, t.Current()); rerr != nil {
			t.Metrics.TierConfigLoads.WithLabelValues("error").Inc()
			t.Log.Warn("tier config missing from Redis; restoring it failed", "err", rerr)
			return
		}
		t.Metrics.TierConfigLoads.WithLabelValues("restored").Inc()
		t.Log.Warn("tier config was missing from Redis (restarted empty?): restored this replica's copy", "chain", t.Current().DefaultChain)
		return
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

func sameTiers(a, b allocator.TierConfig) bool {
	x, err1 := a.Marshal()
	y, err2 := b.Marshal()
	return err1 == nil && err2 == nil && bytes.Equal(x, y)
}
