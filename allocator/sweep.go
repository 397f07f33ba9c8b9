package allocator

import (
	"context"
	"fmt"
	"slices"
)

// SweepResult counts what a zombie sweep did.
type SweepResult struct {
	// Recovered are exclusive and merchant pods given back to their pool
	// (zombies: assigned, idle by lease, yet not available).
	Recovered []string
	// SlotsReclaimed is shared-pool score taken back from calls that died
	// without a release.
	SlotsReclaimed int
	// SharedReadded counts shared pods put back into their missing ZSET.
	SharedReadded int
	// CallsExpired counts per-call leases dropped because they expired.
	CallsExpired int
	// CallsEnded are the calls ended because their lease ran out (their
	// tombstones say "expired").
	CallsEnded []string
	// Skipped counts pods whose pool's Redis type contradicts the tier type.
	Skipped int
	// Batches is the number of script calls (round trips) made.
	Batches int
}

// SweepPods runs the zombie sweep over pods, one script call (one round
// trip) per BatchSize pods. A call it finds dead leaves a tombstone (see
// Keys.CallEnded). A Redis error stops the sweep and is returned:
// nothing is ever concluded from a failed read. fence as for SyncPods.
func (a *Allocator) SweepPods(ctx context.Context, fence string, pods []string) (SweepResult, error) {
	cfg := a.current.Load().cfg
	tiers := cfg.Tiers
	// Every tier of the config: a pod pinned to a tier that tier
	// assignment leaves out is swept like any other.
	order := tiers.derivedChain()
	migration := int64(0)
	if cfg.Migration {
		migration = PredecessorLeaseTTL.Milliseconds()
	}
	head := []any{fence, cfg.CallInfoTTL.Milliseconds(), cfg.EndedTTL.Milliseconds(), migration, len(order)}
	for _, name := range order {
		head = append(head, name, string(tiers.Tiers[name].Type))
	}
	var res SweepResult
	for batch := range slices.Chunk(pods, BatchSize) {
		args := make([]any, 0, len(head)+len(batch))
		args = append(args, head...)
		for _, p := range batch {
			args = append(args, p)
		}
		r, err := a.run(ctx, "sweep", []string{a.keys.PodMetadata()}, args...)
		res.Batches++
		if err != nil {
			return res, fmt.Errorf("sweep %d pods: %w", len(batch), err)
		}
		rep := reply(r)
		if rep.str(0) == "fenced" {
			return res, fmt.Errorf("sweep: %w", ErrFenced)
		}
		res.SlotsReclaimed += int(rep.int(2))
		res.SharedReadded += int(rep.int(3))
		res.CallsExpired += int(rep.int(4))
		res.Skipped += int(rep.int(5))
		rest := rep.strs(6)
		n := min(int(rep.int(1)), len(rest))
		res.Recovered = append(res.Recovered, rest[:n]...)
		res.CallsEnded = append(res.CallsEnded, rest[n:]...)
	}
	return res, nil
}
