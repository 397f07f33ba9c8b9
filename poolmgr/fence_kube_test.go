package poolmgr

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/edge-voice/edge/allocator"
)

// A leader elected through the Kubernetes Lease is fenced like the Redis
// lock's: A is cut off from the API server in the middle of a sweep, B wins
// the Lease and records a later fencing token, and A's in-flight sweep is
// refused (ErrFenced) when it reaches Redis; B recovers the zombie.
func TestKubeLeaderChangeMidSweepIsFenced(t *testing.T) {
	_, rdb := startRedis(t)
	ctx := context.Background()
	a := newAlloc(t, rdb)
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

	client := fake.NewClientset()
	var partitioned atomic.Bool // A's Lease updates fail, as across a partition
	client.PrependReactor("update", "leases", func(action k8stesting.Action) (bool, runtime.Object, error) {
		l := action.(k8stesting.UpdateAction).GetObject().(*coordinationv1.Lease)
		if partitioned.Load() && l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity == "edge-a" {
			return true, nil, errors.New("partitioned from the API server")
		}
		return false, nil, nil
	})
	elector := func(id string, m *Metrics) *KubeElector {
		return &KubeElector{Client: client, Namespace: ns, Name: "edge-leader", Identity: id,
			LeaseDuration: time.Second, RenewDeadline: 500 * time.Millisecond, RetryPeriod: 100 * time.Millisecond,
			Fence: a, Log: quietLog(), Metrics: m}
	}
	blk := &blockingSweep{Pools: a, entered: make(chan struct{}), release: make(chan struct{}), err: make(chan error, 1)}
	ma := newManager(t, a, reg, nil)
	ma.Pools = blk
	ma.Elector = elector("edge-a", ma.Metrics)
	run(t, ma)
	<-blk.entered
	fenceA := rdb.Get(ctx, k.LeaseFence()).Val()
	if !strings.HasPrefix(fenceA, "lease/edge-a/") {
		t.Fatalf("A leads with fence %q, want lease/edge-a/<term>", fenceA)
	}

	partitioned.Store(true)
	mb := newManager(t, a, reg, nil)
	mb.Elector = elector("edge-b", mb.Metrics)
	var bSweep atomic.Int64 // B's own sweep comes later
	bSweep.Store(int64(time.Hour))
	mb.SweepInterval = func() time.Duration { return time.Duration(bSweep.Load()) }
	run(t, mb)
	eventually(t, "B leads", mb.IsLeader)
	eventually(t, "B records its fence", func() bool {
		return strings.HasPrefix(rdb.Get(ctx, k.LeaseFence()).Val(), "lease/edge-b/")
	})
	t.Logf("fence %s -> %s", fenceA, rdb.Get(ctx, k.LeaseFence()).Val())

	close(blk.release)
	if err := <-blk.err; !errors.Is(err, allocator.ErrFenced) {
		t.Fatalf("deposed leader A's sweep: err = %v, want ErrFenced", err)
	}
	if value(ma.Metrics.Zombies) != 0 {
		t.Fatal("the deposed leader recovered the zombie")
	}
	// A's other scripts are refused too.
	if _, err := a.SyncPods(ctx, fenceA, reg.Snapshot()); !errors.Is(err, allocator.ErrFenced) {
		t.Errorf("A's sync after B took over: %v, want ErrFenced", err)
	}
	if _, err := a.Rebalance(ctx, fenceA, 10); !errors.Is(err, allocator.ErrFenced) {
		t.Errorf("A's rebalance after B took over: %v, want ErrFenced", err)
	}
	bSweep.Store(int64(20 * time.Millisecond))
	eventually(t, "B recovers the zombie", func() bool { return rdb.SIsMember(ctx, k.PoolAvailable("gold"), "g0").Val() })
}

// The fence only grows: a leader whose start runs late cannot take it back
// from a later term, and a repeat of the same term is idempotent.
func TestLeaseFenceOnlyGrows(t *testing.T) {
	_, rdb := startRedis(t)
	ctx := context.Background()
	a := newAlloc(t, rdb)
	for _, step := range []struct {
		id   string
		term int64
		ok   bool
	}{{"a", 3, true}, {"a", 3, true}, {"b", 4, true}, {"a", 3, false}, {"c", 4, false}, {"c", 10, true}} {
		fence, ok, err := a.ClaimLeaseFence(ctx, step.id, step.term)
		if err != nil || ok != step.ok {
			t.Fatalf("claim %s term %d = %q, %v, %v; want ok=%v", step.id, step.term, fence, ok, err, step.ok)
		}
	}
}
