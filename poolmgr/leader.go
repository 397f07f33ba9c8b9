package poolmgr

import (
	"context"
	"time"
)

// Elector runs leader election until ctx ends. While this replica leads it
// runs lead under a context that ends when leadership does; lead has
// returned before the lease or lock is released. Losing leadership does not
// end Run: it campaigns again.
type Elector interface {
	Run(ctx context.Context, lead LeadFunc) error
	IsLeader() bool
}

// LeadFunc runs the leader's loops until ctx ends. fence is the lock's
// value to pass to the pool scripts (the Redis lock's, or the Lease term's
// recorded fence; "" when unfenced). It returns early when the scripts
// report the fence lost.
type LeadFunc func(ctx context.Context, fence string)

// sleep waits d or until ctx ends; false when ctx ended.
func sleep(ctx context.Context, d time.Duration) bool {
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-tm.C:
		return true
	}
}
