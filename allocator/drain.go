package allocator

import (
	"context"
	"fmt"
	"net"
	"net/netip"
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
	return a.DrainInstance(ctx, pod, netip.Addr{})
}

// DrainInstance is Drain for the instance of the pod at ip (the zero Addr:
// whichever is registered). A pod name outlives its pod: a force-deleted
// StatefulSet pod's replacement takes the name at once while the old
// container still runs its preStop, whose drain would otherwise take the
// new pod out of allocation for the draining TTL. When another address is
// registered under the name the drain is refused with ErrPodReplaced and
// changes nothing.
func (a *Allocator) DrainInstance(ctx context.Context, pod string, ip netip.Addr) (Drained, error) {
	if err := ValidateID("pod_name", pod); err != nil {
		return Drained{}, err
	}
	prefix := ""
	if ip.IsValid() {
		prefix = net.JoinHostPort(ip.Unmap().String(), "")
	}
	ttl := a.current.Load().cfg.DrainingTTL
	r, err := a.run(ctx, "drain", []string{a.keys.PodTier(pod)}, pod, ttl.Milliseconds(), prefix)
	if err != nil {
		return Drained{}, fmt.Errorf("drain %s: %w", pod, err)
	}
	rep := reply(r)
	switch rep.str(0) {
	case "not_found":
		return Drained{}, fmt.Errorf("drain %s: %w", pod, ErrPodNotFound)
	case "replaced":
		return Drained{}, fmt.Errorf("drain %s at %s: %w", pod, ip, ErrPodReplaced)
	}
	a.metrics.drains.Inc()
	return Drained{PodName: pod, HasActiveCall: rep.int(1) == 1, WasDraining: rep.int(2) == 1, Tier: rep.str(3)}, nil
}

// Undrained is the outcome of an undrain.
type Undrained struct {
	PodName string
	Tier    string
	// WasDraining: the pod was draining; false means nothing changed.
	WasDraining bool
	// BackInPool: the pod is in its available pool again (an exclusive
	// pod serving a call goes back when the call ends).
	BackInPool bool
}

// Undrain ends a drain: the draining flag goes and an idle pod is
// available again, in one atomic step; calls waiting for capacity get it
// first. A pod that was not draining is left as it is. An unknown pod is
// ErrPodNotFound.
func (a *Allocator) Undrain(ctx context.Context, pod string) (Undrained, error) {
	if err := ValidateID("pod_name", pod); err != nil {
		return Undrained{}, err
	}
	tiers := a.current.Load().cfg.Tiers.Tiers
	args := []any{pod}
	for name, t := range tiers {
		if t.Type == Shared {
			args = append(args, name)
		}
	}
	r, err := a.run(ctx, "undrain", []string{a.keys.PodTier(pod)}, args...)
	if err != nil {
		return Undrained{}, fmt.Errorf("undrain %s: %w", pod, err)
	}
	rep := reply(r)
	if rep.str(0) == "not_found" {
		return Undrained{}, fmt.Errorf("undrain %s: %w", pod, ErrPodNotFound)
	}
	return Undrained{PodName: pod, WasDraining: rep.int(1) == 1, Tier: rep.str(2), BackInPool: rep.int(3) == 1}, nil
}
