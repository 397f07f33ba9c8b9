package config

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"time"
)

// Listen holds the two listener addresses (restart: a bound socket stays).
type Listen struct {
	// Public serves provider webhooks, the generic allocate API and the
	// /ws/pod/ media proxy. Default ":8080". Port 0 picks a free port.
	Public string `koanf:"public"`
	// Admin serves release, drain, status, config, /metrics and the health
	// probes. Default ":9090".
	Admin string `koanf:"admin"`
}

func defaultListen() Listen {
	return Listen{Public: ":8080", Admin: "127.0.0.1:9090"}
}

// Validate checks both addresses are host:port and differ.
func (l Listen) Validate() error {
	pubHost, pub, errPub := hostPort("listen.public", l.Public, 0)
	admHost, adm, errAdm := hostPort("listen.admin", l.Admin, 0)
	errs := []error{errPub, errAdm}
	if errPub == nil && errAdm == nil && pub != 0 && pub == adm &&
		(pubHost == admHost || wildcard(pubHost) || wildcard(admHost)) {
		errs = append(errs, invalid("listen.admin", l.Admin, fmt.Sprintf("must not share port %d with listen.public", pub)))
	}
	return errors.Join(errs...)
}

// validateAdminExposure refuses an admin listener reachable from other hosts
// without a token: drain, tier rewrites and pprof would be open to anyone
// who can reach the port.
func validateAdminExposure(addr, token string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil || token != "" || loopback(host) {
		return nil // a bad address is listen.admin's own error
	}
	return fmt.Errorf("listen.admin: %q is reachable from other hosts and admin_token is not set: "+
		"set admin_token (EDGE_ADMIN_TOKEN, e.g. from a Secret) or listen on 127.0.0.1", addr)
}

// loopback reports a listen host that only this machine reaches.
func loopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}

// wildcard reports a listen host that binds every interface.
func wildcard(host string) bool {
	ip, err := netip.ParseAddr(host)
	return host == "" || err == nil && ip.IsUnspecified()
}

// Log configures the process logger.
type Log struct {
	// Level is "debug", "info", "warn" or "error". Default "info". Runtime:
	// wire SlogLevel into a slog.LevelVar from Watcher.OnChange.
	Level string `koanf:"level"`
	// Format is "text" or "json". Default "text".
	Format string `koanf:"format" reload:"restart"`
}

func defaultLog() Log {
	return Log{Level: "info", Format: "text"}
}

// SlogLevel is Level as a slog.Level; an invalid level reads as info.
func (l Log) SlogLevel() slog.Level {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(l.Level)); err != nil {
		return slog.LevelInfo
	}
	return lv
}

// Validate checks level and format are known names.
func (l Log) Validate() error {
	var errs []error
	switch l.Level {
	case "debug", "info", "warn", "error":
	default:
		errs = append(errs, invalid("log.level", l.Level, "must be debug, info, warn or error"))
	}
	switch l.Format {
	case "text", "json":
	default:
		errs = append(errs, invalid("log.format", l.Format, "must be text or json"))
	}
	return errors.Join(errs...)
}

// HTTP holds limits and timeouts shared by both listeners.
type HTTP struct {
	// MaxBodyBytes bounds a request body (webhooks are small forms).
	// Default 65536.
	MaxBodyBytes int64 `koanf:"max_body_bytes"`
	// ReadHeaderTimeout bounds reading request headers (http.Server field,
	// so restart). Default 5s.
	ReadHeaderTimeout time.Duration `koanf:"read_header_timeout" reload:"restart"`
	// RequestTimeout bounds handling one non-WebSocket request (an
	// allocation included). Default 10s.
	RequestTimeout time.Duration `koanf:"request_timeout"`
	// ShutdownTimeout is how long a stopping edge waits for API requests in
	// flight (webhooks, allocations, releases) after it stops accepting.
	// Default 30s. Media sockets have their own, longer deadline:
	// proxy.drain_timeout.
	ShutdownTimeout time.Duration `koanf:"shutdown_timeout"`
	// BodyTimeout bounds reading one request's body. Default 10s.
	BodyTimeout time.Duration `koanf:"body_timeout"`
	// WriteTimeout bounds writing one answer (plain requests; media sockets
	// are the proxy's). Default 15s, more than request_timeout so that a
	// timed-out request still gets its 503.
	WriteTimeout time.Duration `koanf:"write_timeout"`
	// IdleTimeout closes a keep-alive connection with no request for this
	// long. Default 60s.
	IdleTimeout time.Duration `koanf:"idle_timeout" reload:"restart"`
	// MaxConnections bounds the connections each listener holds (upgraded
	// media sockets excluded: proxy.max_sockets bounds those). At the
	// bound an idle connection, else the oldest, is shed. Default 8192.
	MaxConnections int `koanf:"max_connections" reload:"restart"`
}

func defaultHTTP() HTTP {
	return HTTP{
		MaxBodyBytes:      64 << 10,
		ReadHeaderTimeout: 5 * time.Second,
		RequestTimeout:    10 * time.Second,
		ShutdownTimeout:   30 * time.Second,
		BodyTimeout:       10 * time.Second,
		WriteTimeout:      15 * time.Second,
		IdleTimeout:       60 * time.Second,
		MaxConnections:    8192,
	}
}

// Validate checks every limit is positive.
func (h HTTP) Validate() error {
	var errs []error
	if h.MaxBodyBytes <= 0 {
		errs = append(errs, invalid("http.max_body_bytes", h.MaxBodyBytes, "must be > 0"))
	}
	errs = append(errs,
		positive("http.read_header_timeout", h.ReadHeaderTimeout),
		positive("http.request_timeout", h.RequestTimeout),
		positive("http.shutdown_timeout", h.ShutdownTimeout),
		positive("http.body_timeout", h.BodyTimeout),
		positive("http.idle_timeout", h.IdleTimeout),
	)
	if h.WriteTimeout <= h.RequestTimeout {
		errs = append(errs, invalid("http.write_timeout", h.WriteTimeout, "must be > http.request_timeout, or a timed-out request loses its answer"))
	}
	if h.MaxConnections < 1 {
		errs = append(errs, invalid("http.max_connections", h.MaxConnections, "must be >= 1"))
	}
	return errors.Join(errs...)
}
