package api

import (
	"container/list"
	"errors"
	"math"
	"net/http"
	"net/netip"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/edge-voice/edge/internal/confcheck"
)

// AdminAuth bounds how fast one source may guess the admin credentials:
// admin_token on the admin listener (its API and its status page, bearer
// or HTTP Basic) and internal.token on the internal listener. One
// allowance per source serves every listener.
//
//	admin_auth:
//	  failure_burst: 10
//	  failures_per_second: 1
type AdminAuth struct {
	// FailureBurst is how many wrong credentials one source may send in a
	// row. Past them its requests are answered 429 with Retry-After, their
	// credentials not even compared, until its allowance refills. Default
	// 10.
	FailureBurst int `koanf:"failure_burst"`
	// FailuresPerSecond is how fast a source's allowance refills: the
	// most guesses one source gets per second once its burst is spent.
	// Default 1.
	FailuresPerSecond float64 `koanf:"failures_per_second"`
	// AcceptShortToken lets edge start with an admin_token shorter than
	// MinAdminTokenLen on an admin listener that other hosts reach without
	// admin_tls, which it refuses otherwise (WARNs instead). Default false.
	AcceptShortToken bool `koanf:"accept_short_token"`
}

// DefaultAdminAuth is admin_auth's defaults: ten guesses at once, then one
// a second.
func DefaultAdminAuth() AdminAuth {
	return AdminAuth{FailureBurst: 10, FailuresPerSecond: 1}
}

// Validate checks the allowance can be spent and refills.
func (a AdminAuth) Validate() error {
	var errs []error
	if a.FailureBurst < 1 {
		errs = append(errs, confcheck.Invalid("admin_auth.failure_burst", a.FailureBurst, "must be >= 1"))
	}
	if !(a.FailuresPerSecond > 0) || math.IsInf(a.FailuresPerSecond, 0) {
		errs = append(errs, confcheck.Invalid("admin_auth.failures_per_second", a.FailuresPerSecond, "must be > 0"))
	}
	return errors.Join(errs...)
}

// DefaultMaxAuthSources is how many sources an AuthThrottle tracks at once
// by default: about 200 bytes each.
const DefaultMaxAuthSources = 10000

// AuthThrottle is a token bucket of failed credential checks per source.
// A check takes one token before it compares the credential and gives it
// back when the credential matched, so that only failures spend the
// allowance, and concurrent guesses from one source cannot outrun it. A
// source with no token left is refused without a check: it learns
// nothing, and the server spends neither a comparison nor a sleep on it.
//
// The source is the connection's peer (never a forwarded header, which a
// client writes itself): an IPv4 address, or an IPv6 /64, the block one
// host is usually given (RFC 4291's 64-bit interface ids), so that a
// fresh address per guess gains nothing. Make one with NewAuthThrottle.
type AuthThrottle struct {
	// Limits returns the allowance, read at every check so that a reload
	// applies at once; nil: DefaultAdminAuth.
	Limits func() AdminAuth
	// Now is the clock; nil: time.Now.
	Now func() time.Time
	// MaxSources bounds the sources tracked at once (sources are whoever
	// connects); past it the one seen longest ago is forgotten, its
	// allowance full again. 0: DefaultMaxAuthSources.
	MaxSources int

	mu      sync.Mutex
	sources map[netip.Prefix]*list.Element // of *authBucket
	recent  list.List                      // *authBucket, most recently seen first

	failures, throttled *prometheus.CounterVec
}

// authBucket is one source's allowance: tokens as of at.
type authBucket struct {
	source netip.Prefix
	tokens float64
	at     time.Time
}

// NewAuthThrottle returns a throttle reading its allowance from limits
// (nil: the defaults), with its counters not yet registered (MustRegister).
func NewAuthThrottle(limits func() AdminAuth) *AuthThrottle {
	return &AuthThrottle{
		Limits: limits,
		failures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "edge_admin_auth_failures_total",
			Help: "Admin credentials (admin_token, internal.token) checked and found wrong, per listener.",
		}, []string{"listener"}),
		throttled: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "edge_admin_auth_throttled_total",
			Help: "Requests with admin credentials refused unchecked (429) because their source failed too often (admin_auth.*), per listener.",
		}, []string{"listener"}),
	}
}

// MustRegister registers the throttle's counters on reg, each listener's
// series at 0 from the start.
func (t *AuthThrottle) MustRegister(reg prometheus.Registerer) {
	for _, l := range []string{"admin", "internal"} {
		t.failures.WithLabelValues(l)
		t.throttled.WithLabelValues(l)
	}
	reg.MustRegister(t.failures, t.throttled)
}

// authResult is what a credential check behind the throttle came to.
type authResult int

