package allocator

import (
	"context"
	"errors"
	"fmt"

	"github.com/edge-voice/edge/internal/mediacontract"
)

// MediaLeases is the allocator as the media proxy sees it (proxy.Leases):
// the one adapter edge runs, and the way other packages' tests claim,
// drop claims and fail pods (the allocator's own steps are unexported).
type MediaLeases struct {
	Alloc *Allocator
	// Replica names this replica on the calls whose sockets it admits
	// (the call's timeline).
	Replica string
}

func (l MediaLeases) Claim(ctx context.Context, callID, pod, holder string) (mediacontract.Claimed, error) {
	c, err := l.Alloc.claimMediaOn(ctx, callID, pod, holder, l.Replica)
	return c, noAllocation(err)
}

func (l MediaLeases) MoveCall(ctx context.Context, callID, pod, holder, reason string, ej mediacontract.Ejection) (string, bool, error) {
	f, err := l.Alloc.moveCall(ctx, callID, pod, holder, reason, ej, moveConnect)
	if errors.Is(err, ErrNoOtherPod) {
		return "", f.Ejected, fmt.Errorf("%w: %w", mediacontract.ErrNoOtherPod, err)
	}
	return f.Pod, f.Ejected, noAllocation(err)
}

func (l MediaLeases) ResumeCall(ctx context.Context, callID, pod, holder string, ej mediacontract.Ejection, blame bool) (string, bool, error) {
	f, err := l.Alloc.ResumeCall(ctx, callID, pod, holder, ej, blame)
	if errors.Is(err, ErrNoOtherPod) {
		return "", f.Ejected, fmt.Errorf("%w: %w", mediacontract.ErrNoOtherPod, err)
	}
	return f.Pod, f.Ejected, noAllocation(err)
}

func (l MediaLeases) PodFailed(ctx context.Context, pod, reason string, ej mediacontract.Ejection) (bool, error) {
	ejected, _, err := l.Alloc.podFailed(ctx, pod, reason, ej)
	return ejected, err
}

func (l MediaLeases) Ejected(ctx context.Context) ([]mediacontract.EjectedPod, error) {
	return l.Alloc.Ejected(ctx)
}

func (l MediaLeases) Reinstate(ctx context.Context, pod string) (bool, error) {
	return l.Alloc.reinstate(ctx, pod)
}

func (l MediaLeases) Unclaim(ctx context.Context, callID, holder string) error {
	_, err := l.Alloc.dropMediaClaim(ctx, callID, holder, "")
	return noAllocation(err)
}

func (l MediaLeases) UnclaimFailed(ctx context.Context, callID, holder string) error {
	dropped, err := l.Alloc.dropFailedMediaClaim(ctx, callID, holder)
	if err == nil && !dropped {
		// The call ended or another socket took it: nothing was kept.
		return fmt.Errorf("drop the failed media claim of %s: %w", callID, mediacontract.ErrNoAllocation)
	}
	return noAllocation(err)
}

func (l MediaLeases) PodCall(ctx context.Context, pod string) (string, error) {
	info, err := l.Alloc.PodInfo(ctx, pod)
	if err != nil {
		return "", noAllocation(err)
	}
	// A shared pod has several calls: without a token, which one this
	// socket is cannot be told.
	if len(info.Calls) > 0 || info.Lease == "" || info.Lease != info.CallID {
		return "", fmt.Errorf("pod %s has no single live call: %w", pod, mediacontract.ErrNoAllocation)
	}
	return info.Lease, nil
}

func (l MediaLeases) Renew(ctx context.Context, ls []mediacontract.Lease) ([]mediacontract.Renewal, error) {
	in := make([]Lease, len(ls))
	for i, x := range ls {
		in[i] = Lease{CallID: x.CallID, PodName: x.Pod, Holder: x.Holder}
	}
	return l.Alloc.renewSockets(ctx, in)
}

func (l MediaLeases) MarkResumable(ctx context.Context, callID, holder string) error {
	marked, err := l.Alloc.MarkResumable(ctx, callID, holder)
	if err == nil && !marked {
		return fmt.Errorf("mark %s resumable: %w", callID, mediacontract.ErrNoAllocation)
	}
	return noAllocation(err)
}

func (l MediaLeases) Release(ctx context.Context, callID string, end mediacontract.SocketEnd) (string, error) {
	r, err := l.Alloc.releaseSocketEnd(ctx, callID, end)
	switch {
	case errors.Is(err, ErrUnavailable):
		// Redis is down for now: the release is retried until it answers,
		// so the pod is not held for a whole lease.
		l.Alloc.releaseLater(callID, ReleasedBySocket, &end)
		return "retrying", nil
	case err != nil:
		return "", noAllocation(err)
	case r.Stale:
		return "stale", nil
	default:
		return "released", nil
	}
}

// ReleaseRefused ends, once Redis answers, a call whose media socket this
// replica refused for want of Redis, unless a socket holds it by then.
// It returns at once: Redis has just failed, so the release is queued
// and retried as a socket's is.
func (l MediaLeases) ReleaseRefused(callID string) {
	if ValidateID("call_sid", callID) == nil {
		l.Alloc.releaseLater(callID, ReleasedRefused, nil)
	}
}

// noAllocation maps the allocator's "nothing there" and "already claimed"
// outcomes to the proxy's; other errors (Redis down) stay what they are.
func noAllocation(err error) error {
	switch {
	case errors.Is(err, ErrCallNotFound) || errors.Is(err, ErrPodNotFound) || errors.Is(err, ErrInvalidID):
		return fmt.Errorf("%w: %w", mediacontract.ErrNoAllocation, err)
	case errors.Is(err, ErrMediaClaimed):
		return fmt.Errorf("%w: %w", mediacontract.ErrClaimed, err)
	}
	return err
}
