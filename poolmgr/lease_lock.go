package poolmgr

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/edge-voice/edge/allocator"
)

// LeaseLock is the leader lock on a coordination.k8s.io Lease, for the
// Kubernetes pod source: LockElector campaigns on it exactly as on the
// Redis lock, so both stop the leader's loops before they release.
//
// The Lease is written as client-go's leader election writes it (holder,
// acquire and renew times, duration, leaseTransitions raised with every
// new term), so tools that read it, kubectl included, see the usual
// record. A held Lease is taken over only once its record has stayed the
// same for its leaseDurationSeconds by this replica's clock: the
// replicas' clocks need not agree. Every write carries the
// resourceVersion it read, so of two replicas racing for a free Lease the
// API server lets one win.
//
// Each term's fencing token (the Lease object and its leaseTransitions) is
// recorded in Redis before the term starts, and the pool scripts refuse an
// older term: a leader cut off from the API server past its deadline cannot
// write beside its successor.
type LeaseLock struct {
	Leases LeaseClient // of the Lease's namespace
	Name   string      // the Lease

	// Fence records each term's fencing token (allocator.Allocator
	// implements it). nil runs unfenced: the value is "".
	Fence LeaseFence
	// RetryPeriod spaces the reopening of the watch for releases.
	RetryPeriod time.Duration
	Log         *slog.Logger

	mu     sync.Mutex
	held   *coordinationv1.Lease // as this replica last wrote it as holder; nil when not holding
	seen   string                // another holder's record (object, version, renew time) ...
	seenAt time.Time             // ... and when this replica first saw it
	leader string                // the last holder logged
}

// LeaseFence records the fencing token of a Lease term.
type LeaseFence interface {
	ClaimLeaseFence(ctx context.Context, identity string, term allocator.LeaseTerm) (fence string, ok bool, err error)
}

// AcquireLeaderLock takes the Lease if it is missing, free or expired, and
// records the term's fence. value is the fence for the pool scripts.
func (k *LeaseLock) AcquireLeaderLock(ctx context.Context, identity string, ttl time.Duration) (string, bool, error) {
	now := time.Now()
	l, err := k.Leases.Get(ctx, k.Name, metav1.GetOptions{})
	var won *coordinationv1.Lease
	switch {
	case apierrors.IsNotFound(err):
		l = &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: k.Name}}
		stamp(l, identity, ttl, now)
		zero := int32(0) // a new object's first term
		l.Spec.LeaseTransitions, l.Spec.AcquireTime = &zero, l.Spec.RenewTime
		won, err = k.Leases.Create(ctx, l, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			return "", false, nil // another replica created it first
		}
	case err != nil:
		return "", false, fmt.Errorf("read Lease %s: %w", k.Name, err)
	default:
		// A holder's record is waited out even when it names this
		// replica: it is then an earlier process's of the same name (this
		// one holds nothing while it campaigns), or another replica
		// configured with the same identity, still renewing.
		if holder := holderOf(l); holder != "" && !k.expired(l, ttl, now) {
			k.noteLeader(holder, identity)
			return "", false, nil
		}
		stamp(l, identity, ttl, now)
		newTerm(l)
		won, err = k.Leases.Update(ctx, l, metav1.UpdateOptions{})
		if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
			return "", false, nil // changed since read: another replica moved first
		}
	}
	if err != nil {
		return "", false, fmt.Errorf("take Lease %s: %w", k.Name, err)
	}
	k.mu.Lock()
	k.held, k.leader = won, identity
	k.mu.Unlock()

	fence, ok, err := k.claimFence(ctx, identity, won)
	if err != nil || !ok {
		// Not leading after all: give the Lease back at once rather than
		// let followers wait out its duration.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), k.RetryPeriod)
		defer cancel()
		if rerr := k.ReleaseLeaderLock(rctx, fence); rerr != nil {
			k.Log.Warn("leader: release the Lease", "err", rerr)
		}
		return "", false, err
	}
	return fence, true, nil
}

