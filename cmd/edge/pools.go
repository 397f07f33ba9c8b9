package main

import (
	"context"
	"fmt"
	"sync/atomic"

	"github.com/edge-voice/edge/allocator"
	"github.com/edge-voice/edge/config"
)

// setupPools registers the pods edge allocates from. With the static source
// the list comes from the config (and the built-in fake agents) and is
// registered at start and on every reload.
//
// TODO(pool manager issue): Kubernetes discovery, leader election, reconcile,
// sweep; this is the foundation's static registration only.
func setupPools(ctx context.Context, a *app) error {
	cfg := a.cfg()
	if cfg.Pods.Source != config.SourceStatic {
		return fmt.Errorf("pods.source %q: not available in this build yet", cfg.Pods.Source)
	}
	a.isLeader = func() bool { return true }
	table := &podTable{}
	a.pods = table
	register := func(ctx context.Context, cfg *config.Config) {
		pods := a.staticPods(cfg)
		table.set(pods)
		for _, p := range pods {
			out, err := a.alloc.RegisterPod(ctx, allocator.Pod{Name: p.Name, Tier: p.Tier, Address: p.Address})
			if err != nil {
				a.log.Error("register static pod", "pod", p.Name, "tier", p.Tier, "err", err)
				continue
			}
			a.log.Debug("static pod registered", "pod", p.Name, "tier", p.Tier, "outcome", out)
		}
	}
	register(ctx, cfg)
	a.reloaded(func(_, cur *config.Config) { register(context.Background(), cur) })
	return nil
}

// podTable resolves pod names to addresses for the media proxy, lock-free
// for readers.
type podTable struct {
	m atomic.Pointer[map[string]string]
}

func (t *podTable) set(pods []config.StaticPod) {
	m := make(map[string]string, len(pods))
	for _, p := range pods {
		m[p.Name] = p.Address
	}
	t.m.Store(&m)
}

// Lookup returns a pod's address.
func (t *podTable) Lookup(pod string) (string, bool) {
	m := t.m.Load()
	if m == nil {
		return "", false
	}
	addr, ok := (*m)[pod]
	return addr, ok
}
