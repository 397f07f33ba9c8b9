package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"time"

	"github.com/edge-voice/edge/allocator"
	"github.com/edge-voice/edge/api"
	"github.com/edge-voice/edge/config"
	"github.com/edge-voice/edge/poolmgr"
)

// setupPools wires the pool manager: a pod source feeding the
// registry the media proxy resolves pods in (every replica), leader
// election, the leader's loops (watcher, reconciler, zombie sweep), the
// tier-config refresh (every replica) and the tier/merchant config API.
func setupPools(ctx context.Context, a *app) error {
	cfg := a.cfg()
	metrics := poolmgr.NewMetrics(a.reg)
	reg := poolmgr.NewRegistry()
	a.pods = reg
	lead := cfg.Leader
	identity := lead.Identity
	if identity == "" {
		identity, _ = os.Hostname() // in Kubernetes, the pod name
	}

	var elector poolmgr.Elector
	switch cfg.Pods.Source {
	case poolmgr.SourceKubernetes:
		client, err := poolmgr.NewKubeClient(cfg.Pods.Kubeconfig)
		if err != nil {
			return err
		}
		src := &poolmgr.KubeSource{
			Client: client, Namespace: cfg.Pods.Namespace, LabelSelector: cfg.Pods.LabelSelector,
			Port: cfg.Pods.PodPort, Registry: reg, Log: a.log.With("component", "pods"),
		}
		a.add(src)
		a.ready.Add("pods", func(context.Context) error {
			select {
			case <-reg.Synced():
				return nil
			default:
				return fmt.Errorf("pod informer has not synced yet")
			}
		})
		elector = &poolmgr.KubeElector{
			Client: client, Namespace: cfg.Pods.Namespace, Name: lead.LeaseName, Identity: identity,
			LeaseDuration: lead.LeaseDuration, RenewDeadline: lead.RenewDeadline, RetryPeriod: lead.RetryPeriod,
			Log: a.log.With("component", "leader"), Metrics: metrics,
		}
	case poolmgr.SourceStatic:
		src := &poolmgr.StaticSource{Registry: reg}
		// The list is also synced at once, on every replica, as before the
		// pool manager: a fresh start or a reload is usable immediately,
		// without waiting for the leader's watcher. The sync is idempotent;
		// removals stay the leader's.
		set := func(ctx context.Context, cfg *config.Config) {
			var pods []allocator.PodState
			for _, p := range a.staticPods(cfg) {
				pods = append(pods, allocator.PodState{Name: p.Name, Address: p.Address, Tier: p.Tier})
			}
			src.Set(pods)
			res, err := a.alloc.SyncPods(ctx, "", reg.Snapshot())
			if err != nil {
				a.log.Error("register static pods", "err", err)
			}
			for _, r := range res {
				if r.Outcome == allocator.SyncBadTier || r.Outcome == allocator.SyncBusy {
					a.log.Warn("static pod not (re)registered", "pod", r.Pod, "outcome", r.Outcome, "tier", r.Tier)
				}
			}
		}
		set(ctx, cfg)
		a.reloaded(func(_, cur *config.Config) { set(context.Background(), cur) })
		a.add(src)
		elector = &poolmgr.RedisElector{
			Lock: a.alloc, Identity: identity,
			LeaseDuration: lead.LeaseDuration, RenewDeadline: lead.RenewDeadline, RetryPeriod: lead.RetryPeriod,
			Log: a.log.With("component", "leader"), Metrics: metrics,
		}
	default:
		return fmt.Errorf("pods.source %q: unknown", cfg.Pods.Source)
	}

	m := &poolmgr.Manager{
		Pools: a.alloc, Registry: reg, Elector: elector, Log: a.log.With("component", "poolmgr"), Metrics: metrics,
		SweepInterval:     func() time.Duration { return a.cfg().Pool.ZombieSweepInterval },
		ReconcileInterval: func() time.Duration { return a.cfg().Pool.ReconcileInterval },
	}
	a.isLeader = m.IsLeader
	a.add(m)
	a.add(&poolmgr.TierRefresher{
		Load:    a.alloc.LoadTierConfig,
		Current: func() allocator.TierConfig { return a.alloc.Config().Tiers },
		// Tiers from Redis; ApplyTiers keeps the TTLs of the config in effect.
		Apply:    a.alloc.ApplyTiers,
		Interval: func() time.Duration { return a.cfg().Pool.TierConfigRefresh },
		Log:      a.log.With("component", "tier-config"), Metrics: metrics,
	})

	cfgAPI := &api.ConfigAPI{Alloc: a.alloc, Log: a.log, OnTierChange: func(tc allocator.TierConfig) {
		// This replica applies at once; the others within pool.tier_config_refresh.
		a.alloc.ApplyTiers(tc)
	}}
	if a.surface.AdminExtra == nil {
		a.surface.AdminExtra = map[string]http.Handler{}
	}
	for pattern, h := range cfgAPI.Routes() {
		a.surface.AdminExtra[pattern] = h
	}
	return nil
}
