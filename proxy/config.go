package proxy

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/edge-voice/edge/internal/confcheck"
	"github.com/edge-voice/edge/internal/mediacontract"
	"github.com/edge-voice/edge/proxy/mediaurl"
)

// Config is the proxy's section of edge's configuration (keys proxy.*) and
// what New and Apply take; Apply swaps it at run time without touching open
// sockets.
type Config struct {
	// TokenSecret keys the HMAC of the per-call media tokens (mediaurl.NewSigner).
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
	// from the allocation (mediaurl.NewSigner); an open socket lives on past it.
	// Default 10m.
	TokenTTL time.Duration `koanf:"token_ttl"`
	// IdleTimeout closes a media socket (and releases its call) when the
	// provider sent nothing for this long: providers stream audio without
	// pause, so silence means a dead or half-open peer. Default 30s; 0 (only
	// outside edge's validated config): never.
	IdleTimeout time.Duration `koanf:"idle_timeout"`
	// DialTimeout bounds one dial and WebSocket handshake to a pod: a pod
	// that accepts and never answers costs the provider this much before
	// edge tries another pod. Default 1s.
	DialTimeout time.Duration `koanf:"dial_timeout"`
	// ConnectAttempts is how many pods a media socket may try: when a pod
	// cannot be reached or refuses the upgrade, and nothing was relayed
	// yet, the call moves to another pod of its chain (connect-time
	// failover) and the socket connects there. Default 2; 1: no failover.
	ConnectAttempts int `koanf:"connect_attempts"`
	// ConnectBudget bounds admission, every attempt and every move of one
	// socket together, well inside a provider's patience for the
	// handshake. Default 3s.
	ConnectBudget time.Duration `koanf:"connect_budget"`
	// EjectBackoff is how long a pod whose dial failed stays out of
	// allocation (on every replica) before its first health probe; the
	// wait doubles with every further failure up to EjectMaxBackoff.
	// Defaults 5s and 5m.
	EjectBackoff    time.Duration `koanf:"eject_backoff"`
	EjectMaxBackoff time.Duration `koanf:"eject_max_backoff"`
	// MaxEjectionPercent bounds the share of a tier's pods ejected at once
	// (Envoy's max_ejection_percent), so that a network blip cannot empty
	// the pools. Default 50; 0: failures are counted, no pod is ejected.
	MaxEjectionPercent int `koanf:"max_ejection_percent"`
	// HealthPath is what a probe of an ejected pod asks for: a TCP
	// connect, then a WebSocket upgrade to this path; a 101 takes the pod
	// back. Default "/".
	HealthPath string `koanf:"health_path"`
	// ProbeInterval is how often each replica looks for ejected pods whose
	// probe is due. Default 1s.
	ProbeInterval time.Duration `koanf:"probe_interval"`
	// PodWriteTimeout bounds a write to the pod that makes no progress
	// while the client reads edge's writes: the pod is hung, and the
	// client gets close 1014 and the call ends (a pod blocked by a client
	// that does not read is backpressure, not a failure). Default 10s.
	PodWriteTimeout time.Duration `koanf:"pod_write_timeout"`
	// PodPingInterval and PodSilence find a pod that hangs (a stopped
	// process, a blocked event loop), which keeps its socket open and its
	// kernel taking bytes for minutes: a pod that has sent nothing for
	// PodPingInterval gets edge's WebSocket ping, and one that has sent
	// nothing at all for PodSilence (longer than the interval) with that
	// ping unanswered is lost, as a reset pod is (moved with
	// proxy.resume, else 1014). The pod's pongs never reach the provider.
	// Defaults 1s and 3s; a PodPingInterval of 0 turns pings off.
	PodPingInterval time.Duration `koanf:"pod_ping_interval"`
	PodSilence      time.Duration `koanf:"pod_silence"`
	// PodLivenessByTier sets both for the calls of a tier (its pods'
	// agents may need longer, or may be watched closer).
	PodLivenessByTier map[string]PodLiveness `koanf:"pod_liveness_by_tier"`
	// DrainTimeout is how long open media sockets keep flowing after a
	// SIGTERM; then they are closed with 1001. Default 1h: match it with
	// terminationGracePeriodSeconds.
	DrainTimeout time.Duration `koanf:"drain_timeout"`
	// MaxSockets bounds the media sockets of one replica (503 beyond).
	// Default 10000; 0 (only outside edge's validated config): no bound.
	MaxSockets int `koanf:"max_sockets"`
	// MaxMessageBytes bounds one WebSocket message's payload, its frames
	// summed (a control frame's alone), either way; a larger message closes
	// the socket with 1009. Default 1048576; 0 (only outside edge's
	// validated config): no limit.
	MaxMessageBytes int64 `koanf:"max_message_bytes"`

	// RenewInterval is how often every socket's lease is renewed (one batch
	// per replica). Not a key of this section: the lease's own setting,
	// allocator.renew_interval, is copied here by edge's config. A value
	// <= 0 renews every minRenewInterval, so that a caller that forgot it
	// renews too often rather than never.
	RenewInterval time.Duration `koanf:"-"`
	// Relay picks how media sockets' bytes move: "epoll" (default), event
	// loops that make one read and one write per message; "uring", loops
	// that batch the receives and sends of every socket (TLS 1.3 clients
	// included) through io_uring (Linux 6.1+; where io_uring is refused
	// edge logs why and uses the epoll loops); or
	// "goroutines", two goroutines per socket, the fallback of the other
	// two. Restart: the loops start once.
	Relay Relay `koanf:"relay" reload:"restart"`
	// UringBatch is the longest a "uring" loop holds a batch open once a
	// completion came, for more to join it (Linux 6.13; ignored with a
	// warning before): less CPU per message, each message up to this much
	// later per pass through edge (docs/bench-media.md). The loop sizes
	// the window from its load, up to this: long enough to gather about 16
	// completions, none when this would not gather 4. Default 0: none.
	// At most 1ms.
	UringBatch time.Duration `koanf:"uring_batch" reload:"restart"`
	// Resume keeps callers through their pod's death mid-call (resume.go).
	Resume ResumeConfig `koanf:"resume"`
}

