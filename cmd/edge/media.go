package main

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/edge-voice/edge/allocator"
	"github.com/edge-voice/edge/config"
	"github.com/edge-voice/edge/proxy"
)

// setupMedia wires the /ws/pod/ media proxy: the per-call token in the
// media URL the allocation answers carry, the proxy on the public listener,
// its lease renewal and drain as a component.
func setupMedia(ctx context.Context, a *app) error {
	cfg := a.cfg()
	signer := a.signer
	px := proxy.New(cfg.Proxy, a.pods.Lookup, allocator.MediaLeases{Alloc: a.alloc}, signer, a.log.With("component", "proxy"), a.reg)
	px.Forwarded = a.trust.headers
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
	a.quickStart = append(a.quickStart, func(string) string {
		return "open its media:  go run ./cmd/edge ws '<ws_url from the allocate answer>'   (the fake agent echoes)"
	})
	return nil
}

// newSigner makes the media token signer from proxy.token_secret, shared by
// every replica.
func newSigner(cfg *config.Config, log *slog.Logger) *proxy.Signer {
	secret := []byte(cfg.Proxy.TokenSecret)
	if len(secret) == 0 {
		secret = proxy.RandomSecret()
		log.Warn("proxy.token_secret is not set: using a random per-process secret; every replica of a multi-replica deployment must share one, or media sockets reaching another replica are refused")
	}
	return proxy.NewSigner(secret, cfg.Proxy.TokenTTL)
}
