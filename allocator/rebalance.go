package allocator

import (
	"context"
	"fmt"
)

// Move is one pod moved by Rebalance.
type Move struct {
	Pod, From, To string
}

// Rebalance moves idle pods from pools above their target to pools below it,
// at most maxMoves in this call, in one round trip; busy pods stay for a
// later call. fence as for SyncPods.
func (a *Allocator) Rebalance(ctx context.Context, fence string, maxMoves int) ([]Move, error) {
	if err := a.adoptMerchantTiers(ctx); err != nil {
		return nil, fmt.Errorf("rebalance: %w", err)
	}
	tiers := a.current.Load().cfg.Tiers
	order := a.assignmentOrder()
	args := []any{fence, maxMoves, len(order)}
	for _, name := range order {
		t := tiers.Tiers[name]
		args = append(args, name, string(t.Type), t.Target)
	}
	r, err := a.run(ctx, "rebalance", []string{a.keys.PodMetadata()}, args...)
	if err != nil {
		return nil, fmt.Errorf("rebalance: %w", err)
	}
	rep := reply(r)
	if rep.str(0) == "fenced" {
		return nil, fmt.Errorf("rebalance: %w", ErrFenced)
	}
	var moves []Move
	for i := 1; i+2 < len(rep); i += 3 {
		moves = append(moves, Move{Pod: rep.str(i), From: rep.str(i + 1), To: rep.str(i + 2)})
	}
	return moves, nil
}
