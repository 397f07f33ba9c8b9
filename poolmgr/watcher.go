package poolmgr

import (
	"context"
	"errors"
	"time"

	"github.com/edge-voice/edge/allocator"
)

// watcher applies the pod source's events as they come (the leader's
// instant path; the reconciler catches whatever it misses): a ready pod is
// synced into its pools (a new one gets a tier), a not-ready or terminating
// one leaves its available pool keeping its calls, a deleted one is
// unregistered and its calls ended.
type watcher struct {
	m     *Manager
	fence string
}

func (w *watcher) Run(ctx context.Context) error {
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-w.m.Registry.Changed():
		}
		start := time.Now()
		err := w.apply(ctx)
		w.m.Metrics.observe("watcher", start, err)
		switch {
		case fenced(err):
			return err
		case err != nil && ctx.Err() == nil:
			w.m.Log.Warn("watcher: sync failed; retrying", "err", err)
			delay := w.m.RetryDelay
			if delay <= 0 {
				delay = time.Second
			}
			if !sleep(ctx, delay) {
				return nil
			}
		}
	}
}

// apply handles every dirty pod; on failure the pods not done are marked
// dirty again.
func (w *watcher) apply(ctx context.Context) error {
	present, deleted := w.m.Registry.TakeDirty()
	if len(present) > 0 {
		res, err := w.m.Pools.SyncPods(ctx, w.fence, present)
		countSync(w.m, res)
		logSync(w.m, res)
		if err != nil {
			w.retry(present[len(res):], deleted)
			return err
		}
		for _, r := range res {
			if r.Outcome == allocator.SyncBusy {
				// It should move and cannot yet: the reconciler retries.
				w.m.Log.Info("watcher: pod busy, tier change deferred", "pod", r.Pod, "tier", r.Tier)
			}
		}
	}
	for i, pod := range deleted {
		out, err := w.m.Pools.UnregisterPod(ctx, w.fence, pod)
		if errors.Is(err, allocator.ErrPodNotFound) {
			continue
		}
		if err != nil {
			w.retry(nil, deleted[i:])
			return err
		}
		w.m.Metrics.PodsRemoved.Inc()
		w.m.Log.Info("watcher: pod removed", "pod", pod, "tier", out.Tier, "calls_ended", out.CallsEnded, "calls_moving", out.CallsMoving,
			"call_sids", out.Calls[:min(len(out.Calls), maxNamedCalls)])
	}
	return nil
}

func (w *watcher) retry(present []allocator.PodState, deleted []string) {
	names := append([]string(nil), deleted...)
	for _, p := range present {
		names = append(names, p.Name)
	}
	w.m.Registry.MarkDirty(names...)
}

func countSync(m *Manager, res []allocator.SyncResult) {
	for _, r := range res {
		m.Metrics.PodsSynced.WithLabelValues(string(r.Outcome)).Inc()
	}
}

func logSync(m *Manager, res []allocator.SyncResult) {
	for _, r := range res {
		switch r.Outcome {
		case allocator.SyncAdded, allocator.SyncMoved, allocator.SyncUnready:
			m.Log.Info("pod synced", "pod", r.Pod, "outcome", r.Outcome, "tier", r.Tier)
		case allocator.SyncBadTier:
			m.Log.Error("pod pinned to an unknown tier; not registered", "pod", r.Pod, "tier", r.Tier)
		}
	}
}
