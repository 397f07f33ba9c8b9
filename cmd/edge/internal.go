package main

import (
	"fmt"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/edge-voice/edge/api"
	"github.com/edge-voice/edge/config"
)

// newInternalListener binds listen.internal, the predecessor's surface for
// in-cluster callers (see api.Internal); nil when it is off ("").
func newInternalListener(cfg *config.Config, current func() *config.Config, s *api.Surface, acc *access, reg prometheus.Registerer, log *slog.Logger) (*api.Listener, error) {
	if cfg.Listen.Internal == "" {
		return nil, nil
	}
	allow, err := api.ParseAllow(cfg.Internal.Allow)
	if err != nil {
		return nil, err
	}
	lc := listenerConfig(cfg, current, acc)
	h := s.InternalSurface(allow, func() string { return current().Internal.Token })
	ln, err := api.NewListener("internal", cfg.Listen.Internal, h, lc, log, reg)
	if err != nil {
		return nil, fmt.Errorf("listen.internal: %w", err)
	}
	return ln, nil
}