// ResumeConfig says which calls move to another pod when their pod's side
// dies mid-call, instead of ending with 1014.
type ResumeConfig struct {
	// Tiers and Merchants opt calls in: a call allocated from one of these
	// tiers' pools ("*": every tier), or one of these merchants' calls
	// wherever it was allocated. When its pod's side dies mid-call (a
	// reset, a FIN without a close frame, a pod that stops reading), the
	// call moves to another pod of its chain, which gets the stream's
	// opening again, and the provider's socket stays open. Only calls of
	// a provider whose plugin declares its stream's opening messages can
	// move. Default: none.
	Tiers     []string `koanf:"tiers"`
	Merchants []string `koanf:"merchants"`
	// MaxPerCall bounds a call's moves: a call that kills every pod it
	// reaches must not walk the fleet. Default 3.
	MaxPerCall int `koanf:"max_per_call"`
	// Budget bounds one move: the new pod's allocation, its dials and the
	// replay of the opening, while the caller hears silence. Default 2s.
	Budget time.Duration `koanf:"budget"`
	// PoisonWindow: a pod a call moved to that dies within this time of
	// the replay, having sent the client nothing, is taken to have died
	// of the stream itself (an opening that crashes agents): the call
	// ends (outcome poison) instead of moving again, so such a stream
	// costs at most two pods. Default 5s.
	PoisonWindow time.Duration `koanf:"poison_window"`
	// MaxPerMerchantPerMinute bounds the moves of one merchant's calls on
	// one replica (a token bucket of this size, refilled over a minute):
	// a caller who finds a stream that kills agents cannot walk the fleet
	// with many calls. Above it a pod death ends the call (outcome
	// rate_limited). Default 120, well above what pod deaths cause.
	MaxPerMerchantPerMinute int `koanf:"max_per_merchant_per_minute"`
}

// PodLiveness is a tier's PodPingInterval and PodSilence.
type PodLiveness struct {
	PingInterval time.Duration `koanf:"ping_interval"`
	Silence      time.Duration `koanf:"silence"`
}

