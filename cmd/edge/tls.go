package main

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/edge-voice/edge/acme"
	"github.com/edge-voice/edge/allocator"
	"github.com/edge-voice/edge/api"
	"github.com/edge-voice/edge/config"
	"github.com/edge-voice/edge/tlsconf"
)

// tlsStores are the certificate stores of the listeners that terminate TLS
// (nil: that listener speaks plain HTTP), and the public listener's ACME
// manager when tls.acme is enabled.
type tlsStores struct {
	public, admin *tlsconf.Store
	acme          *acme.Manager
	// acmeHTTP serves http-01 answers (nil unless tls.acme.challenges
	// has http-01).
	acmeHTTP *api.Listener
}

// newTLS reads the certificate files of both listeners now: a missing,
// unreadable, mismatched or expired pair refuses the start, naming the key
// and the file. reg may be nil (check-config).
func newTLS(cfg *config.Config, log *slog.Logger, reg prometheus.Registerer) (tlsStores, error) {
	var st tlsStores
	var errs []error
	// A listener with TLS on has a store, even one with no file pair (ACME
	// alone): the store is where its certificates are chosen.
	open := func(c tlsconf.Config, on bool, prefix string) *tlsconf.Store {
		if !on {
			return nil
		}
		s, err := tlsconf.New(c, prefix, cfg.Reload.Interval, log, reg)
		errs = append(errs, err)
		return s
	}
	st.public = open(cfg.TLS.Config, cfg.TLS.Enabled(), "tls")
	st.admin = open(cfg.AdminTLS, cfg.AdminTLS.Enabled(), "admin_tls")
	if err := errors.Join(errs...); err != nil {
		return tlsStores{}, fmt.Errorf("invalid configuration:\n%w", err)
	}
	return st, nil
}

// attachACME starts the public listener's ACME manager (tls.acme), which
// needs Redis: the certificates and the issuance lock are shared there by
// every replica. With http-01 it also binds the plain port-80 listener
// that answers the CA.
func (st *tlsStores) attachACME(cfg *config.Config, rdb redis.UniversalClient, log *slog.Logger, reg prometheus.Registerer) error {
	if !cfg.TLS.ACME.Enabled {
		return nil
	}
	if cfg.Redis.URL == "" {
		log.Warn("tls.acme with the embedded Redis: this process orders and keeps its own certificate; replicas share one only through a shared Redis")
	}
	m, err := acme.New(cfg.TLS.ACME, rdb, allocator.NewKeys(cfg.Redis.KeyPrefix), log.With("component", "acme"), reg)
	if err != nil {
		return fmt.Errorf("tls.acme: %w", err)
	}
	st.acme = m
	if slices.Contains(cfg.TLS.ACME.Challenges, acme.HTTP01) {
		lc := api.ListenerConfig{ReadHeaderTimeout: cfg.HTTP.ReadHeaderTimeout, IdleTimeout: cfg.HTTP.IdleTimeout,
			MaxConns: cfg.HTTP.MaxConnections, Grace: func() time.Duration { return time.Second },
			AccessLog: func() api.AccessLog { return cfg.HTTP.AccessLogConfig() }}
		st.acmeHTTP, err = api.NewListener("acme-http", cfg.TLS.ACME.HTTPListen, m.HTTPHandler(nil), lc, log, reg)
		if err != nil {
			return fmt.Errorf("tls.acme.http_listen: %w", err)
		}
	}
	return nil
}

// components are the stores' file pollers and the ACME manager's renewal
// loop and port-80 listener.
func (st tlsStores) components() []component {
	var out []component
	for _, s := range []*tlsconf.Store{st.public, st.admin} {
		if s != nil {
			out = append(out, s)
		}
	}
	if st.acme != nil {
		out = append(out, st.acme)
	}
	if st.acmeHTTP != nil {
		out = append(out, st.acmeHTTP)
	}
	return out
}

// serverConfig is s's listener TLS configuration, nil for plain HTTP. With
// ACME, the names in tls.acme.domains and the CA's tls-alpn-01 validation
// go to the ACME manager before any file certificate.
func serverConfig(s *tlsconf.Store, am *acme.Manager) *tls.Config {
	if s == nil {
		return nil
	}
	if am == nil {
		return s.ServerConfig()
	}
	c := s.ServerConfig(am.NextProtos()...)
	c.GetCertificate = func(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
		if am.Handles(hello) {
			return am.GetCertificate(hello)
		}
		return s.GetCertificate(hello)
	}
	return c
}
