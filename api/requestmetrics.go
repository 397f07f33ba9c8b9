package api

import (
	"log/slog"
	"net/http"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/edge-voice/edge/calls"
	"github.com/edge-voice/edge/proxy/mediaurl"
)

// requestMetrics are a listener's request series, the ones any HTTP
// service exports and the predecessor's dashboards read (recorded as its
// http_requests_total, http_request_duration_seconds and
// smart_router_panics_recovered_total by deploy/base/recording-rules.yaml).
type requestMetrics struct {
	requests  *prometheus.CounterVec   // method, route, code
	responses *prometheus.CounterVec   // route, class
	seconds   *prometheus.HistogramVec // method, route, code
	panics    prometheus.Counter
}

func newRequestMetrics(reg prometheus.Registerer, listener string) *requestMetrics {
	labels := prometheus.Labels{"listener": listener}
	m := &requestMetrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "edge_http_requests_total", ConstLabels: labels,
			Help: "Requests answered, by method, route (the path of the route's pattern; \"unmatched\" for none) and status code. Media sockets are not counted.",
		}, []string{"method", "route", "code"}),
		responses: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "edge_http_responses_total", ConstLabels: labels,
			Help: "Requests answered, by listener, route and status class (2xx, 3xx, 4xx, 5xx). Media sockets are not counted.",
		}, []string{"route", "class"}),
		seconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "edge_http_request_duration_seconds", ConstLabels: labels,
			Help:    "Time to answer a request, by method, route and status code. Media sockets are not timed.",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
		}, []string{"method", "route", "code"}),
		panics: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "edge_http_panics_recovered_total", ConstLabels: labels,
			Help: "Handler panics recovered (answered 500, the connection kept serving).",
		}),
	}
	if reg != nil {
		reg.MustRegister(m.requests, m.responses, m.seconds, m.panics)
	}
	return m
}

// instrument counts, times and logs (access) every request but media
// sockets (they are hijacked and last a call; the proxy has its own series
// and its "media socket closed" line), and answers a handler's panic with
// a 500 instead of dropping the connection.
func (m *requestMetrics) instrument(next http.Handler, log *slog.Logger, access *accessLog) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, mediaurl.PathPrefix) {
			next.ServeHTTP(w, r)
			return
		}
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w}
		ctx, note := calls.WithRequestNote(r.Context())
		r = r.WithContext(ctx)
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					panic(v) // net/http's own way to abort a response
				}
				m.panics.Inc()
				log.Error("handler panic recovered", "method", r.Method, "path", r.URL.Path,
					"panic", v, "stack", string(debug.Stack()))
				if !sw.wrote {
					writeJSON(sw, http.StatusInternalServerError, map[string]any{"success": false, "error": "internal error", "code": "internal"})
				}
			}
			took := time.Since(start)
			status := sw.status()
			route, code := routeOf(r, status), strconv.Itoa(status)
			m.requests.WithLabelValues(r.Method, route, code).Inc()
			m.responses.WithLabelValues(route, statusClass(status)).Inc()
			// By code, not class: the predecessor's
			// http_request_duration_seconds{method,endpoint,status} is
			// recorded from it with the numeric status its binary wrote.
			m.seconds.WithLabelValues(r.Method, route, code).Observe(took.Seconds())
			access.line(ctx, r, route, sw, took, note)
		}()
		next.ServeHTTP(sw, r)
	})
}

// routeOf is the route label of a served request: the path of the pattern
// that matched (ServeMux sets r.Pattern on the request it routes), so that
// the label's values are the routes' and not the paths' clients send. A
// provider's name is filled in once a provider answered (not 404: an
// unknown one): those are the predecessor's endpoints
// (/api/v1/twilio/allocate).
func routeOf(r *http.Request, status int) string {
	if r.Pattern == "" {
		return "unmatched"
	}
	_, path, ok := strings.Cut(r.Pattern, " ")
	if !ok {
		path = r.Pattern
	}
	path = strings.TrimSuffix(path, "{$}")
	if p := r.PathValue("provider"); p != "" && status != http.StatusNotFound {
		path = strings.Replace(path, "{provider}", p, 1)
		// A route the provider declared (only those are not 404):
		// /api/v1/twilio/status.
		if rt := r.PathValue("route"); rt != "" {
			path = strings.Replace(path, "{route}", rt, 1)
		}
	}
	return path
}

// statusClass is a status code's class label: "2xx" for 200 to 299.
func statusClass(code int) string {
	if code < 100 || code > 599 {
		return "other"
	}
	return strconv.Itoa(code/100) + "xx"
}

// statusWriter notes the status code and body size of an answer. Unwrap lets
// http.ResponseController reach the connection's deadlines.
type statusWriter struct {
	http.ResponseWriter
	code  int
	wrote bool
	n     int64
}

func (w *statusWriter) WriteHeader(code int) {
	if !w.wrote {
		w.code, w.wrote = code, true
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if !w.wrote {
		w.code, w.wrote = http.StatusOK, true
	}
	n, err := w.ResponseWriter.Write(b)
	w.n += int64(n)
	return n, err
}

func (w *statusWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		w.wrote = true
		if w.code == 0 {
			w.code = http.StatusOK
		}
		f.Flush()
	}
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (w *statusWriter) status() int {
	if w.code == 0 {
		return http.StatusOK
	}
	return w.code
}
