package main

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/edge-voice/edge/api"
	"github.com/edge-voice/edge/config"
)

// newInternalListener binds listen.internal, the predecessor's surface for
// in-cluster callers (see api.Internal); nil when it is off ("").
func newInternalListener(cfg *config.Config, current func() *config.Config, s *api.Surface, reg prometheus.Registerer, log *slog.Logger) (*api.Listener, error) {
	if cfg.Listen.Internal == "" {
		return nil, nil
	}
	allow, err := api.ParseAllow(cfg.Internal.Allow)
	if err != nil {
		return nil, err
	}
	lc := api.ListenerConfig{
		ReadHeaderTimeout: cfg.HTTP.ReadHeaderTimeout, IdleTimeout: cfg.HTTP.IdleTimeout,
		MaxConns: cfg.HTTP.MaxConnections,
		Grace:    func() time.Duration { return current().HTTP.ShutdownTimeout },
	}
	h := s.InternalSurface(allow, func() string { return current().Internal.Token })
	ln, err := api.NewListener("internal", cfg.Listen.Internal, h, lc, log, reg)
	if err != nil {
		return nil, fmt.Errorf("listen.internal: %w", err)
	}
	return ln, nil
}
