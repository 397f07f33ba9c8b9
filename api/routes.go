package api

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/pprof"
	"sync"
	"time"

	"github.com/edge-voice/edge/proxy/mediaurl"
)

// Surface is everything edge serves, listed in one place.
type Surface struct {
	Handlers *Handlers
	Ready    *Readiness
	// Metrics serves /metrics (the Prometheus registry's handler).
	Metrics http.Handler
	// AdminToken returns the admin bearer token ("" for none).
	AdminToken func() string
	// AuthThrottle bounds how fast one source may guess admin_token and
	// internal.token, on every listener at once (adminauth.go). Nil: one
	// with the defaults, its counters unregistered.
	AuthThrottle *AuthThrottle
	// RequestTimeout bounds each API request (not media sockets); nil or
	// zero means no bound beyond the client's.
	RequestTimeout func() time.Duration
	// BodyTimeout bounds reading a request's body, WriteTimeout writing its
	// answer (plain requests only: an upgraded media socket clears both).
	// nil or zero: no bound.
	BodyTimeout, WriteTimeout func() time.Duration

	// Providers serves the provider webhooks: the predecessor's
	// /api/v1/{provider}/allocate and the routes each plugin declares
	// (status callbacks), at /api/v1/{provider}/{route} and
	// /providers/{name}/{route}. Nil: no provider routes.
	Providers http.Handler
	// Media serves the media WebSockets under /ws/pod/. Nil: not served.
	Media http.Handler
	// Config serves the tier and merchant config API on the admin
	// listener. Nil: not served.
	Config *ConfigAPI
	// LogLevel serves the log level at run time; nil: no such routes.
	LogLevel *LogLevel
	// RunningConfig returns the configuration in effect, secrets hidden
	// (config.Effective), for GET /api/v1/config; nil: not served.
	RunningConfig func() json.Marshaler
	// Page serves the status page at the admin listener's root; nil: not
	// served.
	Page *StatusPage

	defaultThrottle sync.Once
}

// throttle is AuthThrottle, or a default one made once, so that every
// listener of s spends the same allowance.
func (s *Surface) throttle() *AuthThrottle {
	s.defaultThrottle.Do(func() {
		if s.AuthThrottle == nil {
			s.AuthThrottle = NewAuthThrottle(nil)
		}
	})
	return s.AuthThrottle
}

// Public is the public listener: provider webhooks, the generic allocation
// endpoint and media sockets.
func (s *Surface) Public() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("POST /api/v1/allocate", s.bounded(s.Handlers.allocate))
	if s.Providers != nil {
		// GET too: Plivo's answer_method may be GET (the signature then
		// covers the URL and its query). A trailing slash is the same
		// route: providers sign whatever URL was configured.
		for _, pattern := range []string{
			"POST /api/v1/{provider}/allocate", "GET /api/v1/{provider}/allocate",
			"POST /api/v1/{provider}/allocate/{$}", "GET /api/v1/{provider}/allocate/{$}",
		} {
			mux.Handle(pattern, s.bounded(s.Providers.ServeHTTP))
		}
		// A plugin's declared routes (POST /api/v1/twilio/status); the
		// host answers 404 for any other.
		mux.Handle("/api/v1/{provider}/{route}", s.bounded(s.Providers.ServeHTTP))
		mux.Handle("/providers/{name}/", s.bounded(s.Providers.ServeHTTP))
	}
	if s.Media != nil {
		mux.Handle(mediaurl.PathPrefix, s.Media)
	}
	mux.HandleFunc("GET /healthz", healthz)
	mux.HandleFunc("GET /readyz", s.Ready.servePublic)
	return mux
}