// claimFence records the term of the Lease as this replica wrote it on
// winning: the object (a recreated Lease is newer than the deleted one),
// then its leaseTransitions. false: a later term holds the fence.
func (k *LeaseLock) claimFence(ctx context.Context, identity string, l *coordinationv1.Lease) (string, bool, error) {
	if k.Fence == nil {
		return "", true, nil
	}
	term := termOf(l)
	fence, ok, err := k.Fence.ClaimLeaseFence(ctx, identity, term)
	if err != nil {
		return "", false, fmt.Errorf("record the fencing token: %w", err)
	}
	if !ok {
		k.Log.Error("leader: a later term holds the fence", "fence", fence, "term", term)
	}
	return fence, ok, nil
}

// RenewLeaderLock writes a new renew time on the Lease this replica holds.
// false: the Lease is no longer this replica's (taken over or deleted).
func (k *LeaseLock) RenewLeaderLock(ctx context.Context, _ string, ttl time.Duration) (bool, error) {
	k.mu.Lock()
	held := k.held
	k.mu.Unlock()
	if held == nil {
		return false, nil
	}
	for attempt := 0; ; attempt++ {
		l := held.DeepCopy()
		stamp(l, holderOf(held), ttl, time.Now())
		out, err := k.Leases.Update(ctx, l, metav1.UpdateOptions{})
		if err == nil {
			k.mu.Lock()
			k.held = out
			k.mu.Unlock()
			return true, nil
		}
		if apierrors.IsNotFound(err) {
			k.drop(held)
			return false, nil
		}
		if !apierrors.IsConflict(err) || attempt > 0 {
			return false, fmt.Errorf("renew Lease %s: %w", k.Name, err)
		}
		// Changed since this replica wrote it: still its own (an operator
		// labelled it) is renewed once more; another holder ends the term.
		cur, err := k.Leases.Get(ctx, k.Name, metav1.GetOptions{})
		if err != nil {
			return false, fmt.Errorf("renew Lease %s: %w", k.Name, err)
		}
		if cur.UID != held.UID || holderOf(cur) != holderOf(held) {
			k.drop(held)
			return false, nil
		}
		held = cur
	}
}

// drop forgets the Lease this replica held once another replica has it:
// nothing is left to renew or release.
func (k *LeaseLock) drop(held *coordinationv1.Lease) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.held != nil && k.held.UID == held.UID {
		k.held = nil
	}
}

// ReleaseLeaderLock clears the holder, so that a follower takes over at
// once (it watches for this) instead of after the Lease's duration. A
// Lease already taken over or deleted is left alone.
func (k *LeaseLock) ReleaseLeaderLock(ctx context.Context, _ string) error {
	k.mu.Lock()
	held := k.held
	k.held = nil
	k.mu.Unlock()
	if held == nil {
		return nil
	}
	l := held.DeepCopy()
	none, one := "", int32(1)
	now := metav1.NewMicroTime(time.Now())
	l.Spec.HolderIdentity, l.Spec.LeaseDurationSeconds, l.Spec.RenewTime = &none, &one, &now
	_, err := k.Leases.Update(ctx, l, metav1.UpdateOptions{})
	if err != nil && !apierrors.IsConflict(err) && !apierrors.IsNotFound(err) {
		return fmt.Errorf("release Lease %s: %w", k.Name, err)
	}
	return nil
}

