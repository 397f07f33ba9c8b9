package api

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/edge-voice/edge/calls"
	"github.com/edge-voice/edge/forwarded"
	"github.com/edge-voice/edge/internal/confcheck"
)

// Config is the HTTP surface's part of edge's configuration: the top-level
// keys listen.*, public_base_url, admin_token, admin_auth.* and http.*.
type Config struct {
	// Listen holds the listener addresses.
	Listen Listen `koanf:"listen" reload:"restart"`
	// PublicBaseURL is the ws:// or wss:// base that providers are told to
	// open media sockets at (<base>/ws/pod/<pod>/...). Empty: derived from
	// Listen.Public, see PublicURL. A trailing slash is trimmed.
	PublicBaseURL string `koanf:"public_base_url"`
	// AdminToken, when set, is the bearer token the admin listener requires.
	// On an admin listener other hosts reach without admin_tls it must be
	// at least MinAdminTokenLen characters (see AdminAuth.AcceptShortToken).
	AdminToken string `koanf:"admin_token" secret:"true"`
	// AdminAuth bounds guessing of the admin credentials.
	AdminAuth AdminAuth `koanf:"admin_auth"`
	// HTTP holds limits and timeouts of both listeners.
	HTTP HTTP `koanf:"http"`
	// GenericAPI says who may call the generic allocate API.
	GenericAPI GenericAPI `koanf:"generic_api"`
	// TrustedProxies are the CIDRs (or addresses) of the load balancers in
	// front of edge whose X-Forwarded-For/-Proto/-Host edge believes: for
	// the webhook URL a provider signed, IP allow-lists and the headers
	// pods get. Empty (default): nobody's. Trusting everyone (0.0.0.0/0,
	// ::/0) lets any client set its own address: edge WARNs at start.
	TrustedProxies []string `koanf:"trusted_proxies"`
	// Internal says who may use listen.internal.
	Internal Internal `koanf:"internal"`
	// PublicTLS reports that the public listener terminates TLS (tls.*
	// set): the derived PublicURL is then wss://. Copied from the tls
	// section by config, not a key.
	PublicTLS bool `koanf:"-"`
	// AdminListenerTLS reports that the admin listener terminates TLS
	// (admin_tls.* set). Copied by config, not a key.
	AdminListenerTLS bool `koanf:"-"`
}

// MinAdminTokenLen is the shortest admin_token edge takes on an admin
// listener other hosts reach in the clear: 32 characters of a random
// base64 or hex string are 128 bits or more, beyond guessing at any rate.
const MinAdminTokenLen = 32

// Listen holds the two listener addresses (restart: a bound socket stays).
type Listen struct {
	// Public serves provider webhooks, the generic allocate API and the
	// /ws/pod/ media proxy. Default ":8080". Port 0 picks a free port.
	Public string `koanf:"public"`
	// Admin serves release, drain, status, config, /metrics and the health
	// probes. Default "127.0.0.1:9090": another address needs AdminToken.
	Admin string `koanf:"admin"`
	// Internal serves the predecessor's surface for in-cluster callers
	// (see Internal). Default ":8082"; "" turns it off.
	Internal string `koanf:"internal"`
	// Metrics serves GET /metrics alone, without credentials, for a
	// scrape configuration that sends none (see Surface.MetricsOnly).
	// Default "": off.
	Metrics string `koanf:"metrics"`
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
	// ShutdownDelay is how long a stopping edge keeps serving everything
	// (webhooks, allocations, new media sockets) after SIGTERM with its
	// readiness already false, before it stops accepting: load balancers
	// and kube-proxy go on sending new connections to a pod for a few
	// seconds after it turns unready, and a closed listener refuses them
	// (a provider's webhook lost, a call failed, at every rolling update).
	// Default 0 (stop accepting at once); deploy/ sets 10s.
	ShutdownDelay time.Duration `koanf:"shutdown_delay"`
	// ReadinessRedisGrace is how long Redis may fail without a break
	// before /readyz turns false. Redis is shared: when it blips every
	// replica sees it at once, and a balancer that honours readiness is
	// then left with no backend, refusing webhooks and the media sockets
	// of calls just answered; a replica kept in the balancer has them wait
	// for Redis or answers the provider's fallback. The grace only bounds
	// how long a replica cut off from Redis alone (a partition of its own)
	// keeps taking traffic it cannot serve. Default 30s: several times a
	// Sentinel failover with a tuned down-after-milliseconds (2-5 s; 2.3 s
	// measured in docs/reliability.md) and longer than a Redis container's
	// restart, while a replica partitioned alone still leaves the balancer
	// within a minute. Sentinel's own default down-after-milliseconds is
	// 30 s: with it, set the grace above down-after plus a few seconds. 0
	// fails readiness at the first failed check. The replica's own faults
	// (plugins, a full proxy, shutdown) fail it at once whatever this is.
	ReadinessRedisGrace time.Duration `koanf:"readiness_redis_grace"`
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
	// AccessLog logs one "http request" line per request on every
	// listener (listener, method, route, status, duration_ms, bytes,
	// client, user_agent, call_sid). Default true.
	AccessLog bool `koanf:"access_log"`
	// AccessLogSample is the share of requests answered below 400 that get
	// their line, 0 to 1; a 4xx or 5xx always gets one. Default 1.
	AccessLogSample float64 `koanf:"access_log_sample"`
	// AccessLogProbes is that share for /healthz and /readyz answered
	// below 400 (a failing probe always gets its line). Default 0.
	AccessLogProbes float64 `koanf:"access_log_probes"`
}

