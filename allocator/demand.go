package allocator

import (
	"context"
	"fmt"
	"strconv"
	"time"
)

// The demand signal (issue 10): how many pods each tier's calls need, for
// an autoscaler. Refused calls are counted by allocate.lua in buckets of
// DemandBucket (the constants there must match these).
const (
	DemandBucket = 10 * time.Second
	// DemandWindow is how far back refusals count: long enough to span a
	// burst and the autoscaler's reaction, short enough to forget it.
	DemandWindow = 60 * time.Second
)

// TierDemand is one pool's demand.
type TierDemand struct {
	Tier string
	// Calls in progress (live leases).
	Calls int
	// Refused is the calls refused for want of a pod (no_pods,
	// all_draining, at_capacity) within DemandWindow whose chain ends here.
	Refused int
	// PodCapacity is the calls one pod takes: 1, or a shared tier's
	// max_concurrent.
	PodCapacity int
	// Pods is how many pods the calls need: ceil((Calls + Refused) /
	// PodCapacity).
	Pods int
}

// Demand reads every pool's demand: Status, then the refusal buckets of
// DemandWindow in one MGET. Waiters for capacity will add to it when
// edge has them (docs/admission.md).
func (a *Allocator) Demand(ctx context.Context) ([]TierDemand, error) {
	pools, err := a.Status(ctx)
	if err != nil {
		return nil, err
	}
	return a.demandOf(ctx, pools)
}

// demandOf adds the refusals to pools read by Status.
func (a *Allocator) demandOf(ctx context.Context, pools []PoolStatus) ([]TierDemand, error) {
	now, err := a.rdb.Time(ctx).Result()
	if err != nil {
		return nil, fmt.Errorf("demand: %w", unavailable(err))
	}
	buckets := int64(DemandWindow / DemandBucket)
	last := now.UnixMilli() / DemandBucket.Milliseconds()
	keys := make([]string, 0, len(pools)*int(buckets))
	for _, p := range pools {
		for b := last - buckets + 1; b <= last; b++ {
			keys = append(keys, a.keys.DemandRefused(p.Tier, strconv.FormatInt(b, 10)))
		}
	}
	var vals []any
	if len(keys) > 0 {
		if vals, err = a.rdb.MGet(ctx, keys...).Result(); err != nil {
			return nil, fmt.Errorf("demand: %w", unavailable(err))
		}
	}
	tiers := a.Config().Tiers.Tiers
	out := make([]TierDemand, len(pools))
	for i, p := range pools {
		d := TierDemand{Tier: p.Tier, Calls: p.Calls, PodCapacity: 1}
		if t, ok := tiers[p.Tier]; ok && t.Type == Shared && t.MaxConcurrent > 0 {
			d.PodCapacity = t.MaxConcurrent
		}
		for _, v := range vals[i*int(buckets) : (i+1)*int(buckets)] {
			if s, ok := v.(string); ok {
				var n int
				fmt.Sscan(s, &n)
				d.Refused += n
			}
		}
		d.Pods = (d.Calls + d.Refused + d.PodCapacity - 1) / d.PodCapacity
		out[i] = d
	}
	return out, nil
}
