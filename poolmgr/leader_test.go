package poolmgr

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/edge-voice/edge/allocator"
	"github.com/edge-voice/edge/allocator/allocatortest"
	"github.com/edge-voice/edge/internal/testwait"
)

// The leader's loops have stopped before the Lease is released (client-go's
// leader election, which edge used before, released as soon as its renew
// loop ended).
func TestKubeElectorStopsLoopsBeforeRelease(t *testing.T) {
	client := fake.NewClientset()
	e := leaseElector(client, "edge-0", nil, quietLog(), 4*time.Second, 2*time.Second, 500*time.Millisecond)
	ctx, cancel := context.WithCancel(context.Background())
	leading := make(chan struct{})
	var holderAtStop string
	var mu sync.Mutex
	done := make(chan error, 1)
	go func() {
		done <- e.Run(ctx, func(lctx context.Context, fence string) {
			close(leading)
			<-lctx.Done()
			// Still stopping: the Lease must still name this replica.
			time.Sleep(50 * time.Millisecond)
			l, err := client.CoordinationV1().Leases(ns).Get(context.Background(), "edge-leader", metav1.GetOptions{})
			mu.Lock()
			defer mu.Unlock()
			if err == nil && l.Spec.HolderIdentity != nil {
				holderAtStop = *l.Spec.HolderIdentity
			}
		})
	}()
	<-leading
	if !e.IsLeader() || value(e.Metrics.Leader) != 1 {
		t.Fatal("not reported as leader")
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if holderAtStop != "edge-0" {
		t.Fatalf("Lease holder while the loops were stopping = %q, want edge-0 (released too early)", holderAtStop)
	}
	l, err := client.CoordinationV1().Leases(ns).Get(context.Background(), "edge-leader", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity != "" {
		t.Fatalf("Lease not released on cancel: holder %q", *l.Spec.HolderIdentity)
	}
	if e.IsLeader() || value(e.Metrics.Leader) != 0 {
		t.Fatal("still reported as leader")
	}
}

// blockingSweep holds a sweep in flight until released, as if the leader
// paused (GC, partition) mid-sweep while another replica took over.
type blockingSweep struct {
	Pools
	entered chan struct{}
	release chan struct{}
	once    sync.Once
	err     chan error
}

func (b *blockingSweep) SweepPods(ctx context.Context, fence string, pods []string) (allocator.SweepResult, error) {
	first := false
	b.once.Do(func() { first = true })
	if !first {
		return b.Pools.SweepPods(ctx, fence, pods)
	}
	close(b.entered)
	<-b.release
	// The script was already on its way: it runs whatever ctx says.
	res, err := b.Pools.SweepPods(context.WithoutCancel(ctx), fence, pods)
	b.err <- err
	return res, err
}

// Leader change in the middle of a sweep: the old leader's in-flight sweep is
// fenced and writes nothing; it steps down and campaigns again; the new
// leader recovers the zombie.
func TestRedisLeaderChangeMidSweep(t *testing.T) {
	_, rdb := startRedis(t)
	ctx := context.Background()
	a := allocatortest.New(t, rdb)
	k := a.Keys()
	reg := NewRegistry()
	(&StaticSource{Registry: reg}).Set([]allocator.PodState{{Name: "g0", Address: "127.0.0.1:9", Tier: "gold"}})
	if _, err := a.SyncPods(ctx, "", reg.Snapshot()); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Allocate(ctx, allocator.Request{CallID: "CA1"}); err != nil {
		t.Fatal(err)
	}
	rdb.Del(ctx, k.Lease("g0")) // the call died: g0 is a zombie

	elector := func(id string, m *Metrics) *LockElector {
		return &LockElector{Lock: a, Identity: id, LeaseDuration: 2 * time.Second, RenewDeadline: time.Second,
			RetryPeriod: 100 * time.Millisecond, Log: quietLog(), Metrics: m}
	}
	blk := &blockingSweep{Pools: a, entered: make(chan struct{}), release: make(chan struct{}), err: make(chan error, 1)}
	ma := newManager(t, a, reg, nil)
	ma.Pools = blk
	ma.Elector = elector("edge-a", ma.Metrics)
	run(t, ma)
	<-blk.entered
	if !ma.IsLeader() {
		t.Fatal("A sweeps without leading")
	}

	// A's lock expires during the pause; B takes over.
	rdb.Del(ctx, k.LeaderLock())
	mb := newManager(t, a, reg, nil)
	mb.Elector = elector("edge-b", mb.Metrics)
	var bSweep atomic.Int64 // B's own sweep comes later
	bSweep.Store(int64(time.Hour))
	mb.SweepInterval = func() time.Duration { return time.Duration(bSweep.Load()) }
	run(t, mb)
	testwait.Until(t, 10*time.Second, "B leads", mb.IsLeader)
	close(blk.release)
	if err := <-blk.err; !errors.Is(err, allocator.ErrFenced) {
		t.Fatalf("A's in-flight sweep after losing the lock: err = %v, want ErrFenced", err)
	}
	if value(ma.Metrics.Zombies) != 0 {
		t.Fatal("the fenced leader recovered the zombie")
	}
	testwait.Until(t, 10*time.Second, "A steps down", func() bool { return !ma.IsLeader() && value(ma.Metrics.Leader) == 0 })
	if !mb.IsLeader() {
		t.Fatal("B lost leadership to A")
	}

	// B makes it available again (its reconcile or its sweep).
	bSweep.Store(int64(20 * time.Millisecond))
	testwait.Until(t, 10*time.Second, "B recovers the zombie", func() bool { return rdb.SIsMember(ctx, k.PoolAvailable("gold"), "g0").Val() })
}

// hangingLock's acquisitions hang until their context ends, as on a
// black-holed connection to the API server or Redis.
type hangingLock struct {
	LeaderLock
	calls chan struct{}
}

func (h *hangingLock) AcquireLeaderLock(ctx context.Context, _ string, _ time.Duration) (string, bool, error) {
	h.calls <- struct{}{}
	<-ctx.Done()
	return "", false, ctx.Err()
}

// An acquisition that hangs is given up after renew_deadline and the
// campaign goes on: the elector tries again instead of waiting forever.
func TestElectorGivesUpAHangingAcquisition(t *testing.T) {
	lock := &hangingLock{calls: make(chan struct{}, 8)}
	e := &LockElector{Lock: lock, Identity: "edge-0", LeaseDuration: 3 * time.Second,
		RenewDeadline: 200 * time.Millisecond, RetryPeriod: 50 * time.Millisecond, Log: quietLog(), Metrics: NewMetrics(nil)}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.Run(ctx, func(context.Context, string) { t.Error("led on a lock never taken") }) }()
	for range 2 {
		select {
		case <-lock.calls:
		case <-time.After(10 * time.Second):
			t.Fatal("the elector stopped campaigning behind a hanging acquisition")
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