// tierLiveness is the ping interval and silence bound of the tier a call
// was allocated from (source "pool:<tier>"), when that tier has its own.
func (c *Config) tierLiveness(source string) (PodLiveness, bool) {
	tier, ok := strings.CutPrefix(source, "pool:")
	if !ok {
		return PodLiveness{}, false
	}
	l, ok := c.PodLivenessByTier[tier]
	return l, ok
}

// covers reports whether c opts in a call of merchant allocated from
// source ("pool:<tier>" or "merchant:<id>").
func (c *ResumeConfig) covers(merchant, source string) bool {
	if merchant != "" && slices.Contains(c.Merchants, merchant) {
		return true
	}
	tier, ok := strings.CutPrefix(source, "pool:")
	return ok && (slices.Contains(c.Tiers, "*") || slices.Contains(c.Tiers, tier))
}

// ejection is the pod health part of c, as the allocator takes it.
func (c *Config) ejection() mediacontract.Ejection {
	return mediacontract.Ejection{Backoff: c.EjectBackoff, MaxBackoff: c.EjectMaxBackoff, MaxPercent: c.MaxEjectionPercent}
}

// maxUringBatch bounds Config.UringBatch: a media frame every 20 ms
// cannot wait much longer in edge.
const maxUringBatch = time.Millisecond

// minRenewInterval bounds the renewal loop when RenewInterval is unset.
const minRenewInterval = time.Second

// DefaultConfig is the proxy's defaults (RenewInterval comes from the
// allocator's).
func DefaultConfig() Config {
	return Config{
		RequireToken:       true,
		TokenTTL:           10 * time.Minute,
		IdleTimeout:        30 * time.Second,
		DialTimeout:        time.Second,
		ConnectAttempts:    2,
		PodWriteTimeout:    10 * time.Second,
		PodPingInterval:    time.Second,
		PodSilence:         3 * time.Second,
		ConnectBudget:      3 * time.Second,
		EjectBackoff:       5 * time.Second,
		EjectMaxBackoff:    5 * time.Minute,
		HealthPath:         "/",
		ProbeInterval:      time.Second,
		MaxEjectionPercent: 50,
		DrainTimeout:       time.Hour,
		MaxSockets:         10000,
		MaxMessageBytes:    1 << 20,
		Relay:              relayEpoll,
		Resume:             ResumeConfig{MaxPerCall: 3, Budget: 2 * time.Second, PoisonWindow: 5 * time.Second, MaxPerMerchantPerMinute: 120},
	}
}

