package poolmgr

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

// Metrics are the pool manager's series. zombies_recovered_total is the
// predecessor's name; the per-tier pool gauges are the allocator's
// PoolCollector (computed from Redis, so every replica agrees).
type Metrics struct {
	Leader          prometheus.Gauge
	LeaderTerms     prometheus.Counter
	Zombies         prometheus.Counter
	SlotsReclaimed  prometheus.Counter
	SharedReadded   prometheus.Counter
	PodsSynced      *prometheus.CounterVec // outcome
	PodsRemoved     prometheus.Counter
	Moves           prometheus.Counter
	LoopSeconds     *prometheus.HistogramVec // loop
	LoopErrors      *prometheus.CounterVec   // loop
	TierConfigLoads *prometheus.CounterVec   // result
	// DataLost counts the times this replica found that Redis lost its
	// data; Reasserted the calls it wrote back then (result reasserted or
	// lost); DeadReplicas the replicas the leader found dead.
	DataLost     prometheus.Counter
	Reasserted   *prometheus.CounterVec // result
	DeadReplicas prometheus.Counter
}

// NewMetrics registers the series on reg (nil: nowhere, for tests).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	f := promauto.With(reg)
	m := &Metrics{
		Leader: f.NewGauge(prometheus.GaugeOpts{
			Name: "edge_poolmgr_leader", Help: "1 while this replica runs the leader loops.",
		}),
		LeaderTerms: f.NewCounter(prometheus.CounterOpts{
			Name: "edge_poolmgr_leader_terms_total", Help: "Times this replica became leader.",
		}),
		Zombies: f.NewCounter(prometheus.CounterOpts{
			Name: "zombies_recovered_total", Help: "Exclusive and merchant pods given back to their pool by the zombie sweep.",
		}),
		SlotsReclaimed: f.NewCounter(prometheus.CounterOpts{
			Name: "edge_poolmgr_shared_slots_reclaimed_total", Help: "Shared-pod call slots taken back from calls that died without a release.",
		}),
		SharedReadded: f.NewCounter(prometheus.CounterOpts{
			Name: "edge_poolmgr_shared_pods_readded_total", Help: "Shared pods put back into their missing available ZSET.",
		}),
		PodsSynced: f.NewCounterVec(prometheus.CounterOpts{
			Name: "edge_poolmgr_pods_synced_total", Help: "Pod syncs by outcome (added, moved, unchanged, busy, unready, unknown, bad_tier).",
		}, []string{"outcome"}),
		PodsRemoved: f.NewCounter(prometheus.CounterOpts{
			Name: "edge_poolmgr_pods_removed_total", Help: "Pods unregistered because the source no longer has them.",
		}),
		Moves: f.NewCounter(prometheus.CounterOpts{
			Name: "edge_poolmgr_rebalance_moves_total", Help: "Idle pods moved between tiers by rebalancing.",
		}),
		LoopSeconds: f.NewHistogramVec(prometheus.HistogramOpts{
			Name: "edge_poolmgr_loop_duration_seconds", Help: "Duration of one run of a pool manager loop (watcher, reconcile, sweep, tier_refresh).",
			Buckets: []float64{.001, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 10},
		}, []string{"loop"}),
		LoopErrors: f.NewCounterVec(prometheus.CounterOpts{
			Name: "edge_poolmgr_loop_errors_total", Help: "Runs of a pool manager loop that failed.",
		}, []string{"loop"}),
		TierConfigLoads: f.NewCounterVec(prometheus.CounterOpts{
			Name: "edge_tier_config_refresh_total", Help: "Tier config refreshes by result (unchanged, applied, invalid, error, restored: written back after Redis lost it; merchants_restored: the merchant config and pool targets written back with it).",
		}, []string{"result"}),
		DataLost: f.NewCounter(prometheus.CounterOpts{
			Name: "edge_redis_data_lost_total", Help: "Times this replica found that Redis lost its data (restarted empty, flushed): the data set's epoch changed.",
		}),
		Reasserted: f.NewCounterVec(prometheus.CounterOpts{
			Name: "edge_calls_reasserted_total", Help: "Live calls this replica wrote back after Redis lost its data, by result (reasserted; lost: its pod served another call, or it had ended).",
		}, []string{"result"}),
		DeadReplicas: f.NewCounter(prometheus.CounterOpts{
			Name: "edge_replicas_dead_total", Help: "Replicas the leader found dead (heartbeat stale, no connection to Redis) and whose calls it ended.",
		}),
	}
	// Exported from the start, at zero, for dashboards and alerts.
	m.Reasserted.WithLabelValues("reasserted")
	m.Reasserted.WithLabelValues("lost")
	return m
}

// observe records one run of a loop.
func (m *Metrics) observe(loop string, start time.Time, err error) {
	m.LoopSeconds.WithLabelValues(loop).Observe(time.Since(start).Seconds())
	if err != nil {
		m.LoopErrors.WithLabelValues(loop).Inc()
	}
}
