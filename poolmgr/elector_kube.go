package poolmgr

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// KubeElector elects a leader on a coordination.k8s.io Lease with
// client-go's leader election, releasing the Lease on cancel for a fast
// hand-over.
type KubeElector struct {
	Client    kubernetes.Interface
	Namespace string
	Name      string // the Lease
	Identity  string // this replica (the pod name)

	LeaseDuration, RenewDeadline, RetryPeriod time.Duration

	Log     *slog.Logger
	Metrics *Metrics

	leader atomic.Bool
}

// IsLeader reports whether this replica holds the Lease now.
func (e *KubeElector) IsLeader() bool { return e.leader.Load() }

// Run campaigns until ctx ends.
func (e *KubeElector) Run(ctx context.Context, lead LeadFunc) error {
	for ctx.Err() == nil {
		if err := e.campaign(ctx, lead); err != nil {
			return err
		}
		// Lost (or never won before ctx ended): campaign again, after a
		// pause so a flapping API server is not hammered.
		sleep(ctx, e.RetryPeriod)
	}
	return nil
}

func (e *KubeElector) campaign(ctx context.Context, lead LeadFunc) error {
	t := &term{}
	lock := &releaseAfterStop{
		Interface: &resourcelock.LeaseLock{
			LeaseMeta:  metav1.ObjectMeta{Namespace: e.Namespace, Name: e.Name},
			Client:     e.Client.CoordinationV1(),
			LockConfig: resourcelock.ResourceLockConfig{Identity: e.Identity},
		},
		stop: t.stop,
	}
	le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:            lock,
		Name:            e.Name,
		LeaseDuration:   e.LeaseDuration,
		RenewDeadline:   e.RenewDeadline,
		RetryPeriod:     e.RetryPeriod,
		ReleaseOnCancel: true,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(lctx context.Context) {
				e.leader.Store(true)
				e.Metrics.Leader.Set(1)
				e.Metrics.LeaderTerms.Inc()
				e.Log.Info("leader: started leading", "lease", e.Namespace+"/"+e.Name, "identity", e.Identity)
				t.start(lctx, "", lead)
			},
			OnStoppedLeading: func() {
				t.stop()
				if e.leader.Swap(false) {
					e.Metrics.Leader.Set(0)
					e.Log.Info("leader: stopped leading", "identity", e.Identity)
				}
			},
			OnNewLeader: func(id string) {
				if id != e.Identity {
					e.Log.Info("leader: another replica leads", "leader", id)
				}
			},
		},
	})
	if err != nil {
		return fmt.Errorf("leader election: %w", err)
	}
	le.Run(ctx)
	t.stop()
	return nil
}

// releaseAfterStop wraps the Lease lock so that the leader's loops have
// stopped before the Lease is released: client-go releases (an Update with
// no holder) as soon as its renew loop ends, without waiting for the
// OnStartedLeading goroutine, and a successor must never run beside a
// predecessor still writing.
type releaseAfterStop struct {
	resourcelock.Interface
	stop func()
}

func (l *releaseAfterStop) Update(ctx context.Context, ler resourcelock.LeaderElectionRecord) error {
	if ler.HolderIdentity == "" {
		l.stop()
	}
	return l.Interface.Update(ctx, ler)
}
