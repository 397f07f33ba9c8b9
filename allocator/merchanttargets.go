package allocator

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
)

// MerchantTargets reads the target pod count of every merchant pool (the
// pools tier assignment fills first). Unparsable entries read as 0.
func (a *Allocator) MerchantTargets(ctx context.Context) (map[string]int, error) {
	raw, err := a.rdb.HGetAll(ctx, a.keys.MerchantTargets()).Result()
	if err != nil {
		return nil, fmt.Errorf("read merchant pool targets: %w", err)
	}
	out := make(map[string]int, len(raw))
	for _, id := range slices.Sorted(maps.Keys(raw)) {
		n, _ := strconv.Atoi(raw[id])
		out[id] = n
	}
	return out, nil
}

// SetMerchantTarget sets how many pods a merchant pool should hold; 0
// removes the target (the pool keeps its pods until rebalancing moves them).
func (a *Allocator) SetMerchantTarget(ctx context.Context, pool string, target int) error {
	if err := ValidateID("pool", pool); err != nil {
		return err
	}
	if target < 0 {
		return fmt.Errorf("%w: pool %s: target must be >= 0 (got %d)", ErrInvalidConfig, pool, target)
	}
	var err error
	if target == 0 {
		err = a.rdb.HDel(ctx, a.keys.MerchantTargets(), pool).Err()
	} else {
		err = a.rdb.HSet(ctx, a.keys.MerchantTargets(), pool, target).Err()
	}
	if err != nil {
		return fmt.Errorf("store merchant pool target %s: %w", pool, err)
	}
	return nil
}
