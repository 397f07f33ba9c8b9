package poolmgr

import (
	"context"
	"fmt"
	"time"
)

// sweeper runs the zombie sweep every SweepInterval over every registered
// pod, one script call per batch (see allocator.SweepPods). It reads Redis
// only: the source's view is the reconciler's business.
type sweeper struct {
	m     *Manager
	fence string
}

func (s *sweeper) Run(ctx context.Context) error {
	// The first sweep waits one interval: a fresh leader reconciles first.
	if !sleep(ctx, s.m.SweepInterval()) {
		return nil
	}
	return every(ctx, s.m.SweepInterval, func(ctx context.Context) error {
		start := time.Now()
		err := s.sweep(ctx)
		s.m.Metrics.observe("sweep", start, err)
		if err != nil && ctx.Err() == nil {
			s.m.Log.Warn("zombie sweep failed; nothing concluded from it", "err", err)
		}
		return err
	})
}

func (s *sweeper) sweep(ctx context.Context) error {
	pods, err := s.m.Pools.RegisteredPods(ctx)
	if err != nil {
		return fmt.Errorf("sweep: %w", err)
	}
	res, err := s.m.Pools.SweepPods(ctx, s.fence, pods)
	// What the batches that ran did is counted even if a later one failed.
	s.m.Metrics.Zombies.Add(float64(len(res.Recovered)))
	s.m.Metrics.SlotsReclaimed.Add(float64(res.SlotsReclaimed))
	s.m.Metrics.SharedReadded.Add(float64(res.SharedReadded))
	if len(res.Recovered) > 0 || res.SlotsReclaimed > 0 || res.SharedReadded > 0 || len(res.CallsEnded) > 0 {
		// One line per sweep, however many calls it ended: each named (up
		// to maxNamedCalls) so that a call's thread of logs ends here.
		named := res.CallsEnded[:min(len(res.CallsEnded), maxNamedCalls)]
		s.m.Log.Info("zombie sweep", "recovered", res.Recovered, "slots_reclaimed", res.SlotsReclaimed,
			"shared_readded", res.SharedReadded, "calls_expired", res.CallsExpired,
			"calls_ended", len(res.CallsEnded), "call_sids", named)
	}
	if res.Skipped > 0 {
		s.m.Log.Warn("zombie sweep: pods skipped, their pool's Redis type contradicts the tier type", "pods", res.Skipped)
	}
	return err
}

// maxNamedCalls bounds the call ids one sweep line names; the rest are
// counted (calls_ended) and their timelines say "expired".
const maxNamedCalls = 50