// AccessLogConfig is the access log's part of h.
func (h HTTP) AccessLogConfig() AccessLog {
	return AccessLog{Enabled: h.AccessLog, Sample: h.AccessLogSample, ProbeSample: h.AccessLogProbes}
}

// DefaultConfig is the HTTP surface's defaults.
func DefaultConfig() Config {
	return Config{
		Listen:    Listen{Public: ":8080", Admin: "127.0.0.1:9090", Internal: ":8082"},
		Internal:  Internal{Allow: DefaultInternalAllow},
		AdminAuth: DefaultAdminAuth(),
		HTTP: HTTP{
			MaxBodyBytes:      calls.DefaultMaxBodyBytes,
			ReadHeaderTimeout: 5 * time.Second,
			RequestTimeout:    10 * time.Second,
			ShutdownTimeout:   30 * time.Second,
			BodyTimeout:       10 * time.Second,
			// See HTTP.ReadinessRedisGrace for why 30s.
			ReadinessRedisGrace: 30 * time.Second,
			WriteTimeout:        15 * time.Second,
			IdleTimeout:         60 * time.Second,
			MaxConnections:      8192,
			AccessLog:           true,
			AccessLogSample:     1,
		},
	}
}

// Validate checks the listeners, the public base URL, the token's form and
// the HTTP limits.
func (c Config) Validate() error {
	return errors.Join(
		c.Listen.validate(),
		validatePublicBaseURL(c.PublicBaseURL),
		validateAdminToken(c.AdminToken),
		c.validateAdminExposure(),
		c.AdminAuth.Validate(),
		c.HTTP.validate(),
		c.GenericAPI.Validate(),
		validateTrustedProxies(c.TrustedProxies),
		c.Internal.Validate(),
	)
}

// PublicURL is the effective public base URL, without a trailing slash:
// PublicBaseURL if set, else ws://<host>:<port> of Listen.Public (wss://
// when PublicTLS: Twilio opens only wss:// streams), where an
// empty or unspecified host (":8080", "0.0.0.0:8080") becomes 127.0.0.1.
// It is derived on each call so that it follows the listener edge runs with,
// not a restart-only change in the file. With port 0 (a free port picked at
// bind time) the derived URL is useless: set PublicBaseURL once bound.
func (c Config) PublicURL() string {
	if c.PublicBaseURL != "" {
		return c.PublicBaseURL
	}
	host, port, err := net.SplitHostPort(c.Listen.Public)
	if err != nil {
		return ""
	}
	if wildcard(host) {
		host = "127.0.0.1"
	}
	scheme := "ws://"
	if c.PublicTLS {
		scheme = "wss://"
	}
	return scheme + net.JoinHostPort(host, port)
}

// validate checks both addresses are host:port and differ.
func (l Listen) validate() error {
	pubHost, pub, errPub := confcheck.HostPort("listen.public", l.Public, 0)
	admHost, adm, errAdm := confcheck.HostPort("listen.admin", l.Admin, 0)
	errs := []error{errPub, errAdm}
	if errPub == nil && errAdm == nil && pub != 0 && pub == adm &&
		(pubHost == admHost || wildcard(pubHost) || wildcard(admHost)) {
		errs = append(errs, confcheck.Invalid("listen.admin", l.Admin, fmt.Sprintf("must not share port %d with listen.public", pub)))
	}
	return errors.Join(append(errs, l.validateInternal(), l.validateMetrics())...)
}