// expired reports whether another holder's record has stayed the same for
// its duration, by this replica's clock since it first saw the record.
func (k *LeaseLock) expired(l *coordinationv1.Lease, ttl time.Duration, now time.Time) bool {
	d := ttl
	if s := l.Spec.LeaseDurationSeconds; s != nil && *s > 0 {
		d = time.Duration(*s) * time.Second
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	var renewed string
	if l.Spec.RenewTime != nil {
		renewed = l.Spec.RenewTime.UTC().Format(time.RFC3339Nano)
	}
	if record := string(l.UID) + "/" + l.ResourceVersion + "/" + holderOf(l) + "/" + renewed; record != k.seen {
		k.seen, k.seenAt = record, now
		return false
	}
	return now.Sub(k.seenAt) >= d
}

// noteLeader logs a holder seen for the first time.
func (k *LeaseLock) noteLeader(holder, identity string) {
	k.mu.Lock()
	changed := holder != k.leader
	k.leader = holder
	k.mu.Unlock()
	switch {
	case !changed:
	case holder == identity:
		k.Log.Warn(leaseNamesMe, "identity", identity)
	default:
		k.Log.Info("leader: another replica leads", "leader", holder)
	}
}

const leaseNamesMe = "leader: the Lease already names this replica's identity; waiting until it is no longer renewed " +
	"(an earlier process of this pod, or another replica given the same leader.identity)"

// LeaderReleases signals (without blocking; one pending signal is enough)
// each time the Lease is updated with no holder. A watch that fails or ends
// is opened again after RetryPeriod; without it a follower still takes over
// at its next retry. A release that came before the watch was open (the
// follower's first attempt found the leader, which stopped before the
// watch began) is read once the watch is open: a Lease found without a
// holder signals too.
func (k *LeaseLock) LeaderReleases(ctx context.Context) <-chan struct{} {
	out := make(chan struct{}, 1)
	signal := func() {
		select {
		case out <- struct{}{}:
		default:
		}
	}
	go func() {
		for ctx.Err() == nil {
			w, err := k.Leases.Watch(ctx, metav1.ListOptions{
				FieldSelector: fields.OneTermEqualSelector("metadata.name", k.Name).String(),
			})
			if err != nil {
				k.Log.Debug("leader: cannot watch the Lease; followers take over at their next retry", "err", err)
				sleep(ctx, k.RetryPeriod)
				continue
			}
			if l, err := k.Leases.Get(ctx, k.Name, metav1.GetOptions{}); err == nil && holderOf(l) == "" {
				signal()
			}
			k.forwardReleases(ctx, w, signal)
			w.Stop()
			sleep(ctx, k.RetryPeriod)
		}
	}()
	return out
}

func (k *LeaseLock) forwardReleases(ctx context.Context, w watch.Interface, signal func()) {
	for {
		select {
		case <-ctx.Done():
			return
		case ev, ok := <-w.ResultChan():
			if !ok {
				return
			}
			l, isLease := ev.Object.(*coordinationv1.Lease)
			if !isLease || l.Name != k.Name || ev.Type != watch.Modified || holderOf(l) != "" {
				continue
			}
			signal()
		}
	}
}

// stamp writes identity's record on l, renewed now.
func stamp(l *coordinationv1.Lease, identity string, ttl time.Duration, now time.Time) {
	t := metav1.NewMicroTime(now)
	secs := int32(min(math.Ceil(ttl.Seconds()), math.MaxInt32))
	l.Spec.HolderIdentity, l.Spec.LeaseDurationSeconds, l.Spec.RenewTime = &identity, &secs, &t
}

// newTerm starts a term on a Lease just stamped: a new acquire time and
// leaseTransitions raised, even when the last holder had the same name,
// so that every term's fence is newer than the one before.
func newTerm(l *coordinationv1.Lease) {
	n := int32(1)
	if l.Spec.LeaseTransitions != nil {
		n = *l.Spec.LeaseTransitions + 1
	}
	l.Spec.AcquireTime, l.Spec.LeaseTransitions = l.Spec.RenewTime, &n
}

func holderOf(l *coordinationv1.Lease) string {
	if l.Spec.HolderIdentity == nil {
		return ""
	}
	return *l.Spec.HolderIdentity
}

// termOf is the fencing term of a Lease as the API server returned it
// (only its reply carries the creationTimestamp and UID).
func termOf(l *coordinationv1.Lease) allocator.LeaseTerm {
	t := allocator.LeaseTerm{UID: string(l.UID)}
	if !l.CreationTimestamp.IsZero() {
		t.Created = l.CreationTimestamp.Unix() // Unix() of the zero time is negative
	}
	if l.Spec.LeaseTransitions != nil {
		t.Transitions = int64(*l.Spec.LeaseTransitions)
	}
	return t
}
