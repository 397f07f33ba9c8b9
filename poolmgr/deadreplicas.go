package poolmgr

import (
	"context"
	"time"
)

// deadReplicas ends, on the leader, the calls of replicas that died (kill
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
		if len(res.Replicas) > 0 {
			d.m.Metrics.DeadReplicas.Add(float64(len(res.Replicas)))
			d.m.Metrics.Zombies.Add(float64(len(res.Sweep.Recovered)))
			d.m.Metrics.SlotsReclaimed.Add(float64(res.Sweep.SlotsReclaimed))
			named := res.Sweep.CallsEnded[:min(len(res.Sweep.CallsEnded), maxNamedCalls)]
			d.m.Log.Warn("replicas found dead (no heartbeat, no connection to redis): ended the calls they relayed",
				"replicas", res.Replicas, "calls_cut", res.CallsCut, "pods_recovered", res.Sweep.Recovered,
				"slots_reclaimed", res.Sweep.SlotsReclaimed, "call_sids", named)
		}
		if err != nil && ctx.Err() == nil {
			d.m.Log.Warn("dead-replica check failed; nothing concluded from it", "err", err)
		}
		return err
	})
}
