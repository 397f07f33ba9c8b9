package api

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/edge-voice/edge/calls"
)

// Readiness answers /readyz: ready while this replica can serve. A check
// of the replica's own (plugins, media sockets, the pod source; shutdown)
// fails it at once. A check of a dependency every replica shares (Redis,
// AddShared) fails it only once that dependency has failed without a break
// for longer than its grace: a blip of the shared Redis turns every replica
// unready at the same moment, and a balancer that honours readiness is then
// left with no backend at all, refusing the webhooks and the media sockets
// of calls edge had just answered, while a replica in the balancer would
// have had them wait for Redis or given the provider its fallback answer.
// Components add their checks at wiring time.
type Readiness struct {
	// Log, when set, gets a line when a shared dependency starts failing,
	// when its grace runs out and when it answers again.
	Log *slog.Logger

	mu       sync.RWMutex
	checks   []check
	stopping atomic.Bool
	// ready is the verdict of the last evaluation (edge_ready).
	ready atomic.Bool
	// background: Run checks the shared dependencies, and an evaluation
	// reads what they last answered instead of asking them.
	background atomic.Bool
}

type check struct {
	name   string
	fn     func(context.Context) error
	shared *outage // nil: the replica's own check
}

// sharedCheckTimeout bounds one check of a shared dependency: a probe that
// times out is a failed probe whatever the grace (kubelet's timeoutSeconds
// is 1 s unless set), and a hung Redis would otherwise hold it for the
// client's retries.
const sharedCheckTimeout = 500 * time.Millisecond

// sharedCheckEvery paces Run's checks of the shared dependencies: a
// failure is seen within this (plus sharedCheckTimeout), against a grace
// of seconds.
const sharedCheckEvery = time.Second

// Run checks the shared dependencies every sharedCheckEvery until ctx
// ends, so that /readyz answers from what this replica already knows,
// within milliseconds whatever Redis does: a probe that waited on a hung
// Redis (up to sharedCheckTimeout) would time out at a balancer's 500 ms
// health check and take every replica out at once, which is what the
// grace is there to prevent. The replica's own checks stay on the probe:
// they read its own state. Without Run, each evaluation asks.
func (rd *Readiness) Run(ctx context.Context) error {
	rd.checkShared(ctx)
	rd.background.Store(true)
	defer rd.background.Store(false)
	t := time.NewTicker(sharedCheckEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			rd.checkShared(ctx)
		}
	}
}

// checkShared asks every shared dependency once and records its answer.
func (rd *Readiness) checkShared(ctx context.Context) {
	rd.mu.RLock()
	checks := append([]check(nil), rd.checks...)
	rd.mu.RUnlock()
	for _, c := range checks {
		if c.shared != nil {
			start, err := rd.askShared(ctx, c)
			c.shared.record(c.name, start, err, rd.Log)
		}
	}
}

// askShared runs a shared check within sharedCheckTimeout.
func (rd *Readiness) askShared(ctx context.Context, c check) (time.Time, error) {
	start := time.Now()
	cctx, cancel := context.WithTimeout(ctx, sharedCheckTimeout)
	defer cancel()
	err := c.fn(cctx)
	if err != nil && errors.Is(cctx.Err(), context.DeadlineExceeded) && ctx.Err() == nil {
		err = fmt.Errorf("no answer within %v: %w", sharedCheckTimeout, err)
	}
	return start, err
}

// Add registers a named check of the replica's own (e.g. "plugin twilio"):
// its first failure fails readiness.
func (rd *Readiness) Add(name string, fn func(context.Context) error) {
	rd.mu.Lock()
	defer rd.mu.Unlock()
	rd.checks = append(rd.checks, check{name: name, fn: fn})
}

// AddShared registers a named check of a dependency that every replica
// shares (e.g. "redis"): it fails readiness only once it has failed without
// a break for longer than grace() (read at each check, so it follows a
// reload); a passing check ends the run. Within the grace /readyz stays
// ready and names the check under "degraded". Before the dependency first
// answers, a failure fails readiness at once: a replica that never reached
// it has served nothing and keeps no calls waiting. A grace of 0 fails at
// once, as Add does.
func (rd *Readiness) AddShared(name string, grace func() time.Duration, fn func(context.Context) error) {
	rd.mu.Lock()
	defer rd.mu.Unlock()
	rd.checks = append(rd.checks, check{name: name, fn: fn, shared: &outage{grace: grace}})
}

