package allocator

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"
)

// MerchantSnapshot is the merchant config (merchant id -> JSON) and the
// merchant pool targets (pool id -> count) as Redis held them, raw: what a
// replica writes back when Redis restarted empty lost them (they live only
// in Redis).
type MerchantSnapshot struct {
	Configs, Targets map[string]string
}

// Empty reports whether there is nothing to write back.
func (s MerchantSnapshot) Empty() bool { return len(s.Configs) == 0 && len(s.Targets) == 0 }

// SnapshotMerchants reads the merchant config and targets in one
// transaction with whether the tier config exists: a snapshot is only worth
// keeping when it does (the keys were read from a Redis that had not just
// lost everything, so their absence means an operator removed them).
func (a *Allocator) SnapshotMerchants(ctx context.Context) (snap MerchantSnapshot, tiersPresent bool, err error) {
	var tiers *redis.IntCmd
	var configs, targets *redis.MapStringStringCmd
	_, err = a.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		tiers = p.Exists(ctx, a.keys.TierConfig())
		configs = p.HGetAll(ctx, a.keys.MerchantConfig())
		targets = p.HGetAll(ctx, a.keys.MerchantTargets())
		return nil
	})
	if err != nil {
		return MerchantSnapshot{}, false, fmt.Errorf("snapshot merchant config: %w", err)
	}
	return MerchantSnapshot{Configs: configs.Val(), Targets: targets.Val()}, tiers.Val() == 1, nil
}

// RestoreMerchants writes snap back field by field with HSETNX, so an entry
// an operator wrote meanwhile is never overwritten; it returns how many
// entries it wrote.
func (a *Allocator) RestoreMerchants(ctx context.Context, snap MerchantSnapshot) (int, error) {
	var written []*redis.BoolCmd
	_, err := a.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		for id, v := range snap.Configs {
			written = append(written, p.HSetNX(ctx, a.keys.MerchantConfig(), id, v))
		}
		for pool, v := range snap.Targets {
			written = append(written, p.HSetNX(ctx, a.keys.MerchantTargets(), pool, v))
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("restore merchant config: %w", err)
	}
	n := 0
	for _, w := range written {
		if w.Val() {
			n++
		}
	}
	return n, nil
}
