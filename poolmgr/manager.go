package poolmgr

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/edge-voice/edge/allocator"
)

// Pools is what the leader's loops need of the allocator (declared here, the
// consumer; *allocator.Allocator implements it).
type Pools interface {
	SyncPods(ctx context.Context, fence string, pods []allocator.PodState) ([]allocator.SyncResult, error)
	UnregisterPod(ctx context.Context, fence, pod string) (allocator.Unregistered, error)
	RegisteredPods(ctx context.Context) ([]string, error)
	SweepPods(ctx context.Context, fence string, pods []string) (allocator.SweepResult, error)
	Rebalance(ctx context.Context, fence string, maxMoves int) ([]allocator.Move, error)
	SweepDeadReplicas(ctx context.Context, fence string) (allocator.DeadReplicas, error)
}

// Manager runs leader election and, while this replica leads, the watcher,
// reconciler and sweeper. Run it on every replica.
type Manager struct {
	Pools    Pools
	Registry *Registry
	Elector  Elector
	Log      *slog.Logger
	Metrics  *Metrics
	// SweepInterval and ReconcileInterval are read before every wait, so a
	// config reload applies from the next cycle.
	SweepInterval, ReconcileInterval func() time.Duration
	// DeadReplicaInterval is how often the leader looks for dead replicas
	// (deadreplicas.go); nil: it does not.
	DeadReplicaInterval func() time.Duration
	// RetryDelay is the watcher's wait before retrying a failed sync
	// (default 1s).
	RetryDelay time.Duration
}

// Run blocks until ctx ends.
func (m *Manager) Run(ctx context.Context) error {
	return m.Elector.Run(ctx, m.Lead)
}

// IsLeader reports whether this replica runs the leader loops now.
func (m *Manager) IsLeader() bool { return m.Elector.IsLeader() }

// Lead runs the leader's loops until ctx ends or one of them reports the
// fence lost; it returns only after every loop has stopped.
func (m *Manager) Lead(ctx context.Context, fence string) {
	g, gctx := errgroup.WithContext(ctx)
	w := &watcher{m: m, fence: fence}
	r := &reconciler{m: m, fence: fence}
	s := &sweeper{m: m, fence: fence}
	g.Go(func() error { return w.Run(gctx) })
	g.Go(func() error { return r.Run(gctx) })
	g.Go(func() error { return s.Run(gctx) })
	if m.DeadReplicaInterval != nil {
		d := &deadReplicas{m: m, fence: fence}
		g.Go(func() error { return d.Run(gctx) })
	}
	if err := g.Wait(); err != nil {
		m.Log.Warn("leader: loops stopped", "err", err)
	}
}

// fenced reports an error that ends the term: another replica leads.
func fenced(err error) bool { return errors.Is(err, allocator.ErrFenced) }

// every runs fn at once and then after each interval() until ctx ends or fn
// returns an error that ends the term.
func every(ctx context.Context, interval func() time.Duration, fn func(context.Context) error) error {
	for {
		if err := fn(ctx); fenced(err) {
			return err
		}
		if !sleep(ctx, interval()) {
			return nil
		}
	}
}