// Stop turns readiness false for good: the load balancer stops sending new
// calls while the sockets in flight drain.
func (rd *Readiness) Stop() { rd.stopping.Store(true) }

// Stopping reports whether Stop was called.
func (rd *Readiness) Stopping() bool { return rd.stopping.Load() }

// Check runs every check and returns each failure by name (a shared check
// within its grace is not one).
func (rd *Readiness) Check(ctx context.Context) map[string]string {
	failed, _ := rd.evaluate(ctx)
	return failed
}

// evaluate runs every check: failed turns readiness false, degraded names
// the shared checks failing within their grace.
func (rd *Readiness) evaluate(ctx context.Context) (failed, degraded map[string]string) {
	rd.mu.RLock()
	checks := append([]check(nil), rd.checks...)
	rd.mu.RUnlock()
	failed, degraded = map[string]string{}, map[string]string{}
	if rd.stopping.Load() {
		failed["shutdown"] = calls.ErrShuttingDown.Error()
	}
	for _, c := range checks {
		if c.shared == nil {
			if err := c.fn(ctx); err != nil {
				failed[c.name] = err.Error()
			}
			continue
		}
		if !rd.background.Load() {
			start, err := rd.askShared(ctx, c)
			c.shared.record(c.name, start, err, rd.Log)
		}
		if msg, fails := c.shared.verdict(c.name, rd.Log); msg != "" && fails {
			failed[c.name] = msg
		} else if msg != "" {
			degraded[c.name] = msg
		}
	}
	rd.ready.Store(len(failed) == 0)
	return failed, degraded
}

// outage follows one shared dependency through its checks: since when it
// has been failing without a break.
type outage struct {
	grace func() time.Duration

	mu      sync.Mutex
	newest  time.Time // start of the newest check recorded
	since   time.Time // start of the first failed check of this run; zero while it answers
	reached bool      // it answered once since the process started
	dropped bool      // the grace of this run ran out (logged once)
	lastErr string
}

// record records a check that started at start and ended with err. A
// check that started before the newest one recorded (probes overlap) says
// nothing new: the newer one already told.
func (o *outage) record(name string, start time.Time, err error, log *slog.Logger) {
	grace := o.grace()
	now := time.Now()
	o.mu.Lock()
	defer o.mu.Unlock()
	if err == nil {
		o.reached = true
	}
	if !start.Before(o.newest) {
		o.newest = start
		switch {
		case err == nil && !o.since.IsZero():
			if log != nil {
				log.Info("shared readiness check passes again", "check", name, "failed_for", now.Sub(o.since).Round(time.Millisecond), "grace", grace)
			}
			o.since, o.dropped = time.Time{}, false
		case err != nil:
			o.lastErr = err.Error()
			if o.since.IsZero() {
				o.since = start
				if log != nil && o.reached && grace > 0 {
					log.Warn("shared readiness check failing: this replica stays ready for its grace", "check", name, "grace", grace, "err", err)
				}
			}
		}
	}
}

// verdict says what the checks recorded mean now: msg is "" while the
// dependency answers, else how long it has been failing; fails is whether
// that fails readiness.
func (o *outage) verdict(name string, log *slog.Logger) (msg string, fails bool) {
	grace := o.grace()
	now := time.Now()
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.since.IsZero() {
		return "", false
	}
	down := now.Sub(o.since)
	switch {
	case grace <= 0:
		return o.lastErr, true
	case !o.reached:
		return fmt.Sprintf("never reached since start: %s", o.lastErr), true
	case down >= grace:
		if !o.dropped && log != nil {
			log.Warn("shared readiness check failing for longer than its grace: this replica is not ready", "check", name, "failed_for", down.Round(time.Millisecond), "grace", grace, "err", o.lastErr)
		}
		o.dropped = true
		return fmt.Sprintf("unreachable for %v, longer than the grace %v: %s", down.Round(100*time.Millisecond), grace, o.lastErr), true
	}
	return fmt.Sprintf("unreachable for %v, grace %v: %s", down.Round(100*time.Millisecond), grace, o.lastErr), false
}

