package api

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/edge-voice/edge/calls"
)

// Readiness answers /readyz: ready while no check fails and the process is
// not shutting down. Components add their checks at wiring time.
type Readiness struct {
	mu       sync.RWMutex
	checks   []check
	stopping atomic.Bool
}

type check struct {
	name string
	fn   func(context.Context) error
}

// Add registers a named check (e.g. "redis", "plugin twilio").
func (rd *Readiness) Add(name string, fn func(context.Context) error) {
	rd.mu.Lock()
	defer rd.mu.Unlock()
	rd.checks = append(rd.checks, check{name, fn})
}

// Stop turns readiness false for good: the load balancer stops sending new
// calls while the sockets in flight drain.
func (rd *Readiness) Stop() { rd.stopping.Store(true) }

// Stopping reports whether Stop was called.
func (rd *Readiness) Stopping() bool { return rd.stopping.Load() }

// Check runs every check and returns each failure by name.
func (rd *Readiness) Check(ctx context.Context) map[string]string {
	rd.mu.RLock()
	checks := append([]check(nil), rd.checks...)
	rd.mu.RUnlock()
	failed := map[string]string{}
	if rd.stopping.Load() {
		failed["shutdown"] = calls.ErrShuttingDown.Error()
	}
	for _, c := range checks {
		if err := c.fn(ctx); err != nil {
			failed[c.name] = err.Error()
		}
	}
	return failed
}

// serve answers /readyz with each failed check and its error: for the
// admin listener, inside the cluster.
func (rd *Readiness) serve(w http.ResponseWriter, r *http.Request) { rd.answer(w, r, true) }

// servePublic answers /readyz on the public listener with the names of the
// failed checks only: their errors (addresses, plugin paths) are no
// stranger's business.
func (rd *Readiness) servePublic(w http.ResponseWriter, r *http.Request) { rd.answer(w, r, false) }

func (rd *Readiness) answer(w http.ResponseWriter, r *http.Request, detail bool) {
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	failed := rd.Check(ctx)
	if len(failed) == 0 {
		writeJSON(w, http.StatusOK, map[string]any{"status": "ready"})
		return
	}
	if detail {
		writeJSON(w, http.StatusServiceUnavailable, map[string]any{"status": "not ready", "failed": failed})
		return
	}
	names := make([]string, 0, len(failed))
	for name := range failed {
		names = append(names, name)
	}
	slices.Sort(names)
	writeJSON(w, http.StatusServiceUnavailable, map[string]any{"status": "not ready", "failed": names})
}

func healthz(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{"status": "ok"})
}

// requireToken guards the admin surface with a bearer token when one is
// configured (token returns "" for none), compared in constant time.
func requireToken(token func() string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		want := token()
		if want != "" && !bearerMatches(r.Header.Get("Authorization"), want) {
			w.Header().Set("WWW-Authenticate", `Bearer realm="edge-admin"`)
			writeJSON(w, http.StatusUnauthorized, map[string]any{"success": false, "error": "unauthorized", "code": "unauthorized"})
			return
		}
		next.ServeHTTP(w, r)
	})
}

// bearerMatches compares "Bearer <token>" with want in constant time
// (hashing first, so not even the length leaks).
func bearerMatches(header, want string) bool {
	got, ok := strings.CutPrefix(header, "Bearer ")
	if !ok {
		return false
	}
	a, b := sha256.Sum256([]byte(got)), sha256.Sum256([]byte(want))
	return subtle.ConstantTimeCompare(a[:], b[:]) == 1
}
