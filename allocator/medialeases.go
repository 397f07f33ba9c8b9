package allocator

import (
	"context"
	"errors"
	"fmt"

	"github.com/edge-voice/edge/internal/mediacontract"
)

// MediaLeases is the allocator as the media proxy sees it (proxy.Leases):
// the one adapter edge runs, and the one the proxy's tests use.
type MediaLeases struct {
	Alloc *Allocator
}

func (l MediaLeases) Claim(ctx context.Context, callID, pod, holder string) error {
	return noAllocation(l.Alloc.ClaimMedia(ctx, callID, pod, holder))
}

func (l MediaLeases) Unclaim(ctx context.Context, callID, holder string) error {
	_, err := l.Alloc.DropMediaClaim(ctx, callID, holder)
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

func (l MediaLeases) Renew(ctx context.Context, ls []mediacontract.Lease) ([]bool, error) {
	in := make([]Lease, len(ls))
	for i, x := range ls {
		in[i] = Lease{CallID: x.CallID, PodName: x.Pod, Holder: x.Holder}
	}
	return l.Alloc.Renew(ctx, in)
}

func (l MediaLeases) Release(ctx context.Context, callID string) (string, error) {
	r, err := l.Alloc.Release(ctx, callID)
	switch {
	case err != nil:
		return "", noAllocation(err)
	case r.Stale:
		return "stale", nil
	default:
		return "released", nil
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
