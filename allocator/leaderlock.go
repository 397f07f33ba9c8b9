package allocator

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// AcquireLeaderLock takes the Redis leader lock for identity if it is free,
// with a new fencing token. It returns the lock value ("<identity>/<token>")
// to renew and release with, and to pass as the fence of the pool manager's
// scripts; ok false (with the holder's value) when another replica holds it.
func (a *Allocator) AcquireLeaderLock(ctx context.Context, identity string, ttl time.Duration) (value string, ok bool, err error) {
	r, err := a.run(ctx, "leader_acquire", []string{a.keys.LeaderLock(), a.keys.LeaderFence()}, identity, ttl.Milliseconds())
	if err != nil {
		return "", false, fmt.Errorf("acquire leader lock: %w", err)
	}
	rep := reply(r)
	return rep.str(1), rep.int(0) == 1, nil
}

// RenewLeaderLock extends the lock while value still holds it; false means
// leadership is lost.
func (a *Allocator) RenewLeaderLock(ctx context.Context, value string, ttl time.Duration) (bool, error) {
	n, err := a.scripts["leader_renew"].Run(ctx, a.rdb, []string{a.keys.LeaderLock()}, value, ttl.Milliseconds()).Int()
	if err != nil {
		return false, fmt.Errorf("renew leader lock: %w", err)
	}
	return n == 1, nil
}

// ReleaseLeaderLock gives the lock up if value still holds it, so that
// another replica takes over without waiting for the TTL.
func (a *Allocator) ReleaseLeaderLock(ctx context.Context, value string) error {
	if err := a.scripts["leader_release"].Run(ctx, a.rdb, []string{a.keys.LeaderLock()}, value).Err(); err != nil {
		return fmt.Errorf("release leader lock: %w", err)
	}
	return nil
}

// LeaseTerm identifies one leadership term on a Kubernetes Lease: the
// Lease object (its creationTimestamp and UID, so that a Lease deleted and
// recreated, whose leaseTransitions restart at 0, still yields newer terms)
// and its leaseTransitions when the leader won it.
type LeaseTerm struct {
	Created     int64 // creationTimestamp, Unix seconds
	UID         string
	Transitions int64
}

// ClaimLeaseFence records the fencing token of a leader elected through the
// Kubernetes Lease for the term identity won. It returns the fence to pass
// to the pool manager's scripts, which refuse it (ErrFenced) once a later
// leader has claimed its own; ok false (with the current fence) when a
// later term already holds it.
func (a *Allocator) ClaimLeaseFence(ctx context.Context, identity string, term LeaseTerm) (fence string, ok bool, err error) {
	r, err := a.run(ctx, "leader_lease_fence", []string{a.keys.LeaseFence()}, identity, term.Created, term.UID, term.Transitions)
	if err != nil {
		return "", false, fmt.Errorf("claim lease fence: %w", err)
	}
	rep := reply(r)
	return rep.str(1), rep.int(0) == 1, nil
}

// LeaderReleases signals (one pending signal at most) each time a leader
// gives the Redis lock up, so that a follower campaigns at once instead of
// at its next retry. The subscription ends with ctx; a lost subscription
// only costs followers their retry period.
func (a *Allocator) LeaderReleases(ctx context.Context) <-chan struct{} {
	out := make(chan struct{}, 1)
	sub := a.rdb.Subscribe(ctx, a.keys.LeaderLock())
	go func() {
		defer sub.Close()
		msgs := sub.Channel()
		for {
			select {
			case <-ctx.Done():
				return
			case _, ok := <-msgs:
				if !ok {
					return
				}
				select {
				case out <- struct{}{}:
				default:
				}
			}
		}
	}()
	return out
}

// Leader names the replica whose leadership Redis last recorded: the Redis
// leader lock's holder, else the Kubernetes Lease leader's fence; "" when
// neither is there. For operators (the status page); the election itself
// never reads it.
func (a *Allocator) Leader(ctx context.Context) (string, error) {
	lock, err := a.rdb.Get(ctx, a.keys.LeaderLock()).Result()
	if err == nil {
		if i := strings.LastIndexByte(lock, '/'); i > 0 {
			return lock[:i], nil
		}
		return lock, nil
	}
	if !isNil(err) {
		return "", fmt.Errorf("read leader lock: %w", unavailable(err))
	}
	fence, err := a.rdb.Get(ctx, a.keys.LeaseFence()).Result()
	if isNil(err) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("read lease fence: %w", unavailable(err))
	}
	// "lease/<identity>/<created>/<uid>/<transitions>"
	parts := strings.Split(strings.TrimPrefix(fence, "lease/"), "/")
	if len(parts) < 4 {
		return "", nil
	}
	return strings.Join(parts[:len(parts)-3], "/"), nil
}
