package allocator

import (
	"context"
	"fmt"
)

// Drained is the outcome of a drain.
type Drained struct {
	PodName       string
	Tier          string
	HasActiveCall bool
	// WasDraining: the pod was already draining; the flag was refreshed.
	WasDraining bool
}

// Drain takes the pod out of its available pool and flags it draining for
// the draining TTL, in one atomic step: no new call gets it, and its calls
// finish. Repeat drains refresh the flag. An unknown pod is ErrPodNotFound.
func (a *Allocator) Drain(ctx context.Context, pod string) (Drained, error) {
	if err := ValidateID("pod_name", pod); err != nil {
		return Drained{}, err
	}
	ttl := a.current.Load().cfg.DrainingTTL
	r, err := a.run(ctx, "drain", []string{a.keys.PodTier(pod)}, pod, ttl.Milliseconds())
	if err != nil {
		return Drained{}, fmt.Errorf("drain %s: %w", pod, err)
	}
	rep := reply(r)
	if rep.str(0) == "not_found" {
		return Drained{}, fmt.Errorf("drain %s: %w", pod, ErrPodNotFound)
	}
	a.metrics.drains.Inc()
	return Drained{PodName: pod, HasActiveCall: rep.int(1) == 1, WasDraining: rep.int(2) == 1, Tier: rep.str(3)}, nil
}
