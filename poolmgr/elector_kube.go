package poolmgr

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"

	"github.com/edge-voice/edge/allocator"
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

	// Fence records this leader's fencing token in Redis when leadership
	// starts (allocator.Allocator implements it); the pool scripts then
	// refuse a deposed leader. nil runs unfenced (single-replica tests).
	Fence LeaseFence

	Log     *slog.Logger
	Metrics *Metrics

	leader atomic.Bool
}

// LeaseFence records the fencing token of a Lease term.
type LeaseFence interface {
	ClaimLeaseFence(ctx context.Context, identity string, term allocator.LeaseTerm) (fence string, ok bool, err error)
}

// IsLeader reports whether this replica holds the Lease now.
func (e *KubeElector) IsLeader() bool { return e.leader.Load() }

// Run campaigns until ctx ends. A follower watches the Lease and, when its
// holder gives it up (client-go's ReleaseOnCancel on a graceful shutdown),
// campaigns at once rather than at its next retry, which client-go spaces
// RetryPeriod to 2.2 x RetryPeriod apart: the takeover after a SIGTERM is
// one watch event and one update instead of up to 4.4 s with the default
// 2 s retry period.
func (e *KubeElector) Run(ctx context.Context, lead LeadFunc) error {
	released := e.watchReleases(ctx)
	for ctx.Err() == nil {
		cctx, hurry := context.WithCancel(ctx)
		go func() {
			for {
				select {
				case <-cctx.Done():
					return
				case <-released:
					// Only a follower restarts its campaign: a leader's
					// cancel would release its own Lease.
					if !e.leader.Load() {
						hurry()
						return
					}
				}
			}
		}()
		err := e.campaign(cctx, lead)
		hurried := cctx.Err() != nil && ctx.Err() == nil
		hurry()
		if err != nil {
			return err
		}
		if !hurried {
			// Lost (or never won before ctx ended): campaign again, after
			// a pause so a flapping API server is not hammered.
			sleep(ctx, e.RetryPeriod)
		}
	}
	return nil
}

// watchReleases signals (without blocking; one pending signal is enough)
// each time the Lease is updated with no holder. A watch that fails or ends
// is opened again after RetryPeriod; without it a follower still takes over
// at its next retry.
func (e *KubeElector) watchReleases(ctx context.Context) <-chan struct{} {
	out := make(chan struct{}, 1)
	go func() {
		for ctx.Err() == nil {
			w, err := e.Client.CoordinationV1().Leases(e.Namespace).Watch(ctx, metav1.ListOptions{
				FieldSelector: fields.OneTermEqualSelector("metadata.name", e.Name).String(),
			})
			if err != nil {
				e.Log.Debug("leader: cannot watch the Lease; followers take over at their next retry", "err", err)
				sleep(ctx, e.RetryPeriod)
				continue
			}
			e.forwardReleases(ctx, w, out)
			w.Stop()
			sleep(ctx, e.RetryPeriod)
		}
	}()
	return out
}

func (e *KubeElector) forwardReleases(ctx context.Context, w watch.Interface, out chan<- struct{}) {
	for {
		select {
		case <-ctx.Done():
			return
		case ev, ok := <-w.ResultChan():
			if !ok {
				return
			}
			l, isLease := ev.Object.(*coordinationv1.Lease)
			if !isLease || l.Name != e.Name || ev.Type != watch.Modified {
				continue
			}
			if l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity == "" {
				select {
				case out <- struct{}{}:
				default:
				}
			}
		}
	}
}

func (e *KubeElector) campaign(ctx context.Context, lead LeadFunc) error {
	// Ended early when this term's loops were fenced: the Lease is then
	// released (ReleaseOnCancel) and Run campaigns again.
	ctx, giveUp := context.WithCancel(ctx)
	defer giveUp()
	t := &term{}
	terms := &termRecorder{LeasesGetter: e.Client.CoordinationV1(), identity: e.Identity}
	lock := &releaseAfterStop{
		Interface: &resourcelock.LeaseLock{
			LeaseMeta:  metav1.ObjectMeta{Namespace: e.Namespace, Name: e.Name},
			Client:     terms,
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
				fence, ok := e.claimFence(lctx, terms.term())
				e.Log.Info("leader: started leading", "lease", e.Namespace+"/"+e.Name, "identity", e.Identity, "fence", fence)
				if !ok {
					giveUp()
					return
				}
				t.start(lctx, fence, lead)
				if lctx.Err() == nil {
					e.Log.Warn("leader: fenced by a later leader; giving the Lease up")
					giveUp()
				}
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

// claimFence records this term's fencing token: the Lease object as this
// replica wrote it on winning (a recreated Lease is newer than the deleted
// one), then its leaseTransitions, which client-go raises on every change
// of holder, so a later leader always has a later term. false: not leading
// after all (a later term holds the fence, or ctx ended).
func (e *KubeElector) claimFence(ctx context.Context, term allocator.LeaseTerm) (string, bool) {
	if e.Fence == nil {
		return "", true
	}
	for {
		fence, ok, err := e.Fence.ClaimLeaseFence(ctx, e.Identity, term)
		if err == nil {
			if !ok {
				e.Log.Error("leader: a later term holds the fence", "fence", fence, "term", term)
			}
			return fence, ok
		}
		e.Log.Warn("leader: cannot record the fencing token; retrying", "err", err)
		if !sleep(ctx, e.RetryPeriod) {
			return "", false
		}
	}
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
