package allocator

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// DemandWindow is how long a call refused for want of a pod counts in the
// demand signal after its last refusal: long enough to span a burst and the
// autoscaler's reaction, short enough to forget it. lua/lib/admission.lua's
// DEMAND_WINDOW_MS is the same.
const DemandWindow = 60 * time.Second

// TierDemand is one pool's demand.
type TierDemand struct {
	Tier string
	// Calls in progress (live leases).
	Calls int
	// Refused is the calls refused for want of a pod (no_pods,
	// all_draining, at_capacity) within DemandWindow whose chain ends
	// here: each call once, and a merchant's only up to what admission
	// would have admitted (its max_calls less its live calls, or
	// admission.demand.uncapped_calls).
	Refused int
	// PodCapacity is the calls one pod takes: 1, or a shared tier's
	// max_concurrent.
	PodCapacity int
	// Pods is how many pods the calls need: ceil((Calls + Refused) /
	// PodCapacity).
	Pods int
}

// demand reads every pool's demand: Status, then the refused calls
// pending in each pool (Keys.DemandPending), counted in one pipeline.
func (a *Allocator) demand(ctx context.Context) ([]TierDemand, error) {
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
	// Entries whose expiry has passed are no longer pending; the script
	// that next notes a refusal drops them.
	live := "(" + strconv.FormatInt(now.UnixMilli(), 10)
	counts := make([]*redis.IntCmd, len(pools))
	if len(pools) > 0 {
		_, err = a.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			for i, pool := range pools {
				counts[i] = p.ZCount(ctx, a.keys.DemandPending(pool.Tier), live, "+inf")
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("demand: %w", unavailable(err))
		}
	}
	tiers := a.Config().Tiers.Tiers
	out := make([]TierDemand, len(pools))
	for i, p := range pools {
		d := TierDemand{Tier: p.Tier, Calls: p.Calls, PodCapacity: 1, Refused: int(counts[i].Val())}
		if t, ok := tiers[p.Tier]; ok && t.Type == Shared && t.MaxConcurrent > 0 {
			d.PodCapacity = t.MaxConcurrent
		}
		d.Pods = (d.Calls + d.Refused + d.PodCapacity - 1) / d.PodCapacity
		out[i] = d
	}
	return out, nil
}
