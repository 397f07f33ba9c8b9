package poolmgr

import (
	"context"
	"log/slog"
	"time"

	"github.com/edge-voice/edge/allocator"
)

// deadReplicas ends, on the leader (when Manager.DeadReplicaInterval is
// set; edge runs the check in every replica's Presence instead), the calls of replicas that died (kill
// -9, a lost node): their heartbeats stopped and they hold no connection to
// Redis (allocator.SweepDeadReplicas). Their pods come back within the
// replica TTL instead of a lease TTL plus a sweep interval.
type deadReplicas struct {
	m     *Manager
	fence string
}

func (d *deadReplicas) Run(ctx context.Context) error {
	return every(ctx, d.m.DeadReplicaInterval, func(ctx context.Context) error {
		start := time.Now()
		res, err := d.m.Pools.SweepDeadReplicas(ctx, d.fence)
		d.m.Metrics.observe("dead_replicas", start, err)
		reportDead(d.m.Log, d.m.Metrics, res)
		if err != nil && ctx.Err() == nil {
			d.m.Log.Warn("dead-replica check failed; nothing concluded from it", "err", err)
		}
		return err
	})
}

// reportDead logs and counts what a dead-replica check did.
func reportDead(log *slog.Logger, m *Metrics, res allocator.DeadReplicas) {
	if len(res.Replicas) == 0 {
		return
	}
	m.DeadReplicas.Add(float64(len(res.Replicas)))
	m.Zombies.Add(float64(len(res.Sweep.Recovered)))
	m.SlotsReclaimed.Add(float64(res.Sweep.SlotsReclaimed))
	named := res.Sweep.CallsEnded[:min(len(res.Sweep.CallsEnded), maxNamedCalls)]
	log.Warn("replicas found dead (no heartbeat, no connection to redis): ended the calls they relayed or answered",
		"replicas", res.Replicas, "calls_cut", res.CallsCut, "pods_recovered", res.Sweep.Recovered,
		"slots_reclaimed", res.Sweep.SlotsReclaimed, "call_sids", named)
}
