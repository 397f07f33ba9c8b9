package main

import (
	"context"
	"log/slog"
	"time"

	"github.com/edge-voice/edge/allocator"
	"github.com/edge-voice/edge/config"
)

// warnPredecessorCalls WARNs at start when Redis holds calls the predecessor
// allocated while edge's lease is shorter than the predecessor's: nothing
// renews those calls' leases (their media flows through nginx), so edge's
// sweep would end them early. allocator.migration says so.
func warnPredecessorCalls(ctx context.Context, alloc *allocator.Allocator, cfg *config.Config, log *slog.Logger) {
	lease := cfg.Allocator.EffectiveLeaseTTL()
	if lease >= allocator.PredecessorLeaseTTL {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	n, err := alloc.PredecessorCalls(ctx, 10000)
	if err != nil {
		log.Warn("could not look for the predecessor's calls", "err", err)
		return
	}
	if n > 0 {
		log.Warn("Redis holds calls the predecessor allocated, and edge's lease is shorter than its 15 minutes: "+
			"their pods will be recovered while their media still flows through nginx. "+
			"Set allocator.migration: true until media flows through edge (docs/migration.md)",
			"predecessor_calls", n, "lease_ttl", lease)
	}
}
