package allocator

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

// metrics are the allocator's Prometheus series; the names of the first
// three are the predecessor's, so its dashboards keep working.
type metrics struct {
	allocations   *prometheus.CounterVec // source_pool, result
	releases      *prometheus.CounterVec // source_pool, result
	drains        prometheus.Counter
	scriptSeconds *prometheus.HistogramVec // script
	scriptErrors  *prometheus.CounterVec   // script
	// Waiting for capacity (admission.wait, wait.go).
	waitSeconds  *prometheus.HistogramVec // result: served, timeout, gave_up, error
	waitTimeouts prometheus.Counter
}

// resultUnavailable is allocations_total's result when Redis could not
// serve the allocation (ErrUnavailable): apart from "error" (a script's
// error, a bug), so that an outage is told from a fault of edge's.
const resultUnavailable = "redis_unavailable"

func newMetrics(reg prometheus.Registerer) *metrics {
	m := newMetricsVecs(reg)
	// The series alerts and dashboards read exist at 0 from the start
	// (deploy/monitoring/alerts.yaml): a panel reads 0, not "No data", and
	// increase() sees the first event. Refusals carry no source pool.
	for _, result := range []string{"no_pods", "all_draining", "at_capacity", "merchant_at_cap", "rate_limited",
		"call_ended", "in_progress", "recovering", resultUnavailable, "error"} {
		m.allocations.WithLabelValues("", result)
	}
	for _, name := range scriptNames {
		m.scriptErrors.WithLabelValues(name)
	}
	return m
}

func newMetricsVecs(reg prometheus.Registerer) *metrics {
	f := promauto.With(reg)
	return &metrics{
		allocations: f.NewCounterVec(prometheus.CounterOpts{
			Name: "allocations_total",
			Help: "Allocations by source pool and result (success, existing, no_pods, all_draining, at_capacity, merchant_at_cap, rate_limited, call_ended, in_progress, recovering, redis_unavailable, error).",
		}, []string{"source_pool", "result"}),
		// source_pool, as on allocations_total, so that the predecessor's
		// releases_total{pool,status} can be recorded from it
		// (deploy/base/recording-rules.yaml); "" when no call was found.
		releases: f.NewCounterVec(prometheus.CounterOpts{
			Name: "releases_total",
			Help: "Releases by source pool and result (released, not_found, stale, error).",
		}, []string{"source_pool", "result"}),
		drains: f.NewCounter(prometheus.CounterOpts{
			Name: "drains_total",
			Help: "Pods drained (repeat drains included).",
		}),
		scriptSeconds: f.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "edge_redis_script_duration_seconds",
			Help:    "Round-trip time of the allocator's Redis scripts.",
			Buckets: []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, 1},
		}, []string{"script"}),
		scriptErrors: f.NewCounterVec(prometheus.CounterOpts{
			Name: "edge_redis_script_errors_total",
			Help: "Allocator Redis scripts that failed (Redis unreachable, timeout, script error).",
		}, []string{"script"}),
		waitSeconds: f.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "edge_admission_wait_seconds",
			Help:    "How long calls waited for capacity (admission.wait), by result: served (got a pod), timeout (the budget ran out: at_capacity), gave_up (the caller went away), error.",
			Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2, 3, 5, 10},
		}, []string{"result"}),
		waitTimeouts: f.NewCounter(prometheus.CounterOpts{
			Name: "edge_admission_wait_timeouts_total",
			Help: "Calls whose wait for capacity ran out of budget and were refused at_capacity.",
		}),
	}
}

func (m *metrics) observeScript(name string, d time.Duration, err error) {
	m.scriptSeconds.WithLabelValues(name).Observe(d.Seconds())
	if err != nil {
		m.scriptErrors.WithLabelValues(name).Inc()
	}
}
