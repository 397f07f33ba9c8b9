package main

import (
	"fmt"
	"log/slog"
	"net/http"
	"sync/atomic"

	"github.com/edge-voice/edge/api"
	"github.com/edge-voice/edge/config"
	"github.com/edge-voice/edge/forwarded"
)

// access is who edge believes and who may allocate, both reloadable: the
// trusted proxies (whose X-Forwarded-* count) and the generic allocate
// API's callers.
type access struct {
	trust   atomic.Pointer[forwarded.Trusted]
	callers *api.Callers
	log     *slog.Logger
}

// newAccess parses both from cfg and says at start what is open to whom.
func newAccess(cfg *config.Config, log *slog.Logger) (*access, error) {
	tr, err := forwarded.Parse("trusted_proxies", cfg.TrustedProxies)
	if err != nil {
		return nil, err
	}
	tokens, err := cfg.GenericAPI.CallerTokens()
	if err != nil {
		return nil, err
	}
	warnExposure(cfg, tr, log)
	a := &access{callers: api.NewCallers(cfg.OpenMode(), tokens), log: log}
	a.trust.Store(tr)
	return a, nil
}

// Apply takes a reloaded config. A part that does not parse is logged and
// the previous one stays.
func (a *access) Apply(cfg *config.Config) {
	if tr, err := forwarded.Parse("trusted_proxies", cfg.TrustedProxies); err != nil {
		a.log.Error("trusted_proxies not applied", "err", err)
	} else {
		a.trust.Store(tr)
	}
	warnExposure(cfg, a.trusted(), a.log)
	tokens, err := cfg.GenericAPI.CallerTokens()
	if err != nil {
		a.log.Error("generic_api.tokens not applied: the previous tokens stay", "err", err)
		return
	}
	a.callers.Apply(cfg.OpenMode(), tokens)
}

// trusted is the trusted-proxy list in effect.
func (a *access) trusted() *forwarded.Trusted { return a.trust.Load() }

// headers are the X-Forwarded-* values pods get (proxy.ForwardedFunc).
func (a *access) headers(r *http.Request) (xff, proto, host string) { return a.trusted().Headers(r) }

// warnExposure logs what an operator should know about who can reach what.
func warnExposure(cfg *config.Config, tr *forwarded.Trusted, log *slog.Logger) {
	switch cfg.OpenMode() {
	case api.OpenAnyone:
		log.Warn("generic_api.open is \"anyone\": anybody who reaches the public listener can allocate pods with POST /api/v1/allocate; configure generic_api.tokens and set it to \"off\"")
	case api.OpenLoopback:
		log.Info("the generic allocate API takes callers on this host without a token (development default with the embedded Redis); set generic_api.open: off, or configure generic_api.tokens, to require one")
	}
	// Outside the embedded development default, a derived media base
	// (the public listener's own address, 127.0.0.1 for a wildcard) is
	// no address a provider can dial: every call would be answered with a
	// media URL that never connects.
	if cfg.PublicBaseURL == "" && !cfg.Redis.Embedded() {
		log.Warn("public_base_url is not set: providers are told to open media sockets at this listener's own address, which they cannot reach; set it to the wss:// address providers dial", "media_base", cfg.PublicURL())
	}
	if tr.TrustsAll() {
		log.Warn(fmt.Sprintf("trusted_proxies %v trusts every client: any client sets its own address and scheme in X-Forwarded-*; list your load balancers' CIDRs instead", cfg.TrustedProxies))
	}
}
