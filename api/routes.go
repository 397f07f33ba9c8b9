package api

import (
	"net/http"
)

// Surface is everything edge serves, listed in one place.
type Surface struct {
	Handlers *Handlers
	Ready    *Readiness
	// Metrics serves /metrics (the Prometheus registry's handler).
	Metrics http.Handler
	// AdminToken returns the admin bearer token ("" for none).
	AdminToken func() string

	// Providers serves the provider webhooks: the predecessor's
	// /api/v1/{provider}/allocate and each plugin's /providers/{name}/...
	// routes. Nil: no provider routes.
	Providers http.Handler
	// Media serves the media WebSockets under /ws/pod/. Nil: not served.
	Media http.Handler
	// AdminExtra mounts more admin routes (pattern -> handler), e.g. the
	// tier and merchant config API.
	AdminExtra map[string]http.Handler
}

// Public is the public listener: provider webhooks, the generic allocation
// endpoint and media sockets.
func (s *Surface) Public() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /api/v1/allocate", s.Handlers.allocate)
	if s.Providers != nil {
		mux.Handle("POST /api/v1/{provider}/allocate", s.Providers)
		mux.Handle("/providers/{name}/", s.Providers)
	}
	if s.Media != nil {
		mux.Handle("/ws/pod/", s.Media)
	}
	mux.HandleFunc("GET /healthz", healthz)
	mux.HandleFunc("GET /readyz", s.Ready.serve)
	return mux
}

// Admin is the admin listener. Its Service can keep the predecessor's
// in-cluster address: voice agents call release and drain here unchanged.
// Health and readiness stay open for probes; the rest takes the bearer
// token when one is set.
func (s *Surface) Admin() http.Handler {
	guarded := http.NewServeMux()
	guarded.HandleFunc("POST /api/v1/release", s.Handlers.release)
	guarded.HandleFunc("POST /api/v1/drain", s.Handlers.drain)
	guarded.HandleFunc("GET /api/v1/status", s.Handlers.status)
	guarded.HandleFunc("GET /api/v1/pod/{name}", s.Handlers.podInfo)
	if s.Metrics != nil {
		guarded.Handle("GET /metrics", s.Metrics)
	}
	for pattern, h := range s.AdminExtra {
		guarded.Handle(pattern, h)
	}

	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", healthz)
	mux.HandleFunc("GET /api/v1/health", healthz)
	mux.HandleFunc("GET /readyz", s.Ready.serve)
	mux.HandleFunc("GET /api/v1/ready", s.Ready.serve)
	mux.Handle("/", requireToken(s.AdminToken, guarded))
	return mux
}
