package allocator

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
)

// Pod is a voice-agent pod as edge registers it.
type Pod struct {
	Name string `json:"name"`
	// Tier is a tier name or "merchant:<id>".
	Tier string `json:"tier"`
	// Address is "ip:port", recorded in the pod metadata for operators.
	Address string `json:"address,omitempty"`
}

// Registered is the outcome of RegisterPod.
type Registered string

const (
	RegisteredAdded     Registered = "added"
	RegisteredUnchanged Registered = "unchanged"
	RegisteredMoved     Registered = "moved"
)

// RegisterPod makes the pod a member of its tier in one step: assigned, and
// available unless it is draining or busy. A pod registered in another tier
// moves if it is idle; a busy one stays and the call answers ErrPodBusy.
func (a *Allocator) RegisterPod(ctx context.Context, p Pod) (Registered, error) {
	if err := ValidateID("pod_name", p.Name); err != nil {
		return "", err
	}
	kind, err := a.poolType(p.Tier)
	if err != nil {
		return "", fmt.Errorf("register %s: %w", p.Name, err)
	}
	meta, err := json.Marshal(p)
	if err != nil {
		return "", err
	}
	r, err := a.run(ctx, "register", []string{a.keys.PodTier(p.Name)}, p.Name, p.Tier, string(kind), string(meta))
	if err != nil {
		return "", fmt.Errorf("register %s in %s: %w", p.Name, p.Tier, err)
	}
	rep := reply(r)
	if rep.str(0) == "busy" {
		return "", fmt.Errorf("register %s in %s: still serving calls in %s: %w", p.Name, p.Tier, rep.str(1), ErrPodBusy)
	}
	return Registered(rep.str(0)), nil
}

// poolType is the pool type of a tier value; merchant pools are exclusive.
func (a *Allocator) poolType(tier string) (TierType, error) {
	if id, ok := strings.CutPrefix(tier, merchantStep); ok {
		return Exclusive, ValidateID("merchant pool", id)
	}
	t, ok := a.current.Load().cfg.Tiers.Tiers[tier]
	if !ok {
		return "", fmt.Errorf("%w: unknown tier %q", ErrInvalidConfig, tier)
	}
	return t.Type, nil
}

// Unregistered is the outcome of UnregisterPod.
type Unregistered struct {
	Tier       string
	CallsEnded int
}

// UnregisterPod forgets the pod: out of every pool, its keys deleted, its
// calls ended. An unknown pod is ErrPodNotFound (leftover keys are still
// deleted). fence is "" or the Redis leader lock value the caller holds, as
// for SyncPods: a leader that lost the lock gets ErrFenced and removes
// nothing.
func (a *Allocator) UnregisterPod(ctx context.Context, fence, pod string) (Unregistered, error) {
	if err := ValidateID("pod_name", pod); err != nil {
		return Unregistered{}, err
	}
	r, err := a.run(ctx, "unregister", []string{a.keys.PodTier(pod)}, pod, fence)
	if err != nil {
		return Unregistered{}, fmt.Errorf("unregister %s: %w", pod, err)
	}
	rep := reply(r)
	switch rep.str(0) {
	case "not_found":
		return Unregistered{}, fmt.Errorf("unregister %s: %w", pod, ErrPodNotFound)
	case "fenced":
		return Unregistered{}, fmt.Errorf("unregister %s: %w", pod, ErrFenced)
	}
	return Unregistered{Tier: rep.str(1), CallsEnded: int(rep.int(2))}, nil
}
