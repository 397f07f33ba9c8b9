package allocator

import (
	"context"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// PoolCollector exports the pool gauges computed from Redis, so that every
// replica reports the same numbers (the predecessor kept active_calls per
// replica and it drifted): active_calls, pool_available_pods{tier},
// pool_assigned_pods{tier}, pool_draining_pods{tier},
// pool_calls_in_progress{tier} and pool_ejected_pods{tier}, and the demand
// signal for autoscalers (docs/admission.md): edge_tier_demand_pods{tier},
// edge_tier_demand_calls{tier} and edge_tier_refused_recent{tier}, and
// edge_admission_waiters (calls waiting for capacity on every replica).
// Three round trips (Status, the refusal buckets, the waiters) per scrape
// at most every MinInterval.
type PoolCollector struct {
	a           *Allocator
	MinInterval time.Duration

	mu         sync.Mutex
	at         time.Time
	last       []PoolStatus
	lastDemand []TierDemand
	lastWait   int64
	lastErr    error

	active, available, assigned, draining, calls, ejected, up *prometheus.Desc
	demandPods, demandCalls, refused, waiters                 *prometheus.Desc
}

// NewPoolCollector returns a collector over a's pools.
func NewPoolCollector(a *Allocator) *PoolCollector {
	return &PoolCollector{
		a:           a,
		MinInterval: 5 * time.Second,
		active:      prometheus.NewDesc("active_calls", "Calls in progress, counted in Redis (live leases).", nil, nil),
		available:   prometheus.NewDesc("pool_available_pods", "Pods in a pool's available set.", []string{"tier"}, nil),
		assigned:    prometheus.NewDesc("pool_assigned_pods", "Pods assigned to a pool.", []string{"tier"}, nil),
		draining:    prometheus.NewDesc("pool_draining_pods", "Assigned pods flagged draining.", []string{"tier"}, nil),
		calls:       prometheus.NewDesc("pool_calls_in_progress", "Calls in progress per pool.", []string{"tier"}, nil),
		ejected:     prometheus.NewDesc("pool_ejected_pods", "Assigned pods out of allocation after failed dials, until a health probe succeeds.", []string{"tier"}, nil),
		up:          prometheus.NewDesc("edge_pool_status_up", "1 if the last pool status read from Redis succeeded.", nil, nil),
		demandPods: prometheus.NewDesc("edge_tier_demand_pods",
			"Pods a pool's calls need: ceil((calls in progress + calls refused for want of a pod in the last 60s) / calls per pod). The autoscaling signal.", []string{"tier"}, nil),
		demandCalls: prometheus.NewDesc("edge_tier_demand_calls", "Calls in progress plus calls refused for want of a pod in the last 60s.", []string{"tier"}, nil),
		waiters: prometheus.NewDesc("edge_admission_waiters",
			"Calls waiting for capacity (admission.wait) on every replica, counted in Redis.", nil, nil),
		refused: prometheus.NewDesc("edge_tier_refused_recent", "Calls refused for want of a pod in the last 60s whose chain ends in the pool, counted in Redis.", []string{"tier"}, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *PoolCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.active, c.available, c.assigned, c.draining, c.calls, c.ejected, c.up, c.demandPods, c.demandCalls, c.refused, c.waiters} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *PoolCollector) Collect(ch chan<- prometheus.Metric) {
	pools, demand, waiting, err := c.read()
	if err != nil {
		ch <- prometheus.MustNewConstMetric(c.up, prometheus.GaugeValue, 0)
		return
	}
	ch <- prometheus.MustNewConstMetric(c.up, prometheus.GaugeValue, 1)
	total := 0
	for _, p := range pools {
		total += p.Calls
		ch <- prometheus.MustNewConstMetric(c.available, prometheus.GaugeValue, float64(p.Available), p.Tier)
		ch <- prometheus.MustNewConstMetric(c.assigned, prometheus.GaugeValue, float64(p.Assigned), p.Tier)
		ch <- prometheus.MustNewConstMetric(c.draining, prometheus.GaugeValue, float64(p.Draining), p.Tier)
		ch <- prometheus.MustNewConstMetric(c.calls, prometheus.GaugeValue, float64(p.Calls), p.Tier)
		ch <- prometheus.MustNewConstMetric(c.ejected, prometheus.GaugeValue, float64(p.Ejected), p.Tier)
	}
	ch <- prometheus.MustNewConstMetric(c.active, prometheus.GaugeValue, float64(total))
	ch <- prometheus.MustNewConstMetric(c.waiters, prometheus.GaugeValue, float64(waiting))
	for _, d := range demand {
		ch <- prometheus.MustNewConstMetric(c.demandPods, prometheus.GaugeValue, float64(d.Pods), d.Tier)
		ch <- prometheus.MustNewConstMetric(c.demandCalls, prometheus.GaugeValue, float64(d.Calls+d.Refused), d.Tier)
		ch <- prometheus.MustNewConstMetric(c.refused, prometheus.GaugeValue, float64(d.Refused), d.Tier)
	}
}

func (c *PoolCollector) read() ([]PoolStatus, []TierDemand, int64, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.at.IsZero() && time.Since(c.at) < c.MinInterval {
		return c.last, c.lastDemand, c.lastWait, c.lastErr
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	c.last, c.lastErr = c.a.Status(ctx)
	c.lastDemand = nil
	if c.lastErr == nil {
		c.lastDemand, c.lastErr = c.a.demandOf(ctx, c.last)
	}
	if c.lastErr == nil {
		c.lastWait, c.lastErr = c.a.waiterCount(ctx)
	}
	c.at = time.Now()
	return c.last, c.lastDemand, c.lastWait, c.lastErr
}
