package poolmgr

import (
	"context"
	"log/slog"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/edge-voice/edge/allocator/allocatortest"
)

// A graceful hand-over does not wait for the follower's next retry: the
// leader releases the Lease when its context ends (SIGTERM) and the follower,
// watching the Lease, campaigns at once. B's retry period is a minute, so B
// leading within the test's 10 s proves the watch did it; the takeover time
// with A on the default 15/10/2 s settings is logged.
func TestKubeTakeoverAfterGracefulStopSkipsTheRetryPeriod(t *testing.T) {
	client := fake.NewClientset()
	a := leaseElector(client, "edge-a", nil, quietLog(), 15*time.Second, 10*time.Second, 2*time.Second)
	bSawA := make(chan struct{}, 1)
	b := leaseElector(client, "edge-b", nil, slog.New(&onMessage{msg: "leader: another replica leads", ch: bSawA}),
		3*time.Minute, 2*time.Minute, time.Minute)

	actx, stopA := context.WithCancel(context.Background())
	aLeading, aStopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(aStopped)
		a.Run(actx, func(ctx context.Context, fence string) {
			close(aLeading)
			<-ctx.Done()
		})
	}()
	<-aLeading
	bctx, stopB := context.WithCancel(context.Background())
	defer stopB()
	bLeading := make(chan time.Time, 1)
	go b.Run(bctx, func(ctx context.Context, fence string) {
		bLeading <- time.Now()
		<-ctx.Done()
	})
	<-bSawA // B's first attempt found A leading: its next is a minute away

	sigterm := time.Now()
	stopA()
	select {
	case at := <-bLeading:
		t.Logf("takeover after the leader's graceful stop: %s (the follower's retry period is %s)", at.Sub(sigterm).Round(time.Millisecond), b.RetryPeriod)
	case <-time.After(10 * time.Second):
		t.Fatal("B did not take over before its next retry: the release was not noticed")
	}
	<-aStopped
	if a.IsLeader() || !b.IsLeader() {
		t.Fatalf("leaders after the hand-over: a=%v b=%v", a.IsLeader(), b.IsLeader())
	}
}

// onMessage signals ch when a record with message msg is logged.
type onMessage struct {
	msg string
	ch  chan struct{}
}

func (h *onMessage) Enabled(context.Context, slog.Level) bool { return true }
func (h *onMessage) Handle(_ context.Context, r slog.Record) error {
	if r.Message == h.msg {
		select {
		case h.ch <- struct{}{}:
		default:
		}
	}
	return nil
}
func (h *onMessage) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *onMessage) WithGroup(string) slog.Handler      { return h }

// The same for the Redis lock (static pod source): the leader publishes its
// release and the follower, whose retry period is a minute, takes over at
// once.
func TestRedisTakeoverAfterGracefulStopSkipsTheRetryPeriod(t *testing.T) {
	_, rdb := startRedis(t)
	alloc := allocatortest.New(t, rdb)
	a := &LockElector{Lock: alloc, Identity: "edge-a",
		LeaseDuration: 15 * time.Second, RenewDeadline: 10 * time.Second, RetryPeriod: 2 * time.Second,
		Log: quietLog(), Metrics: NewMetrics(nil)}
	bRefused := make(chan struct{}, 1)
	b := &LockElector{Lock: &refusals{LeaderLock: alloc, alloc: alloc, refused: bRefused}, Identity: "edge-b",
		LeaseDuration: 3 * time.Minute, RenewDeadline: 2 * time.Minute, RetryPeriod: time.Minute,
		Log: quietLog(), Metrics: NewMetrics(nil)}

	actx, stopA := context.WithCancel(context.Background())
	aLeading, aStopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(aStopped)
		a.Run(actx, func(ctx context.Context, fence string) {
			close(aLeading)
			<-ctx.Done()
		})
	}()
	<-aLeading
	bctx, stopB := context.WithCancel(context.Background())
	defer stopB()
	bLeading := make(chan time.Time, 1)
	go b.Run(bctx, func(ctx context.Context, fence string) {
		bLeading <- time.Now()
		<-ctx.Done()
	})
	<-bRefused // B's first attempt found A leading: its next is a minute away

	stop := time.Now()
	stopA()
	select {
	case at := <-bLeading:
		t.Logf("takeover after the leader's graceful stop: %s (the follower's retry period is %s)", at.Sub(stop).Round(time.Millisecond), b.RetryPeriod)
	case <-time.After(10 * time.Second):
		t.Fatal("B did not take over before its next retry: the release was not announced")
	}
	<-aStopped
}

// refusals signals each acquisition the lock refused.
type refusals struct {
	LeaderLock
	alloc interface {
		LeaderReleases(context.Context) <-chan struct{}
	}
	refused chan struct{}
}

func (r *refusals) AcquireLeaderLock(ctx context.Context, id string, ttl time.Duration) (string, bool, error) {
	v, ok, err := r.LeaderLock.AcquireLeaderLock(ctx, id, ttl)
	if err == nil && !ok {
		select {
		case r.refused <- struct{}{}:
		default:
		}
	}
	return v, ok, err
}

func (r *refusals) LeaderReleases(ctx context.Context) <-chan struct{} {
	return r.alloc.LeaderReleases(ctx)
}

// lateWatch is a Lease client whose watches open only once open is
// closed: a follower whose watch begins after the leader already let go.
type lateWatch struct {
	LeaseClient
	open chan struct{}
}

func (l lateWatch) Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	select {
	case <-l.open:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return l.LeaseClient.Watch(ctx, opts)
}

// A release that comes before the follower's watch is open is not missed:
// the follower reads the Lease once its watch is open and, finding no
// holder, campaigns at once rather than at its next retry (a minute here).
// This raced in TestKubeTakeoverAfterGracefulStopSkipsTheRetryPeriod.
func TestKubeTakeoverWhenTheReleaseCameBeforeTheWatch(t *testing.T) {
	client := fake.NewClientset()
	a := leaseElector(client, "edge-a", nil, quietLog(), 15*time.Second, 10*time.Second, 2*time.Second)
	bSawA := make(chan struct{}, 1)
	b := leaseElector(client, "edge-b", nil, slog.New(&onMessage{msg: "leader: another replica leads", ch: bSawA}),
		3*time.Minute, 2*time.Minute, time.Minute)
	open := make(chan struct{})
	b.Lock.(*LeaseLock).Leases = lateWatch{LeaseClient: client.CoordinationV1().Leases(ns), open: open}

	actx, stopA := context.WithCancel(context.Background())
	aLeading, aStopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(aStopped)
		a.Run(actx, func(ctx context.Context, fence string) {
			close(aLeading)
			<-ctx.Done()
		})
	}()
	<-aLeading
	bctx, stopB := context.WithCancel(context.Background())
	defer stopB()
	bLeading := make(chan struct{}, 1)
	go b.Run(bctx, func(ctx context.Context, fence string) {
		bLeading <- struct{}{}
		<-ctx.Done()
	})
	<-bSawA
	stopA()
	<-aStopped // the Lease is released, and B's watch is not open yet
	close(open)
	select {
	case <-bLeading:
	case <-time.After(10 * time.Second):
		t.Fatal("B did not take over before its next retry: the release before its watch was missed")
	}
}