const (
	authPassed    authResult = iota // the credential matched
	authFailed                      // none sent, or a wrong one: 401
	authThrottled                   // not checked, the source failed too often: 429
)

// check decides r's credential with matches, unless r's source has spent
// its allowance; retry is then when the source may try again. A request
// without an Authorization header guesses nothing: it fails without
// spending anything (a browser's first visit, before its Basic prompt).
func (t *AuthThrottle) check(r *http.Request, listener string, matches func() bool) (res authResult, retry time.Duration) {
	if r.Header.Get("Authorization") == "" {
		return authFailed, 0
	}
	src := sourceOf(r.RemoteAddr)
	if retry, ok := t.take(src); !ok {
		t.throttled.WithLabelValues(listener).Inc()
		return authThrottled, retry
	}
	if matches() {
		t.giveBack(src)
		return authPassed, 0
	}
	t.failures.WithLabelValues(listener).Inc()
	return authFailed, 0
}

// take spends one token of src's allowance; ok false when it has none,
// with the wait until it has one.
func (t *AuthThrottle) take(src netip.Prefix) (retry time.Duration, ok bool) {
	lim, now := t.limits(), t.now()
	t.mu.Lock()
	defer t.mu.Unlock()
	b := t.bucket(src, lim, now)
	b.refill(lim, now)
	if b.tokens < 1 {
		return time.Duration((1 - b.tokens) / lim.FailuresPerSecond * float64(time.Second)), false
	}
	b.tokens--
	return 0, true
}

// giveBack returns the token a matching credential took.
func (t *AuthThrottle) giveBack(src netip.Prefix) {
	lim := t.limits()
	t.mu.Lock()
	defer t.mu.Unlock()
	if el, ok := t.sources[src]; ok {
		b := el.Value.(*authBucket)
		b.tokens = min(b.tokens+1, float64(lim.FailureBurst))
	}
}

// bucket is src's bucket, a full one for a source not tracked, which may
// push the one seen longest ago out.
func (t *AuthThrottle) bucket(src netip.Prefix, lim AdminAuth, now time.Time) *authBucket {
	if el, ok := t.sources[src]; ok {
		t.recent.MoveToFront(el)
		return el.Value.(*authBucket)
	}
	if t.sources == nil {
		t.sources = map[netip.Prefix]*list.Element{}
	}
	max := t.MaxSources
	if max <= 0 {
		max = DefaultMaxAuthSources
	}
	for len(t.sources) >= max {
		old := t.recent.Back()
		delete(t.sources, old.Value.(*authBucket).source)
		t.recent.Remove(old)
	}
	b := &authBucket{source: src, tokens: float64(lim.FailureBurst), at: now}
	t.sources[src] = t.recent.PushFront(b)
	return b
}

// refill adds what the time since b.at earned, up to the burst (a burst
// lowered by a reload applies here too).
func (b *authBucket) refill(lim AdminAuth, now time.Time) {
	if d := now.Sub(b.at); d > 0 {
		b.tokens += d.Seconds() * lim.FailuresPerSecond
		b.at = now
	}
	b.tokens = min(b.tokens, float64(lim.FailureBurst))
}

func (t *AuthThrottle) limits() AdminAuth {
	if t.Limits == nil {
		return DefaultAdminAuth()
	}
	if l := t.Limits(); l.Validate() == nil {
		return l
	}
	return DefaultAdminAuth()
}

func (t *AuthThrottle) now() time.Time {
	if t.Now == nil {
		return time.Now()
	}
	return t.Now()
}

// sourceOf is the allowance a peer address spends: the IPv4 address, or
// the IPv6 /64 around it. An address that does not parse (not TCP) is
// the zero prefix, one allowance for all such peers.
func sourceOf(remote string) netip.Prefix {
	ap, err := netip.ParseAddrPort(remote)
	if err != nil {
		return netip.Prefix{}
	}
	a := ap.Addr().Unmap().WithZone("")
	bits := 32
	if a.Is6() {
		bits = 64
	}
	p, _ := a.Prefix(bits)
	return p
}

// refuseThrottled answers a source that failed too often: 429 with
// Retry-After in whole seconds, rounded up (RFC 9110 10.2.3).
func refuseThrottled(w http.ResponseWriter, retry time.Duration) {
	w.Header().Set("Retry-After", strconv.Itoa(retryAfterSeconds(retry)))
	writeJSON(w, http.StatusTooManyRequests, map[string]any{
		"success": false, "error": "too many failed authentications from this address, retry later", "code": "auth_throttled",
	})
}

func retryAfterSeconds(d time.Duration) int {
	return max(1, int(math.Ceil(d.Seconds())))
}
