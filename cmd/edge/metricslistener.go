package main

import (
	"fmt"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/edge-voice/edge/api"
	"github.com/edge-voice/edge/config"
)

// newMetricsListener binds listen.metrics, /metrics alone without
// credentials (see api.Surface.MetricsOnly); nil when it is off ("").
func newMetricsListener(cfg *config.Config, current func() *config.Config, s *api.Surface, acc *access, reg prometheus.Registerer, log *slog.Logger) (*api.Listener, error) {
	if cfg.Listen.Metrics == "" {
		return nil, nil
	}
	ln, err := api.NewListener("metrics", cfg.Listen.Metrics, s.MetricsOnly(), listenerConfig(cfg, current, acc), log, reg)
	if err != nil {
		return nil, fmt.Errorf("listen.metrics: %w", err)
	}
	return ln, nil
}