// Validate checks the durations and limits of the configurable keys.
func (c Config) Validate() error {
	errs := []error{
		confcheck.Positive("proxy.token_ttl", c.TokenTTL),
		confcheck.Positive("proxy.idle_timeout", c.IdleTimeout),
		confcheck.Positive("proxy.dial_timeout", c.DialTimeout),
		confcheck.Positive("proxy.drain_timeout", c.DrainTimeout),
		confcheck.Positive("proxy.connect_budget", c.ConnectBudget),
		confcheck.Positive("proxy.pod_write_timeout", c.PodWriteTimeout),
		validLiveness("proxy.pod_ping_interval", "proxy.pod_silence", c.PodPingInterval, c.PodSilence),
		confcheck.Positive("proxy.eject_backoff", c.EjectBackoff),
		confcheck.Positive("proxy.eject_max_backoff", c.EjectMaxBackoff),
		confcheck.Positive("proxy.probe_interval", c.ProbeInterval),
	}
	switch c.Relay {
	case "", relayEpoll, relayUring, relayGoroutines:
	default:
		errs = append(errs, confcheck.Invalid("proxy.relay", string(c.Relay), "must be epoll, uring or goroutines"))
	}
	if c.UringBatch < 0 || c.UringBatch > maxUringBatch {
		errs = append(errs, confcheck.Invalid("proxy.uring_batch", c.UringBatch, "must be 0 to 1ms"))
	}
	if c.ConnectAttempts < 1 || c.ConnectAttempts > 5 {
		errs = append(errs, confcheck.Invalid("proxy.connect_attempts", c.ConnectAttempts, "must be 1 to 5"))
	}
	if c.ConnectBudget > 0 && c.ConnectBudget < c.DialTimeout {
		errs = append(errs, confcheck.Invalid("proxy.connect_budget", c.ConnectBudget, "must be at least proxy.dial_timeout"))
	}
	if c.EjectMaxBackoff > 0 && c.EjectMaxBackoff < c.EjectBackoff {
		errs = append(errs, confcheck.Invalid("proxy.eject_max_backoff", c.EjectMaxBackoff, "must be at least proxy.eject_backoff"))
	}
	if c.MaxEjectionPercent < 0 || c.MaxEjectionPercent > 100 {
		errs = append(errs, confcheck.Invalid("proxy.max_ejection_percent", c.MaxEjectionPercent, "must be 0 to 100"))
	}
	if !mediaurl.CleanPath(c.HealthPath) {
		errs = append(errs, confcheck.Invalid("proxy.health_path", c.HealthPath, "must be / or /segments of [A-Za-z0-9_.~-]"))
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
	for tier, l := range c.PodLivenessByTier {
		if !plainName(tier) {
			errs = append(errs, confcheck.Invalid("proxy.pod_liveness_by_tier", tier, "keys must be tier names"))
		}
		k := "proxy.pod_liveness_by_tier." + tier
		errs = append(errs, validLiveness(k+".ping_interval", k+".silence", l.PingInterval, l.Silence))
	}
	errs = append(errs, c.Resume.validate())
	return errors.Join(errs...)
}

// validLiveness checks a ping interval (0: off) and its silence bound.
func validLiveness(intervalKey, silenceKey string, interval, silence time.Duration) error {
	switch {
	case interval < 0:
		return confcheck.Invalid(intervalKey, interval, "must be 0 (no pings) or more")
	case interval > 0 && silence <= interval:
		return confcheck.Invalid(silenceKey, silence, fmt.Sprintf("must be longer than the ping interval (%v): a quiet pod is pinged after the interval and has the rest to answer", interval))
	}
	return nil
}

// maxResumesPerCall bounds proxy.resume.max_per_call.
const maxResumesPerCall = 10

// maxMovesPerMerchant bounds proxy.resume.max_per_merchant_per_minute.
const maxMovesPerMerchant = 100000

func (c ResumeConfig) validate() error {
	var errs []error
	for i, t := range c.Tiers {
		if t != "*" && !plainName(t) {
			errs = append(errs, confcheck.Invalid(fmt.Sprintf("proxy.resume.tiers[%d]", i), t, "must be a tier name or *"))
		}
	}
	for i, m := range c.Merchants {
		if !plainName(m) {
			errs = append(errs, confcheck.Invalid(fmt.Sprintf("proxy.resume.merchants[%d]", i), m, "must be a merchant id"))
		}
	}
	if c.MaxPerCall < 1 || c.MaxPerCall > maxResumesPerCall {
		errs = append(errs, confcheck.Invalid("proxy.resume.max_per_call", c.MaxPerCall, fmt.Sprintf("must be 1 to %d", maxResumesPerCall)))
	}
	errs = append(errs, confcheck.Positive("proxy.resume.budget", c.Budget))
	errs = append(errs, confcheck.Positive("proxy.resume.poison_window", c.PoisonWindow))
	if c.MaxPerMerchantPerMinute < 1 || c.MaxPerMerchantPerMinute > maxMovesPerMerchant {
		errs = append(errs, confcheck.Invalid("proxy.resume.max_per_merchant_per_minute", c.MaxPerMerchantPerMinute,
			fmt.Sprintf("must be 1 to %d", maxMovesPerMerchant)))
	}
	return errors.Join(errs...)
}

// plainName is the shape of a tier or merchant id: 1-128 bytes of
// [A-Za-z0-9_.-], as the allocator takes ids.
func plainName(s string) bool {
	if s == "" || len(s) > 128 {
		return false
	}
	for _, c := range []byte(s) {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '_', c == '.', c == '-':
		default:
			return false
		}
	}
	return true
}