// downFor is how long the dependency has been failing at now (0 while it
// answers).
func (o *outage) downFor(now time.Time) time.Duration {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.since.IsZero() {
		return 0
	}
	return now.Sub(o.since)
}

var (
	readyDesc = prometheus.NewDesc("edge_ready",
		"1 when this replica's last readiness evaluation (a /readyz probe) found it ready, else 0.", nil, nil)
	sharedDownDesc = prometheus.NewDesc("edge_readiness_shared_down_seconds",
		"How long a shared dependency's readiness check (redis) has been failing without a break, 0 while it answers; readiness drops once this passes its grace (http.readiness_redis_grace).",
		[]string{"check"}, nil)
)

// MustRegister exports edge_ready and edge_readiness_shared_down_seconds on
// reg, read at scrape time without running any check.
func (rd *Readiness) MustRegister(reg prometheus.Registerer) {
	reg.MustRegister(readinessCollector{rd})
}

type readinessCollector struct{ rd *Readiness }

func (c readinessCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- readyDesc
	ch <- sharedDownDesc
}

func (c readinessCollector) Collect(ch chan<- prometheus.Metric) {
	ready := 0.0
	if c.rd.ready.Load() && !c.rd.stopping.Load() {
		ready = 1
	}
	ch <- prometheus.MustNewConstMetric(readyDesc, prometheus.GaugeValue, ready)
	c.rd.mu.RLock()
	checks := append([]check(nil), c.rd.checks...)
	c.rd.mu.RUnlock()
	now := time.Now()
	for _, ck := range checks {
		if ck.shared != nil {
			ch <- prometheus.MustNewConstMetric(sharedDownDesc, prometheus.GaugeValue, ck.shared.downFor(now).Seconds(), ck.name)
		}
	}
}

// serve answers /readyz with each failed check and its error: for the
// admin listener, inside the cluster.
func (rd *Readiness) serve(w http.ResponseWriter, r *http.Request) { rd.answer(w, r, true) }

// servePublic answers /readyz on the public listener with the names of the
// failed checks only: their errors (addresses, plugin paths) are no
// stranger's business.
func (rd *Readiness) servePublic(w http.ResponseWriter, r *http.Request) { rd.answer(w, r, false) }

// answer writes 200 or 503 with the failed checks under "failed", and the
// shared checks failing within their grace under "degraded" (ready
// nonetheless).
func (rd *Readiness) answer(w http.ResponseWriter, r *http.Request, detail bool) {
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	failed, degraded := rd.evaluate(ctx)
	body, status := map[string]any{"status": "ready"}, http.StatusOK
	if len(failed) > 0 {
		body["status"], status = "not ready", http.StatusServiceUnavailable
		body["failed"] = shown(failed, detail)
	}
	if len(degraded) > 0 {
		body["degraded"] = shown(degraded, detail)
	}
	writeJSON(w, status, body)
}

// shown is checks with their messages for detail, else their sorted names.
func shown(checks map[string]string, detail bool) any {
	if detail {
		return checks
	}
	names := make([]string, 0, len(checks))
	for name := range checks {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}

func healthz(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{"status": "ok"})
}

// requireToken guards the admin surface of listener with a bearer token
// when one is configured (token returns "" for none), compared in constant
// time, and only while th lets the request's source try.
func requireToken(th *AuthThrottle, listener string, token func() string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		want := token()
		if want == "" {
			next.ServeHTTP(w, r)
			return
		}
		switch res, retry := th.check(r, listener, func() bool { return bearerMatches(r.Header.Get("Authorization"), want) }); res {
		case authThrottled:
			refuseThrottled(w, retry)
		case authFailed:
			w.Header().Set("WWW-Authenticate", `Bearer realm="edge-admin"`)
			writeJSON(w, http.StatusUnauthorized, map[string]any{"success": false, "error": "unauthorized", "code": "unauthorized"})
		default:
			next.ServeHTTP(w, r)
		}
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
