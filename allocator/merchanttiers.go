package allocator

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
)

// merchantTiers are the tiers of tc that the predecessor's tier assigner
// filled as merchants' dedicated pools (voice:merchant:<tier>:assigned and
// :pods, pod tier "merchant:<tier>"): exclusive tiers that neither the
// default chain nor any merchant's fallback names, with their targets. An
// ordinary pool of that name would be one nothing allocates from.
func merchantTiers(tc TierConfig, fallbacks map[string]bool) map[string]int {
	inChain := make(map[string]bool, len(tc.DefaultChain))
	for _, step := range tc.DefaultChain {
		inChain[step] = true
	}
	out := map[string]int{}
	for name, t := range tc.Tiers {
		if t.Type == Exclusive && !inChain[name] && !fallbacks[name] {
			out[name] = t.Target
		}
	}
	return out
}

// adoptMerchantTiers makes the tier config's merchant tiers merchant pools
// before tier assignment runs: their targets are written to
// K.merchant_targets (the tier config wins over an earlier admin target of
// the same pool), and assignmentOrder leaves them out. One read of the
// merchant config and at most one write; the leader's loops call it.
func (a *Allocator) adoptMerchantTiers(ctx context.Context) error {
	mt, err := a.readMerchantTiers(ctx, a.current.Load().cfg.Tiers)
	if err != nil {
		return err
	}
	a.merchantTiers.Store(&mt)
	if len(mt) == 0 {
		return nil
	}
	var args []any
	for _, id := range slices.Sorted(maps.Keys(mt)) {
		args = append(args, id, mt[id])
	}
	if err := a.rdb.HSet(ctx, a.keys.MerchantTargets(), args...).Err(); err != nil {
		return fmt.Errorf("store merchant tier targets: %w", err)
	}
	return nil
}

// readMerchantTiers reads the merchants' fallbacks (one read of the
// merchant config) and returns tc's merchant tiers (merchantTiers).
func (a *Allocator) readMerchantTiers(ctx context.Context, tc TierConfig) (map[string]int, error) {
	raw, err := a.rdb.HVals(ctx, a.keys.MerchantConfig()).Result()
	if err != nil {
		return nil, fmt.Errorf("read merchant config: %w", unavailable(err))
	}
	fallbacks := map[string]bool{}
	for _, v := range raw {
		var mc MerchantConfig
		if json.Unmarshal([]byte(v), &mc) == nil {
			for _, step := range mc.Fallback {
				fallbacks[step] = true
			}
		}
	}
	return merchantTiers(tc, fallbacks), nil
}

// isMerchantTier reports a tier adoptMerchantTiers last found to be a
// merchant pool.
func (a *Allocator) isMerchantTier(name string) bool {
	mt := a.merchantTiers.Load()
	if mt == nil {
		return false
	}
	_, ok := (*mt)[name]
	return ok
}
