package poolmgr

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/edge-voice/edge/allocator"
)

// rebalanceBudget bounds the pods one rebalancing moves, keeping the script
// short; the next reconcile continues.
const rebalanceBudget = 500

// reconciler diffs the whole pod source against Redis at the start of every
// term and then every ReconcileInterval: it syncs every pod (adding what is
// missing), unregisters ghosts, then rebalances tiers. Ghosts are removed
// only once the source has listed every pod.
type reconciler struct {
	m     *Manager
	fence string
}

func (r *reconciler) Run(ctx context.Context) error {
	select {
	case <-ctx.Done():
		return nil
	case <-r.m.Registry.Synced():
	}
	return every(ctx, r.m.ReconcileInterval, func(ctx context.Context) error {
		start := time.Now()
		err := r.reconcile(ctx)
		r.m.Metrics.observe("reconcile", start, err)
		if err != nil && ctx.Err() == nil {
			r.m.Log.Warn("reconcile failed", "err", err)
		}
		return err
	})
}

func (r *reconciler) reconcile(ctx context.Context) error {
	pods := r.m.Registry.Snapshot()
	res, err := r.m.Pools.SyncPods(ctx, r.fence, pods)
	countSync(r.m, res)
	logSync(r.m, res)
	if err != nil {
		return fmt.Errorf("reconcile: %w", err)
	}
	registered, err := r.m.Pools.RegisteredPods(ctx)
	if err != nil {
		return fmt.Errorf("reconcile: %w", err)
	}
	for _, pod := range registered {
		if _, ok := r.m.Registry.Get(pod); ok {
			continue
		}
		out, err := r.m.Pools.UnregisterPod(ctx, r.fence, pod)
		if err != nil && !errors.Is(err, allocator.ErrPodNotFound) {
			return fmt.Errorf("reconcile: %w", err)
		}
		r.m.Metrics.PodsRemoved.Inc()
		r.m.Log.Info("reconcile: ghost pod removed", "pod", pod, "tier", out.Tier, "calls_ended", out.CallsEnded, "calls_moving", out.CallsMoving,
			"call_sids", out.Calls[:min(len(out.Calls), maxNamedCalls)])
	}
	moves, err := r.m.Pools.Rebalance(ctx, r.fence, rebalanceBudget)
	if err != nil {
		return fmt.Errorf("reconcile: %w", err)
	}
	r.m.Metrics.Moves.Add(float64(len(moves)))
	for _, mv := range moves {
		r.m.Log.Info("rebalance: idle pod moved", "pod", mv.Pod, "from", mv.From, "to", mv.To)
	}
	return nil
}
