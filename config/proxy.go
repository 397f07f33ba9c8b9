package config

import (
	"errors"
	"time"
)

// Proxy configures the media WebSocket proxy at /ws/pod/ (package proxy).
// Leases are renewed every allocator.renew_interval.
type Proxy struct {
	// TokenSecret keys the HMAC of the per-call media tokens. Every replica
	// must share it: a socket may reach a replica other than the one that
	// allocated. Empty: a random secret per process, with a warning (one
	// replica only). At least 32 bytes when set. Restart: tokens already
	// handed out would stop verifying.
	TokenSecret string `koanf:"token_secret" secret:"true" reload:"restart"`
	// RequireToken refuses media sockets without a token segment. Default
	// true. When false, a socket without a token is accepted only on an
	// exclusive pod with a live allocation and is bound to that call (the
	// predecessor's URLs, during a migration); a token, when present, must
	// still be valid.
	RequireToken bool `koanf:"require_token"`
	// TokenTTL is how long a token may be used to open its socket, counted
	// from the allocation; an open socket lives on past it. Default 10m.
	TokenTTL time.Duration `koanf:"token_ttl"`
	// IdleTimeout closes a media socket (and releases its call) when the
	// provider sent nothing for this long: providers stream audio without
	// pause, so silence means a dead or half-open peer. Default 30s.
	IdleTimeout time.Duration `koanf:"idle_timeout"`
	// DialTimeout bounds the dial and WebSocket handshake to a pod.
	// Default 5s.
	DialTimeout time.Duration `koanf:"dial_timeout"`
	// DrainTimeout is how long open media sockets keep flowing after a
	// SIGTERM; then they are closed with 1001. Default 1h: match it with
	// terminationGracePeriodSeconds.
	DrainTimeout time.Duration `koanf:"drain_timeout"`
	// MaxSockets bounds the media sockets of one replica (503 beyond).
	// Default 10000.
	MaxSockets int `koanf:"max_sockets"`
	// MaxMessageBytes bounds one WebSocket frame's payload; a larger frame
	// closes the socket. Default 1048576.
	MaxMessageBytes int64 `koanf:"max_message_bytes"`
}

func defaultProxy() Proxy {
	return Proxy{
		RequireToken:    true,
		TokenTTL:        10 * time.Minute,
		IdleTimeout:     30 * time.Second,
		DialTimeout:     5 * time.Second,
		DrainTimeout:    time.Hour,
		MaxSockets:      10000,
		MaxMessageBytes: 1 << 20,
	}
}

// Validate checks the durations and limits.
func (p Proxy) Validate() error {
	errs := []error{
		positive("proxy.token_ttl", p.TokenTTL),
		positive("proxy.idle_timeout", p.IdleTimeout),
		positive("proxy.dial_timeout", p.DialTimeout),
		positive("proxy.drain_timeout", p.DrainTimeout),
	}
	if p.TokenSecret != "" && len(p.TokenSecret) < 32 {
		// Never echo the secret itself.
		errs = append(errs, errors.New("proxy.token_secret: must be at least 32 bytes"))
	}
	if p.MaxSockets <= 0 {
		errs = append(errs, invalid("proxy.max_sockets", p.MaxSockets, "must be > 0"))
	}
	if p.MaxMessageBytes <= 0 {
		errs = append(errs, invalid("proxy.max_message_bytes", p.MaxMessageBytes, "must be > 0"))
	}
	return errors.Join(errs...)
}
