package poolmgr

import (
	"context"
	"log/slog"
	"time"

	"github.com/edge-voice/edge/allocator"
)

// Presence is every replica's heartbeat: it tells the leader this replica
// is alive (so that its calls are ended promptly should it die) and
// notices when Redis lost its data. Then the calls whose sockets this
// replica relays are written back before any pod is offered again (the
// allocator's recovery hold), and so is the policy that lived only in
// Redis (tier and merchant config, through AfterDataLost). Run it on every
// replica.
type Presence struct {
	// Beat is allocator.Allocator.Heartbeat for this replica.
	Beat func(ctx context.Context) (allocator.Beat, error)
	// AfterDataLost runs after a beat found Redis emptied and wrote this
	// replica's calls back (the tier refresher's Refresh); nil: nothing.
	AfterDataLost func(ctx context.Context)
	// DeadReplicas, when set, is given the stale replicas every beat found
	// and ends the calls of those that are dead
	// (allocator.Allocator.EndDeadReplicas, unfenced; no stale replica, no
	// round trip):
	// on every replica, not only the leader, so that the leader's own
	// death is noticed within the replica TTL rather than after a new
	// leader is elected. The check is idempotent and rests on Redis' own
	// evidence (a stale beat and no connection), so two replicas running
	// it at once end each call once.
	DeadReplicas func(ctx context.Context, stale []string) (allocator.DeadReplicas, error)
	Interval     func() time.Duration
	Log          *slog.Logger
	Metrics      *Metrics
}

// Run beats every Interval until ctx ends.
func (p *Presence) Run(ctx context.Context) error {
	failing := false
	for {
		start := time.Now()
		beat, err := p.Beat(ctx)
		p.Metrics.observe("heartbeat", start, err)
		switch {
		case err != nil && ctx.Err() == nil:
			// One line per outage, not one per beat.
			if !failing {
				p.Log.Warn("heartbeat failed; retrying every interval", "err", err)
			}
			failing = true
		case err == nil:
			if failing {
				p.Log.Info("heartbeat recovered")
			}
			failing = false
		}
		if beat.DataLost && err == nil {
			p.Metrics.DataLost.Inc()
			p.Metrics.Reasserted.WithLabelValues("reasserted").Add(float64(beat.Reasserted))
			p.Metrics.Reasserted.WithLabelValues("lost").Add(float64(beat.Lost))
			p.Log.Warn("redis lost its data (restarted empty or flushed): wrote back the calls this replica relays",
				"reasserted", beat.Reasserted, "lost", beat.Lost)
			if p.AfterDataLost != nil {
				p.AfterDataLost(ctx)
			}
		}
		if p.DeadReplicas != nil && err == nil && len(beat.Stale) > 0 {
			start := time.Now()
			res, derr := p.DeadReplicas(ctx, beat.Stale)
			p.Metrics.observe("dead_replicas", start, derr)
			reportDead(p.Log, p.Metrics, res)
			if derr != nil && ctx.Err() == nil {
				p.Log.Warn("dead-replica check failed; nothing concluded from it", "err", derr)
			}
		}
		if !sleep(ctx, p.Interval()) {
			return nil
		}
	}
}
