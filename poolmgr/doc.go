// Package poolmgr keeps edge's Redis pools true to what the pod source says.
// It owns:
//
//   - the pod sources: a Kubernetes pod informer (KubeSource) or the static
//     list of the config (StaticSource), both feeding a Registry;
//   - the Registry: pod name -> address for the media proxy on every replica,
//     and the set of pods that changed since the leader last looked;
//   - leader election: LockElector on a coordination.k8s.io Lease
//     (LeaseLock) or, for the static source, on a Redis lock, both with a
//     fencing token the pool scripts check;
//   - the Kubernetes client (KubeAPI): client-go's REST client with a
//     scheme of only the two kinds edge reads, pods and Leases;
//   - the leader's loops, each a small type with Run(ctx): watcher (events),
//     reconciler (full diff, then rebalancing), sweeper (zombie sweep);
//   - the tier-config refresh every replica runs (TierRefresher).
//
// Every state change in Redis is one allocator script: poolmgr decides what
// to ask for and when, never how the keys change. Losing leadership stops the
// loops before the lease is released and never ends a call: calls are served
// by every replica whoever leads.
package poolmgr
