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

// trust holds the trusted-proxy list in effect; a reload swaps it.
type trust struct {
	p atomic.Pointer[forwarded.Trusted]
}

func (t *trust) apply(cfg *config.Config) error {
	tr, err := forwarded.Parse("trusted_proxies", cfg.TrustedProxies)
	if err != nil {
		return err
	}
	t.p.Store(tr)
	return nil
}

func (t *trust) current() *forwarded.Trusted { return t.p.Load() }

// headers are the X-Forwarded-* values pods get (proxy.ForwardedFunc).
func (t *trust) headers(r *http.Request) (xff, proto, host string) { return t.current().Headers(r) }

// newCallers builds the generic allocate API's authentication and says at
// start what is open to whom.
func newCallers(cfg *config.Config, log *slog.Logger) (*api.Callers, error) {
	tokens, err := cfg.GenericAPI.CallerTokens()
	if err != nil {
		return nil, err
	}
	warnExposure(cfg, log)
	return api.NewCallers(cfg.OpenMode(), tokens), nil
}

// warnExposure logs what an operator should know about who can reach what.
func warnExposure(cfg *config.Config, log *slog.Logger) {
	switch cfg.OpenMode() {
	case api.OpenAnyone:
		log.Warn("generic_api.open is \"anyone\": anybody who reaches the public listener can allocate pods with POST /api/v1/allocate; configure generic_api.tokens and set it to \"off\"")
	case api.OpenLoopback:
		log.Info("the generic allocate API takes callers on this host without a token (development default with the embedded Redis); set generic_api.open: off, or configure generic_api.tokens, to require one")
	}
	if tr, err := forwarded.Parse("trusted_proxies", cfg.TrustedProxies); err == nil && tr.TrustsAll() {
		log.Warn(fmt.Sprintf("trusted_proxies %v trusts every client: any client sets its own address and scheme in X-Forwarded-*; list your load balancers' CIDRs instead", cfg.TrustedProxies))
	}
}
