package allocator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
)

// BootstrapTierConfig seeds voice:tier:config with tc unless it exists (SETNX),
// and returns the config Redis holds afterwards: after the first deploy the
// Redis copy is the source of truth, as with the predecessor.
func (a *Allocator) BootstrapTierConfig(ctx context.Context, tc TierConfig) (TierConfig, bool, error) {
	data, err := tc.Marshal()
	if err != nil {
		return TierConfig{}, false, err
	}
	created, err := a.rdb.SetNX(ctx, a.keys.TierConfig(), data, 0).Result()
	if err != nil {
		return TierConfig{}, false, fmt.Errorf("bootstrap tier config: %w", err)
	}
	if created {
		return tc, true, nil
	}
	stored, err := a.LoadTierConfig(ctx)
	return stored, false, err
}

// ErrTierConfigMissing: voice:tier:config does not exist (a Redis restarted
// empty); it is an ErrInvalidConfig too: there is nothing to use.
var ErrTierConfigMissing = fmt.Errorf("%w: tier config missing", ErrInvalidConfig)

// LoadTierConfig reads and validates voice:tier:config (any of the three
// shapes). A missing key is ErrInvalidConfig too: there is nothing to use.
func (a *Allocator) LoadTierConfig(ctx context.Context) (TierConfig, error) {
	data, err := a.rdb.Get(ctx, a.keys.TierConfig()).Bytes()
	if isNil(err) {
		return TierConfig{}, fmt.Errorf("load tier config: %w: %s", ErrTierConfigMissing, a.keys.TierConfig())
	}
	if err != nil {
		return TierConfig{}, fmt.Errorf("load tier config: %w", err)
	}
	tc, err := ParseTierConfig(data)
	if err == nil {
		err = tc.Validate()
	}
	if err != nil {
		return TierConfig{}, fmt.Errorf("load tier config: %w", err)
	}
	return tc, nil
}

// StoreTierConfig validates tc and writes it as the envelope. A tier that
// still has pods cannot change type: its available pool is a SET for an
// exclusive tier and a ZSET for a shared one, and every script touching it
// would fail on the other type. Move or remove its pods first.
func (a *Allocator) StoreTierConfig(ctx context.Context, tc TierConfig) error {
	if err := tc.Validate(); err != nil {
		return err
	}
	if err := a.checkTypeChanges(ctx, tc); err != nil {
		return err
	}
	data, err := tc.Marshal()
	if err != nil {
		return err
	}
	if err := a.rdb.Set(ctx, a.keys.TierConfig(), data, 0).Err(); err != nil {
		return fmt.Errorf("store tier config: %w", err)
	}
	return nil
}

// MerchantConfigs reads every merchant entry. Entries that do not parse are
// returned in bad, by merchant id, with the parse error.
func (a *Allocator) MerchantConfigs(ctx context.Context) (good map[string]MerchantConfig, bad map[string]string, err error) {
	raw, err := a.rdb.HGetAll(ctx, a.keys.MerchantConfig()).Result()
	if err != nil {
		return nil, nil, fmt.Errorf("read merchant config: %w", err)
	}
	good, bad = make(map[string]MerchantConfig, len(raw)), map[string]string{}
	for _, id := range slices.Sorted(maps.Keys(raw)) {
		var mc MerchantConfig
		if err := json.Unmarshal([]byte(raw[id]), &mc); err != nil {
			bad[id] = err.Error()
			continue
		}
		good[id] = mc
	}
	return good, bad, nil
}

// SetMerchantConfig validates and writes one merchant's entry.
func (a *Allocator) SetMerchantConfig(ctx context.Context, id string, mc MerchantConfig) error {
	if err := a.current.Load().cfg.Tiers.validateMerchantConfig(id, mc); err != nil {
		return err
	}
	data, err := json.Marshal(mc)
	if err != nil {
		return err
	}
	if err := a.rdb.HSet(ctx, a.keys.MerchantConfig(), id, data).Err(); err != nil {
		return fmt.Errorf("store merchant config %s: %w", id, err)
	}
	return nil
}

// DeleteMerchantConfig removes one merchant's entry; false if it had none.
func (a *Allocator) DeleteMerchantConfig(ctx context.Context, id string) (bool, error) {
	if err := ValidateID("merchant_id", id); err != nil {
		return false, err
	}
	n, err := a.rdb.HDel(ctx, a.keys.MerchantConfig(), id).Result()
	if err != nil {
		return false, fmt.Errorf("delete merchant config %s: %w", id, err)
	}
	return n == 1, nil
}

// checkTypeChanges refuses a type change of a tier that has pods, comparing
// with the config in Redis (or, if that is unreadable, the one in effect).
func (a *Allocator) checkTypeChanges(ctx context.Context, tc TierConfig) error {
	old, err := a.LoadTierConfig(ctx)
	if errors.Is(err, ErrUnavailable) {
		return err
	}
	if err != nil {
		old = a.current.Load().cfg.Tiers
	}
	var errs []error
	for _, name := range slices.Sorted(maps.Keys(tc.Tiers)) {
		before, ok := old.Tiers[name]
		if !ok || before.Type == tc.Tiers[name].Type {
			continue
		}
		n, err := a.rdb.SCard(ctx, a.keys.PoolAssigned(name)).Result()
		if err != nil {
			return fmt.Errorf("store tier config: %w", unavailable(err))
		}
		if n > 0 {
			errs = append(errs, fmt.Errorf("%w: tiers.%s.type: cannot change from %s to %s while the tier has %d pods; move them to another tier first",
				ErrInvalidConfig, name, before.Type, tc.Tiers[name].Type, n))
		}
	}
	return errors.Join(errs...)
}
