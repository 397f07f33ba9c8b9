package proxy

import (
	"errors"
	"time"

	"github.com/edge-voice/edge/internal/confcheck"
)

// Config is the proxy's section of edge's configuration (keys proxy.*) and
// what New and Apply take; Apply swaps it at run time without touching open
// sockets.
type Config struct {
	// TokenSecret keys the HMAC of the per-call media tokens (NewSigner).
	// Every replica must share it: a socket may reach a replica other than
	// the one that allocated. Empty: a random secret per process, with a
	// warning (one replica only). At least 32 bytes when set. Restart:
	// tokens already handed out would stop verifying.
	TokenSecret string `koanf:"token_secret" secret:"true" reload:"restart"`
	// RequireToken refuses media sockets without a token segment. Default
	// true. When false, a socket without a token is accepted only on an
	// exclusive pod with a live allocation and is bound to that call (the
	// predecessor's URLs, during a migration); a token, when present, must
	// still be valid.
	RequireToken bool `koanf:"require_token"`
	// TokenTTL is how long a token may be used to open its socket, counted
	// from the allocation (NewSigner); an open socket lives on past it.
	// Default 10m.
	TokenTTL time.Duration `koanf:"token_ttl"`
	// IdleTimeout closes a media socket (and releases its call) when the
	// provider sent nothing for this long: providers stream audio without
	// pause, so silence means a dead or half-open peer. Default 30s; 0 (only
	// outside edge's validated config): never.
	IdleTimeout time.Duration `koanf:"idle_timeout"`
	// DialTimeout bounds the dial and WebSocket handshake to a pod.
	// Default 5s.
	DialTimeout time.Duration `koanf:"dial_timeout"`
	// DrainTimeout is how long open media sockets keep flowing after a
	// SIGTERM; then they are closed with 1001. Default 1h: match it with
	// terminationGracePeriodSeconds.
	DrainTimeout time.Duration `koanf:"drain_timeout"`
	// MaxSockets bounds the media sockets of one replica (503 beyond).
	// Default 10000; 0 (only outside edge's validated config): no bound.
	MaxSockets int `koanf:"max_sockets"`
	// MaxMessageBytes bounds one WebSocket frame's payload; a larger frame
	// closes the socket. Default 1048576; 0 (only outside edge's validated
	// config): no limit.
	MaxMessageBytes int64 `koanf:"max_message_bytes"`

	// RenewInterval is how often every socket's lease is renewed (one batch
	// per replica). Not a key of this section: the lease's own setting,
	// allocator.renew_interval, is copied here by edge's config. A value
	// <= 0 renews every minRenewInterval, so that a caller that forgot it
	// renews too often rather than never.
	RenewInterval time.Duration `koanf:"-"`
	// Relay picks the mechanism for new sockets ("": RelayEpoll where it
	// can be used). Open sockets keep theirs. Not configurable: for tests
	// and benchmarks.
	Relay Relay `koanf:"-"`
}

// minRenewInterval bounds the renewal loop when RenewInterval is unset.
const minRenewInterval = time.Second

// DefaultConfig is the proxy's defaults (RenewInterval comes from the
// allocator's).
func DefaultConfig() Config {
	return Config{
		RequireToken:    true,
		TokenTTL:        10 * time.Minute,
		IdleTimeout:     30 * time.Second,
		DialTimeout:     5 * time.Second,
		DrainTimeout:    time.Hour,
		MaxSockets:      10000,
		MaxMessageBytes: 1 << 20,
	}
}

// Validate checks the durations and limits of the configurable keys.
func (c Config) Validate() error {
	errs := []error{
		confcheck.Positive("proxy.token_ttl", c.TokenTTL),
		confcheck.Positive("proxy.idle_timeout", c.IdleTimeout),
		confcheck.Positive("proxy.dial_timeout", c.DialTimeout),
		confcheck.Positive("proxy.drain_timeout", c.DrainTimeout),
	}
	if c.TokenSecret != "" && len(c.TokenSecret) < 32 {
		// Never echo the secret itself.
		errs = append(errs, errors.New("proxy.token_secret: must be at least 32 bytes"))
	}
	if c.MaxSockets <= 0 {
		errs = append(errs, confcheck.Invalid("proxy.max_sockets", c.MaxSockets, "must be > 0"))
	}
	if c.MaxMessageBytes <= 0 {
		errs = append(errs, confcheck.Invalid("proxy.max_message_bytes", c.MaxMessageBytes, "must be > 0"))
	}
	return errors.Join(errs...)
}
