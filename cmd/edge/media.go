package main

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"

	"github.com/edge-voice/edge/allocator"
	"github.com/edge-voice/edge/config"
	"github.com/edge-voice/edge/providers"
	"github.com/edge-voice/edge/proxy"
	"github.com/edge-voice/edge/proxy/mediaurl"
)

// newMedia makes the /ws/pod/ media proxy: pods resolves pod names (the
// pod registry, on every replica), signer checks the per-call token of the
// media URLs the allocation answers carry, fwd gives the X-Forwarded-*
// values pods get, retries how many times a provider opens a media socket
// again after a failed handshake. As a component it renews its sockets'
// leases and drains them on shutdown.
func newMedia(cfg *config.Config, pods func(string) (string, bool), alloc *allocator.Allocator, signer *proxy.Signer, fwd proxy.ForwardedFunc,
	provs mediaProviders, tracer trace.Tracer, reg prometheus.Registerer, log *slog.Logger) *proxy.Proxy {
	return proxy.New(cfg.Proxy, proxy.Deps{
		Lookup: pods, Leases: allocator.MediaLeases{Alloc: alloc, Replica: instanceName(cfg)}, Signer: signer, Forwarded: fwd,
		Tracer: tracer, HandshakeRetries: provs.MediaHandshakeRetries, Opening: provs.ResumeReplay,
		AfterMove: func(provider string) proxy.AfterMove {
			a := provs.AfterMove(provider)
			out := proxy.AfterMove{Notices: a.Notices}
			for _, l := range a.Legs {
				out.Legs = append(out.Legs, proxy.LegEvent{Sent: l.Sent, Echo: l.Echo, Name: l.Name})
			}
			return out
		},
		Upgrade: func(provider string) proxy.ClientUpgrade {
			u := provs.MediaUpgrade(provider)
			return proxy.ClientUpgrade{Headers: u.Headers, Subprotocols: u.Subprotocols}
		},
		Log: log.With("component", "proxy"), Registerer: reg,
	})
}

// mediaProviders is what the media proxy asks of the provider plugins:
// what each declared of its media stream.
type mediaProviders interface {
	MediaHandshakeRetries(provider string) int
	ResumeReplay(provider string) []string
	MediaUpgrade(provider string) providers.MediaUpgrade
	AfterMove(provider string) providers.AfterMove
}

// mediaReady is the "media" readiness check: a replica whose proxy is full
// takes no more calls.
func mediaReady(px *proxy.Proxy, current func() *config.Config) func(context.Context) error {
	return func(context.Context) error {
		if n, limit := px.Active(), current().Proxy.MaxSockets; n >= limit {
			return fmt.Errorf("%d media sockets open, proxy.max_sockets is %d", n, limit)
		}
		return nil
	}
}

// newSigner makes the media token signer from proxy.token_secret, shared by
// every replica.
func newSigner(cfg *config.Config, log *slog.Logger) *mediaurl.Signer {
	secret := []byte(cfg.Proxy.TokenSecret)
	if len(secret) == 0 {
		secret = mediaurl.RandomSecret()
		log.Warn("proxy.token_secret is not set: using a random per-process secret; every replica of a multi-replica deployment must share one, or media sockets reaching another replica are refused")
	}
	return mediaurl.NewSigner(secret, cfg.Proxy.TokenTTL)
}
