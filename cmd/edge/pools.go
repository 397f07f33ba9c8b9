package main

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/edge-voice/edge/allocator"
	"github.com/edge-voice/edge/config"
	"github.com/edge-voice/edge/poolmgr"
)

// pools is the pool manager's side of edge: a pod source feeding the
// registry the media proxy resolves pods in (every replica), leader
// election and the leader's loops (watcher, reconciler, zombie sweep), and
// the tier-config refresh (every replica). source, manager and refresher
// are components.
type pools struct {
	registry  *poolmgr.Registry
	source    component // *poolmgr.KubeSource or *poolmgr.StaticSource
	manager   *poolmgr.Manager
	refresher *poolmgr.TierRefresher
	presence  *poolmgr.Presence
	// synced is the "pods" readiness check; nil when the source is
	// complete at once (static).
	synced func(context.Context) error
	// static registers the static pod list; nil with Kubernetes.
	static *staticPods
}

// newPools builds the pool manager for cfg.Pods.Source. fakePods are the
// embedded default's fake agents, registered as static pods with the
// file's. With a static source the list is registered before newPools
// returns, so a fresh start takes calls at once.
func newPools(ctx context.Context, cfg *config.Config, current func() *config.Config, alloc *allocator.Allocator,
	fakePods []poolmgr.StaticPod, reg prometheus.Registerer, log *slog.Logger) (*pools, error) {
	metrics := poolmgr.NewMetrics(reg)
	p := &pools{registry: poolmgr.NewRegistry()}
	lead := cfg.Leader
	identity := replicaName(cfg)

	var elector poolmgr.Elector
	switch cfg.Pods.Source {
	case poolmgr.SourceKubernetes:
		client, err := poolmgr.NewKubeClient(cfg.Pods.Kubeconfig)
		if err != nil {
			return nil, err
		}
		p.source = &poolmgr.KubeSource{
			Pods: client.Pods(cfg.Pods.Namespace), Namespace: cfg.Pods.Namespace, LabelSelector: cfg.Pods.LabelSelector,
			Port: cfg.Pods.PodPort, Registry: p.registry, Log: log.With("component", "pods"),
		}
		p.synced = func(context.Context) error {
			select {
			case <-p.registry.Synced():
				return nil
			default:
				return fmt.Errorf("pod informer has not synced yet")
			}
		}
		elector = &poolmgr.LockElector{
			Lock: &poolmgr.LeaseLock{
				Leases: client.Leases(cfg.Pods.Namespace), Name: lead.LeaseName,
				Fence: alloc, RetryPeriod: lead.RetryPeriod, Log: log.With("component", "leader"),
			},
			Identity:      identity,
			LeaseDuration: lead.LeaseDuration, RenewDeadline: lead.RenewDeadline, RetryPeriod: lead.RetryPeriod,
			Log: log.With("component", "leader"), Metrics: metrics,
		}
	case poolmgr.SourceStatic:
		src := &poolmgr.StaticSource{Registry: p.registry}
		p.source = src
		p.static = &staticPods{src: src, registry: p.registry, alloc: alloc, fake: fakePods, log: log}
		p.static.set(ctx, cfg)
		elector = &poolmgr.LockElector{
			Lock: alloc, Identity: identity,
			LeaseDuration: lead.LeaseDuration, RenewDeadline: lead.RenewDeadline, RetryPeriod: lead.RetryPeriod,
			Log: log.With("component", "leader"), Metrics: metrics,
		}
	default:
		return nil, fmt.Errorf("pods.source %q: unknown", cfg.Pods.Source)
	}

	p.manager = &poolmgr.Manager{
		Pools: alloc, Registry: p.registry, Elector: elector, Log: log.With("component", "poolmgr"), Metrics: metrics,
		SweepInterval:     func() time.Duration { return current().Pool.ZombieSweepInterval },
		ReconcileInterval: func() time.Duration { return current().Pool.ReconcileInterval },
	}
	p.refresher = &poolmgr.TierRefresher{
		Load:    alloc.LoadTierConfig,
		Current: func() allocator.TierConfig { return alloc.Config().Tiers },
		// Tiers from Redis; ApplyTiers keeps the TTLs of the config in effect.
		Apply: alloc.ApplyTiers,
		// A Redis restarted empty gets the tiers back from memory.
		Restore: alloc.BootstrapTierConfig,
		// ... and the merchant config and pool targets (only in Redis).
		Merchants: alloc,
		Interval:  func() time.Duration { return current().Pool.TierConfigRefresh },
		Log:       log.With("component", "tier-config"), Metrics: metrics,
	}
	p.presence = &poolmgr.Presence{
		Beat: func(ctx context.Context) (allocator.Beat, error) { return alloc.Heartbeat(ctx, instanceName(cfg)) },
		// Policy that lived only in Redis comes back within the recovery
		// hold, before the first allocation.
		AfterDataLost: p.refresher.Refresh,
		// Every replica looks for dead ones at the pace they beat, so the
		// leader's own death needs no new election to be noticed.
		DeadReplicas: func(ctx context.Context, stale []string) (allocator.DeadReplicas, error) {
			return alloc.EndDeadReplicas(ctx, "", stale)
		},
		Interval: func() time.Duration { return current().Allocator.HeartbeatInterval },
		Log:      log.With("component", "presence"), Metrics: metrics,
	}
	return p, nil
}

// Apply takes a reloaded config: the static pod list is registered again.
// The intervals are read on use.
func (p *pools) Apply(cfg *config.Config) {
	if p.static != nil {
		p.static.set(context.Background(), cfg)
	}
}

// staticPods registers the static pod list (pods.static plus the fake
// agents) on every replica, as before the pool manager: a fresh start or a
// reload is usable immediately, without waiting for the leader's watcher.
// The sync is idempotent; removals stay the leader's.
type staticPods struct {
	src      *poolmgr.StaticSource
	registry *poolmgr.Registry
	alloc    *allocator.Allocator
	fake     []poolmgr.StaticPod
	log      *slog.Logger
}

func (s *staticPods) set(ctx context.Context, cfg *config.Config) {
	var pods []allocator.PodState
	for _, p := range append(append([]poolmgr.StaticPod(nil), cfg.Pods.Static...), s.fake...) {
		pods = append(pods, allocator.PodState{Name: p.Name, Address: p.Address, Tier: p.Tier})
	}
	s.src.Set(pods)
	res, err := s.alloc.SyncPods(ctx, "", s.registry.Snapshot())
	if err != nil {
		s.log.Error("register static pods", "err", err)
	}
	for _, r := range res {
		if r.Outcome == allocator.SyncBadTier || r.Outcome == allocator.SyncBusy {
			s.log.Warn("static pod not (re)registered", "pod", r.Pod, "outcome", r.Outcome, "tier", r.Tier)
		}
	}
}
