package poolmgr

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/edge-voice/edge/allocator"
	"github.com/edge-voice/edge/allocator/allocatortest"
	"github.com/edge-voice/edge/internal/testwait"
)

// A leader elected through the Kubernetes Lease is fenced like the Redis
// lock's: A is cut off from the API server in the middle of a sweep, B wins
// the Lease and records a later fencing token, and A's in-flight sweep is
// refused (ErrFenced) when it reaches Redis; B recovers the zombie.
func TestKubeLeaderChangeMidSweepIsFenced(t *testing.T) {
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

	client := fake.NewClientset()
	var partitioned atomic.Bool // A's Lease updates fail, as across a partition
	client.PrependReactor("update", "leases", func(action k8stesting.Action) (bool, runtime.Object, error) {
		l := action.(k8stesting.UpdateAction).GetObject().(*coordinationv1.Lease)
		if partitioned.Load() && l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity == "edge-a" {
			return true, nil, errors.New("partitioned from the API server")
		}
		return false, nil, nil
	})
	elector := func(id string, m *Metrics) *LockElector {
		e := leaseElector(client, id, a, quietLog(), time.Second, 500*time.Millisecond, 100*time.Millisecond)
		e.Metrics = m
		return e
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
	testwait.Until(t, 10*time.Second, "B leads", mb.IsLeader)
	testwait.Until(t, 10*time.Second, "B records its fence", func() bool {
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
	testwait.Until(t, 10*time.Second, "B recovers the zombie", func() bool { return rdb.SIsMember(ctx, k.PoolAvailable("gold"), "g0").Val() })
}

// The fence only grows: a leader whose start runs late cannot take it back
// from a later term, and a repeat of the same term is idempotent. A term of
// a recreated Lease (created later, leaseTransitions back to 0) is newer than
// every term of the deleted one.
func TestLeaseFenceOnlyGrows(t *testing.T) {
	_, rdb := startRedis(t)
	ctx := context.Background()
	a := allocatortest.New(t, rdb)
	old := func(n int64) allocator.LeaseTerm { return allocator.LeaseTerm{Created: 100, UID: "u1", Transitions: n} }
	recreated := func(n int64) allocator.LeaseTerm { return allocator.LeaseTerm{Created: 200, UID: "u2", Transitions: n} }
	for _, step := range []struct {
		id   string
		term allocator.LeaseTerm
		ok   bool
	}{
		{"a", old(3), true}, {"a", old(3), true}, {"b", old(4), true}, {"a", old(3), false}, {"c", old(4), false}, {"c", old(10), true},
		{"d", recreated(0), true},                    // the Lease was deleted and recreated
		{"c", old(10), false}, {"e", old(11), false}, // the deleted object's terms stay refused
		{"e", recreated(1), true},
		{"f", allocator.LeaseTerm{Created: 200, UID: "u3", Transitions: 0}, true}, // recreated again within the second: unordered, newest claim wins
	} {
		fence, ok, err := a.ClaimLeaseFence(ctx, step.id, step.term)
		if err != nil || ok != step.ok {
			t.Fatalf("claim %s term %+v = %q, %v, %v; want ok=%v", step.id, step.term, fence, ok, err, step.ok)
		}
	}
}

// Deleting and recreating the Lease (an operator's cleanup, a namespace
// restored from a backup) restarts its leaseTransitions at 0. The new
// object's leader must still be able to lead, with no manual deletion of
// the fence key, while the deleted object's leader stays fenced.
func TestKubeRecreatedLeaseLeaderIsNotRefused(t *testing.T) {
	_, rdb := startRedis(t)
	ctx := context.Background()
	a := allocatortest.New(t, rdb)
	k := a.Keys()
	reg := NewRegistry()
	(&StaticSource{Registry: reg}).Set([]allocator.PodState{{Name: "g0", Address: "127.0.0.1:9", Tier: "gold"}})

	client := fake.NewClientset()
	// The API server stamps every new object; the fake does not.
	var created atomic.Int64
	created.Store(time.Now().Unix())
	client.PrependReactor("create", "leases", func(action k8stesting.Action) (bool, runtime.Object, error) {
		l := action.(k8stesting.CreateAction).GetObject().(*coordinationv1.Lease)
		l.CreationTimestamp = metav1.Unix(created.Add(1), 0)
		l.UID = types.UID(fmt.Sprintf("uid-%d", created.Load()))
		return false, nil, nil
	})
	// The old object has seen many holders.
	transitions := int32(5)
	if _, err := client.CoordinationV1().Leases(ns).Create(ctx, &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "edge-leader"},
		Spec:       coordinationv1.LeaseSpec{LeaseTransitions: &transitions},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	elector := func(id string, m *Metrics) *LockElector {
		e := leaseElector(client, id, a, quietLog(), time.Second, 500*time.Millisecond, 100*time.Millisecond)
		e.Metrics = m
		return e
	}
	ma := newManager(t, a, reg, nil)
	ma.Elector = elector("edge-a", ma.Metrics)
	stopA := run(t, ma)
	testwait.Until(t, 10*time.Second, "A leads and records its fence", func() bool {
		return strings.HasPrefix(rdb.Get(ctx, k.LeaseFence()).Val(), "lease/edge-a/")
	})
	fenceA := rdb.Get(ctx, k.LeaseFence()).Val()
	if !strings.HasSuffix(fenceA, "/6") {
		t.Fatalf("A's fence %q: want the old object's leaseTransitions 6", fenceA)
	}
	stopA()
	testwait.Until(t, 10*time.Second, "A stops leading", func() bool { return !ma.IsLeader() })
	if err := client.CoordinationV1().Leases(ns).Delete(ctx, "edge-leader", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}

	mb := newManager(t, a, reg, nil)
	mb.Elector = elector("edge-b", mb.Metrics)
	run(t, mb)
	testwait.Until(t, 10*time.Second, "B leads on the recreated Lease and records its fence", func() bool {
		return mb.IsLeader() && strings.HasPrefix(rdb.Get(ctx, k.LeaseFence()).Val(), "lease/edge-b/")
	})
	fenceB := rdb.Get(ctx, k.LeaseFence()).Val()
	t.Logf("fence %s -> %s", fenceA, fenceB)
	// Refused, B would give the Lease up and win it again until its
	// leaseTransitions passed the deleted object's: one retry period each.
	if n := value(mb.Metrics.LeaderTerms); n != 1 {
		t.Errorf("B started %v terms, want 1 (its first claim accepted)", n)
	}
	if !strings.HasSuffix(fenceB, "/0") {
		t.Fatalf("B's fence %q: want the recreated object's leaseTransitions 0", fenceB)
	}
	// B's loops write (its reconcile registers g0); A's term is refused.
	testwait.Until(t, 10*time.Second, "B registers g0", func() bool { return rdb.SIsMember(ctx, k.PoolAvailable("gold"), "g0").Val() })
	if _, err := a.SyncPods(ctx, fenceA, reg.Snapshot()); !errors.Is(err, allocator.ErrFenced) {
		t.Errorf("A's sync after the Lease was recreated: %v, want ErrFenced", err)
	}
	if _, ok, err := a.ClaimLeaseFence(ctx, "edge-a", allocator.LeaseTerm{Created: created.Load() - 1, UID: fmt.Sprintf("uid-%d", created.Load()-1), Transitions: 7}); ok || err != nil {
		t.Errorf("a late claim of the deleted Lease's term 7: ok=%v err=%v, want refused", ok, err)
	}
	if got := rdb.Get(ctx, k.LeaseFence()).Val(); got != fenceB {
		t.Errorf("fence %q after the late claim, want B's %q", got, fenceB)
	}
}
