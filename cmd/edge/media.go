package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/edge-voice/edge/allocator"
	"github.com/edge-voice/edge/config"
	"github.com/edge-voice/edge/proxy"
)

// setupMedia wires the /ws/pod/ media proxy: the per-call token in the
// media URL the allocation answers carry, the proxy on the public listener,
// its lease renewal and drain as a component.
func setupMedia(ctx context.Context, a *app) error {
	cfg := a.cfg()
	secret := []byte(cfg.Proxy.TokenSecret)
	if len(secret) == 0 {
		secret = proxy.RandomSecret()
		a.log.Warn("proxy.token_secret is not set: using a random per-process secret; every replica of a multi-replica deployment must share one, or media sockets reaching another replica are refused")
	}
	signer := proxy.NewSigner(secret, cfg.Proxy.TokenTTL)
	px := proxy.New(cfg.Proxy, a.pods.Lookup, leases{a.alloc}, signer, a.log.With("component", "proxy"), a.reg)

	a.calls.MediaSegment = signer.Mint
	a.surface.Media = px
	a.add(px)
	a.ready.Add("media", func(context.Context) error {
		if n, limit := px.Active(), a.cfg().Proxy.MaxSockets; n >= limit {
			return fmt.Errorf("%d media sockets open, proxy.max_sockets is %d", n, limit)
		}
		return nil
	})
	a.reloaded(func(_, cur *config.Config) {
		px.Apply(cur.Proxy)
		signer.SetTTL(cur.Proxy.TokenTTL)
	})
	a.quickStart = append(a.quickStart,
		"open its media:  go run ./cmd/edge ws '<ws_url from the allocate answer>'   (the fake agent echoes)")
	return nil
}

// leases adapts the allocator to proxy.Leases.
type leases struct{ alloc *allocator.Allocator }

func (l leases) CallPod(ctx context.Context, callID string) (string, error) {
	c, err := l.alloc.Call(ctx, callID)
	if err != nil {
		return "", noAllocation(err)
	}
	return c.PodName, nil
}

func (l leases) PodCall(ctx context.Context, pod string) (string, error) {
	info, err := l.alloc.PodInfo(ctx, pod)
	if err != nil {
		return "", noAllocation(err)
	}
	// A shared pod has several calls: without a token, which one this
	// socket is cannot be told.
	if len(info.Calls) > 0 || info.Lease == "" || info.Lease != info.CallID {
		return "", fmt.Errorf("pod %s has no single live call: %w", pod, proxy.ErrNoAllocation)
	}
	return info.Lease, nil
}

func (l leases) Renew(ctx context.Context, ls []proxy.Lease) ([]bool, error) {
	in := make([]allocator.Lease, len(ls))
	for i, x := range ls {
		in[i] = allocator.Lease{CallID: x.CallID, PodName: x.Pod}
	}
	return l.alloc.Renew(ctx, in)
}

func (l leases) Release(ctx context.Context, callID string) (string, error) {
	r, err := l.alloc.Release(ctx, callID)
	switch {
	case err != nil:
		return "", noAllocation(err)
	case r.Stale:
		return "stale", nil
	default:
		return "released", nil
	}
}

// noAllocation maps the allocator's "nothing there" outcomes to the
// proxy's; other errors (Redis down) stay what they are.
func noAllocation(err error) error {
	if errors.Is(err, allocator.ErrCallNotFound) || errors.Is(err, allocator.ErrPodNotFound) || errors.Is(err, allocator.ErrInvalidID) {
		return fmt.Errorf("%w: %w", proxy.ErrNoAllocation, err)
	}
	return err
}