// Admin is the admin listener. Its Service can keep the predecessor's
// in-cluster address: voice agents call release and drain here unchanged.
// Health and readiness stay open for probes; the rest takes the bearer
// token when one is set, behind the AuthThrottle.
func (s *Surface) Admin() http.Handler {
	guarded := http.NewServeMux()
	guarded.Handle("POST /api/v1/release", s.bounded(s.Handlers.release))
	guarded.Handle("POST /api/v1/drain", s.bounded(s.Handlers.drain))
	guarded.Handle("GET /api/v1/status", s.bounded(s.Handlers.status))
	guarded.Handle("GET /api/v1/pod/{pod_name}", s.bounded(s.Handlers.podInfo))
	guarded.Handle("GET /api/v1/pods", s.bounded(s.Handlers.pods))
	guarded.Handle("POST /api/v1/undrain", s.bounded(s.Handlers.undrain))
	if s.RunningConfig != nil {
		guarded.Handle("GET /api/v1/config", s.bounded(s.runningConfig))
	}
	// The call timeline is for operators: admin listener only (the
	// internal one takes unauthenticated agents).
	if s.Handlers.Records != nil {
		guarded.Handle("GET /api/v1/calls/{call_sid}", s.bounded(s.Handlers.callTimeline))
		guarded.Handle("GET /api/v1/calls", s.bounded(s.Handlers.podCalls))
	}
	if s.Metrics != nil {
		guarded.Handle("GET /metrics", s.Metrics)
	}
	// Profiles of a live edge, behind the admin token like the rest.
	if s.LogLevel != nil {
		guarded.HandleFunc("GET /api/v1/log-level", s.LogLevel.get)
		guarded.Handle("PUT /api/v1/log-level", s.bounded(s.LogLevel.set))
	}
	guarded.HandleFunc("GET /debug/pprof/", pprof.Index)
	guarded.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
	guarded.HandleFunc("GET /debug/pprof/trace", pprof.Trace)
	if c := s.Config; c != nil {
		guarded.Handle("GET /api/v1/config/tiers", s.bounded(c.getTiers))
		guarded.Handle("PUT /api/v1/config/tiers", s.bounded(c.putTiers))
		guarded.Handle("GET /api/v1/config/merchants", s.bounded(c.listMerchants))
		guarded.Handle("GET /api/v1/config/merchants/{id}", s.bounded(c.getMerchant))
		guarded.Handle("PUT /api/v1/config/merchants/{id}", s.bounded(c.putMerchant))
		guarded.Handle("DELETE /api/v1/config/merchants/{id}", s.bounded(c.deleteMerchant))
		guarded.Handle("GET /api/v1/config/merchant-pools", s.bounded(c.listPools))
		guarded.Handle("PUT /api/v1/config/merchant-pools/{pool}", s.bounded(c.putPool))
	}

	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", healthz)
	mux.HandleFunc("GET /api/v1/health", healthz)
	mux.HandleFunc("GET /readyz", s.Ready.serve)
	mux.HandleFunc("GET /api/v1/ready", s.Ready.serve)
	if s.Page != nil {
		// A browser cannot send a bearer token: the page also takes HTTP
		// Basic credentials with the token as the password (statuspage.go).
		mux.Handle("GET /{$}", s.bounded(s.Page.guard(s.throttle(), s.AdminToken, s.serveStatusPage)))
	}
	mux.Handle("/", requireToken(s.throttle(), "admin", s.AdminToken, sameOriginJSON(guarded)))
	return mux
}

// bounded gives a request a deadline, which the Redis client honours: a hung
// Redis costs a caller the request timeout, not a hung connection. A client
// that sends its body or reads the answer too slowly loses the connection.
func (s *Surface) bounded(h http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rc := http.NewResponseController(w)
		now := time.Now()
		if d := get(s.BodyTimeout); d > 0 {
			rc.SetReadDeadline(now.Add(d))
		}
		if d := get(s.WriteTimeout); d > 0 {
			rc.SetWriteDeadline(now.Add(d))
		}
		if s.RequestTimeout != nil {
			if d := s.RequestTimeout(); d > 0 {
				ctx, cancel := context.WithTimeout(r.Context(), d)
				defer cancel()
				r = r.WithContext(ctx)
			}
		}
		h(w, r)
	})
}

func get(f func() time.Duration) time.Duration {
	if f == nil {
		return 0
	}
	return f()
}
