package poolmgr

import (
	"context"
	"sync"
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

// LeadFunc runs the leader's loops until ctx ends. fence is the Redis leader
// lock value to pass to the pool scripts ("" with a Kubernetes Lease). It
// returns early when the scripts report the fence lost.
type LeadFunc func(ctx context.Context, fence string)

// term is one leadership term: it starts lead at most once and stop cancels
// it and waits for it. Both are safe to call in any order from any goroutine
// (client-go starts OnStartedLeading in its own goroutine, which may run
// after the term already ended).
type term struct {
	mu      sync.Mutex
	stopped bool
	cancel  context.CancelFunc
	done    chan struct{}
}

// start runs lead(ctx) unless the term was stopped; it blocks until lead
// returns.
func (t *term) start(parent context.Context, fence string, lead LeadFunc) {
	t.mu.Lock()
	if t.stopped || t.done != nil {
		t.mu.Unlock()
		return
	}
	ctx, cancel := context.WithCancel(parent)
	t.cancel, t.done = cancel, make(chan struct{})
	t.mu.Unlock()
	defer close(t.done)
	defer cancel()
	lead(ctx, fence)
}

// stop ends the term and waits until lead has returned.
func (t *term) stop() {
	t.mu.Lock()
	t.stopped = true
	cancel, done := t.cancel, t.done
	t.mu.Unlock()
	if cancel != nil {
		cancel()
		<-done
	}
}

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
