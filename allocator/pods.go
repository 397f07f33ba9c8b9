package allocator

import (
	"context"
	"fmt"
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

// RegisterPod makes the pod a member of its tier: assigned, and available
// unless it is draining, unready or busy. A pod registered in another tier
// moves if it is idle; a busy one stays and the call answers ErrPodBusy. It
// is SyncPods for one ready pod pinned to p.Tier, outside leader fencing.
func (a *Allocator) RegisterPod(ctx context.Context, p Pod) (Registered, error) {
	res, err := a.SyncPods(ctx, "", []PodState{{Name: p.Name, Address: p.Address, Tier: p.Tier, Ready: true}})
	if err != nil {
		return "", fmt.Errorf("register %s in %s: %w", p.Name, p.Tier, err)
	}
	switch r := res[0]; r.Outcome {
	case SyncAdded, SyncUnchanged, SyncMoved:
		return Registered(r.Outcome), nil
	case SyncBusy:
		return "", fmt.Errorf("register %s in %s: still serving calls in %s: %w", p.Name, p.Tier, r.Tier, ErrPodBusy)
	case SyncBadTier:
		return "", fmt.Errorf("register %s: %w: unknown tier %q", p.Name, ErrInvalidConfig, p.Tier)
	default:
		return "", fmt.Errorf("register %s in %s: unexpected outcome %q", p.Name, p.Tier, r.Outcome)
	}
}

// Unregistered is the outcome of UnregisterPod.
type Unregistered struct {
	Tier       string
	CallsEnded int
	// CallsMoving counts the calls handed to their media sockets, which
	// move them to another pod (MarkResumable) rather than end them.
	CallsMoving int
	// Calls are the calls ended (their tombstones say "unregistered").
	Calls []string
}

// UnregisterPod forgets the pod: out of every pool, its keys deleted, its
// calls ended (each leaves a tombstone, see Keys.CallEnded) but those whose
// socket moves them (MarkResumable), which are left to it. An unknown pod is ErrPodNotFound (leftover keys are still
// deleted). fence is "" or the Redis leader lock value the caller holds, as
// for SyncPods: a leader that lost the lock gets ErrFenced and removes
// nothing.
func (a *Allocator) UnregisterPod(ctx context.Context, fence, pod string) (Unregistered, error) {
	if err := ValidateID("pod_name", pod); err != nil {
		return Unregistered{}, err
	}
	cfg := a.current.Load().cfg
	r, err := a.run(ctx, "unregister", []string{a.keys.PodTier(pod)}, pod, fence, cfg.CallInfoTTL.Milliseconds(), cfg.EndedTTL.Milliseconds())
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
	return Unregistered{Tier: rep.str(1), CallsEnded: int(rep.int(2)), CallsMoving: int(rep.int(3)), Calls: rep.strs(4)}, nil
}
