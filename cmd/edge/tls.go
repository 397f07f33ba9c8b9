package main

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/edge-voice/edge/config"
	"github.com/edge-voice/edge/tlsconf"
)

// tlsStores are the certificate stores of the listeners that terminate TLS
// (nil: that listener speaks plain HTTP).
type tlsStores struct {
	public, admin *tlsconf.Store
}

// newTLS reads the certificate files of both listeners now: a missing,
// unreadable, mismatched or expired pair refuses the start, naming the key
// and the file. reg may be nil (check-config).
func newTLS(cfg *config.Config, log *slog.Logger, reg prometheus.Registerer) (tlsStores, error) {
	var st tlsStores
	var errs []error
	open := func(c tlsconf.Config, prefix string) *tlsconf.Store {
		if !c.Enabled() {
			return nil
		}
		s, err := tlsconf.New(c, prefix, cfg.Reload.Interval, log, reg)
		errs = append(errs, err)
		return s
	}
	st.public = open(cfg.TLS, "tls")
	st.admin = open(cfg.AdminTLS, "admin_tls")
	if err := errors.Join(errs...); err != nil {
		return tlsStores{}, fmt.Errorf("invalid configuration:\n%w", err)
	}
	return st, nil
}

// components are the stores' file pollers.
func (st tlsStores) components() []component {
	var out []component
	for _, s := range []*tlsconf.Store{st.public, st.admin} {
		if s != nil {
			out = append(out, s)
		}
	}
	return out
}

// serverConfig is s's listener TLS configuration, nil for plain HTTP.
func serverConfig(s *tlsconf.Store) *tls.Config {
	if s == nil {
		return nil
	}
	return s.ServerConfig()
}