// validateAdminExposure refuses an admin listener reachable from other hosts
// without a token: drain, tier rewrites and pprof would be open to anyone
// who can reach the port. It refuses a short token there too, unless
// served over admin_tls or accepted by admin_auth.accept_short_token.
func (c Config) validateAdminExposure() error {
	addr := c.Listen.Admin
	host, _, err := net.SplitHostPort(addr)
	if err != nil || loopback(host) {
		return nil // a bad address is listen.admin's own error
	}
	if c.AdminToken == "" {
		return fmt.Errorf("listen.admin: %q is reachable from other hosts and admin_token is not set: "+
			"set admin_token (EDGE_ADMIN_TOKEN, e.g. from a Secret) or listen on 127.0.0.1", addr)
	}
	if c.ShortAdminTokenExposed() && !c.AdminAuth.AcceptShortToken {
		// The value is a secret: its length only.
		return fmt.Errorf("admin_token: shorter than %d characters (it has %d) on listen.admin %q, which other hosts reach without admin_tls: "+
			"use a random token of at least %d (head -c 32 /dev/urandom | base64), serve the admin listener over admin_tls, "+
			"listen on 127.0.0.1, or set admin_auth.accept_short_token: true to accept the risk",
			MinAdminTokenLen, utf8.RuneCountInString(c.AdminToken), addr, MinAdminTokenLen)
	}
	return nil
}

// ShortAdminTokenExposed reports an admin_token shorter than
// MinAdminTokenLen on an admin listener that other hosts reach without
// TLS: a token that can be guessed, or read on the wire.
func (c Config) ShortAdminTokenExposed() bool {
	host, _, err := net.SplitHostPort(c.Listen.Admin)
	return err == nil && !loopback(host) && !c.AdminListenerTLS &&
		c.AdminToken != "" && utf8.RuneCountInString(c.AdminToken) < MinAdminTokenLen
}

// loopback reports a listen host that only this machine reaches.
func loopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}

func validateTrustedProxies(cidrs []string) error {
	_, err := forwarded.Parse("trusted_proxies", cidrs)
	return err
}

// wildcard reports a listen host that binds every interface.
func wildcard(host string) bool {
	ip, err := netip.ParseAddr(host)
	return host == "" || err == nil && ip.IsUnspecified()
}

// validate checks every limit is positive.
func (h HTTP) validate() error {
	var errs []error
	if h.MaxBodyBytes <= 0 {
		errs = append(errs, confcheck.Invalid("http.max_body_bytes", h.MaxBodyBytes, "must be > 0"))
	}
	errs = append(errs,
		confcheck.Positive("http.read_header_timeout", h.ReadHeaderTimeout),
		confcheck.Positive("http.request_timeout", h.RequestTimeout),
		confcheck.Positive("http.shutdown_timeout", h.ShutdownTimeout),
		confcheck.Positive("http.body_timeout", h.BodyTimeout),
		confcheck.Positive("http.idle_timeout", h.IdleTimeout),
	)
	if h.ShutdownDelay < 0 {
		errs = append(errs, confcheck.Invalid("http.shutdown_delay", h.ShutdownDelay, "must be >= 0"))
	}
	if h.ReadinessRedisGrace < 0 {
		errs = append(errs, confcheck.Invalid("http.readiness_redis_grace", h.ReadinessRedisGrace, "must be >= 0 (0: unready at the first failed Redis check)"))
	}
	if h.WriteTimeout <= h.RequestTimeout {
		errs = append(errs, confcheck.Invalid("http.write_timeout", h.WriteTimeout, "must be > http.request_timeout, or a timed-out request loses its answer"))
	}
	if h.MaxConnections < 1 {
		errs = append(errs, confcheck.Invalid("http.max_connections", h.MaxConnections, "must be >= 1"))
	}
	if !(h.AccessLogSample >= 0 && h.AccessLogSample <= 1) {
		errs = append(errs, confcheck.Invalid("http.access_log_sample", h.AccessLogSample, "must be from 0 (failures only) to 1 (every request)"))
	}
	if !(h.AccessLogProbes >= 0 && h.AccessLogProbes <= 1) {
		errs = append(errs, confcheck.Invalid("http.access_log_probes", h.AccessLogProbes, "must be from 0 (failing probes only) to 1 (every probe)"))
	}
	return errors.Join(errs...)
}

func validatePublicBaseURL(s string) error {
	const path = "public_base_url"
	if s == "" {
		return nil
	}
	u, err := url.Parse(s)
	if err != nil {
		return fmt.Errorf("%s: %q: not a URL", path, s)
	}
	switch {
	case u.Scheme != "ws" && u.Scheme != "wss":
		return confcheck.Invalid(path, s, `must be a ws:// or wss:// URL`)
	case u.Host == "":
		return confcheck.Invalid(path, s, "must name a host")
	case u.User != nil:
		return confcheck.Invalid(path, u.Redacted(), "must not carry user info")
	case u.RawQuery != "" || u.ForceQuery || u.Fragment != "":
		return confcheck.Invalid(path, s, "must not have a query or fragment")
	}
	return nil
}

func validateAdminToken(s string) error {
	// The value is a secret: never echo it. A trailing newline is the usual
	// way a token from a mounted Secret or an env file goes wrong.
	if s != strings.TrimSpace(s) {
		return errors.New("admin_token: has leading or trailing whitespace")
	}
	return nil
}
