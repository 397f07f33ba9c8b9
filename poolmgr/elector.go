package poolmgr

import (
	"context"
	"log/slog"
	"sync/atomic"
	"time"
)

// LeaderLock is a leader lock: the Redis lock (allocator.Allocator
// implements it) or a Kubernetes Lease (LeaseLock). value is the term's
// fencing token, which the pool scripts check.
type LeaderLock interface {
	AcquireLeaderLock(ctx context.Context, identity string, ttl time.Duration) (value string, ok bool, err error)
	RenewLeaderLock(ctx context.Context, value string, ttl time.Duration) (bool, error)
	ReleaseLeaderLock(ctx context.Context, value string) error
}

// LockElector elects a leader through a LeaderLock: the Redis lock for the
// static pod source, a Kubernetes Lease (LeaseLock) for the Kubernetes one.
// The lock's value carries a fencing token that the pool scripts check, so
// a leader that lost the lock (a long GC pause, a partition) cannot write
// after its successor started: its scripts answer ErrFenced. The lock lives
// LeaseDuration, is renewed every RetryPeriod, and a leader that could not
// renew for RenewDeadline steps down. The leader's loops have stopped
// before the lock is released.
type LockElector struct {
	Lock     LeaderLock
	Identity string

	LeaseDuration, RenewDeadline, RetryPeriod time.Duration

	Log     *slog.Logger
	Metrics *Metrics

	leader atomic.Bool
}

// IsLeader reports whether this replica holds the lock now.
func (e *LockElector) IsLeader() bool { return e.leader.Load() }

// releaseNotifier tells followers when the lock is given up
// (allocator.Allocator and LeaseLock implement it); optional.
type releaseNotifier interface {
	LeaderReleases(ctx context.Context) <-chan struct{}
}

// Run campaigns until ctx ends. A follower retries every RetryPeriod, and
// at once when the leader announces it gave the lock up (a graceful
// shutdown), so a hand-over does not wait for the retry.
func (e *LockElector) Run(ctx context.Context, lead LeadFunc) error {
	var released <-chan struct{}
	if n, ok := e.Lock.(releaseNotifier); ok {
		released = n.LeaderReleases(ctx)
	}
	for ctx.Err() == nil {
		// Bounded like a renewal's retries: an API server or Redis that
		// hangs (a black-holed connection) must not stall the campaign.
		actx, cancel := context.WithTimeout(ctx, e.RenewDeadline)
		value, ok, err := e.Lock.AcquireLeaderLock(actx, e.Identity, e.LeaseDuration)
		cancel()
		if err != nil && ctx.Err() == nil {
			e.Log.Warn("leader: cannot take the lock", "err", err)
		}
		if !ok {
			e.waitRetry(ctx, released)
			continue
		}
		e.hold(ctx, value, lead)
	}
	return nil
}

// waitRetry waits RetryPeriod, or less when the lock is released.
func (e *LockElector) waitRetry(ctx context.Context, released <-chan struct{}) {
	tm := time.NewTimer(e.RetryPeriod)
	defer tm.Stop()
	select {
	case <-ctx.Done():
	case <-tm.C:
	case <-released:
	}
}

// hold runs one term: lead runs while renewals succeed; then the loops stop
// and only then is the lock released.
func (e *LockElector) hold(ctx context.Context, value string, lead LeadFunc) {
	// Reported as leader before the loops start, so that they never run
	// unreported.
	e.leader.Store(true)
	e.Metrics.Leader.Set(1)
	e.Metrics.LeaderTerms.Inc()
	e.Log.Info("leader: started leading", "identity", e.Identity, "lock", value)
	lctx, stopLead := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		lead(lctx, value)
	}()

	lastRenew := time.Now()
	tick := time.NewTicker(e.RetryPeriod)
	reason := "shutdown"
loop:
	for {
		select {
		case <-ctx.Done():
			break loop
		case <-done:
			reason = "fenced"
			break loop
		case <-tick.C:
			rctx, cancel := context.WithTimeout(ctx, e.RetryPeriod)
			ok, err := e.Lock.RenewLeaderLock(rctx, value, e.LeaseDuration)
			cancel()
			switch {
			case err == nil && !ok:
				reason = "lost"
				break loop
			case err == nil:
				lastRenew = time.Now()
			case time.Since(lastRenew) >= e.RenewDeadline:
				reason = "renew deadline"
				break loop
			}
		}
	}
	tick.Stop()
	stopLead()
	<-done
	e.leader.Store(false)
	e.Metrics.Leader.Set(0)
	// Released only after the loops stopped; a background context because
	// ctx may be the one that ended.
	rctx, cancel := context.WithTimeout(context.Background(), e.RetryPeriod)
	defer cancel()
	if err := e.Lock.ReleaseLeaderLock(rctx, value); err != nil {
		e.Log.Warn("leader: release lock", "err", err)
	}
	e.Log.Info("leader: stopped leading", "reason", reason)
}
