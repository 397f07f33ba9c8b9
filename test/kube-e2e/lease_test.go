package kubee2e

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/edge-voice/edge/poolmgr"
)

// The Lease lock against a real API server, with edge's RBAC: of replicas
// racing for a free Lease exactly one wins (the API server's
// resourceVersion check, which client-go's fake does not make); a
// renewal survives another writer's edit of the Lease (an operator's
// label); a live holder's Lease is not taken; a released Lease is taken at
// once and its leaseTransitions raised.
func TestLeaseLockOnTheAPIServer(t *testing.T) {
	c := need(t)
	admin := c.client(t, adminToken)
	ns := namespace(t, admin)
	api, err := poolmgr.NewKubeAPI(c.config(edgeToken))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	lock := func() *poolmgr.LeaseLock {
		return &poolmgr.LeaseLock{Leases: api.Leases(ns), Name: "edge-leader", RetryPeriod: time.Second, Log: log}
	}
	const ttl = time.Minute

	// Eight replicas race for the missing Lease, then for it again after
	// each round's winner released it.
	locks := make([]*poolmgr.LeaseLock, 8)
	for i := range locks {
		locks[i] = lock()
	}
	ids := []string{"edge-0", "edge-1", "edge-2", "edge-3", "edge-4", "edge-5", "edge-6", "edge-7"}
	var winner int
	for round := range 3 {
		var mu sync.Mutex
		var won []int
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := range locks {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				_, ok, err := locks[i].AcquireLeaderLock(ctx, ids[i], ttl)
				if err != nil {
					t.Errorf("%s: %v", ids[i], err)
				}
				if ok {
					mu.Lock()
					won = append(won, i)
					mu.Unlock()
				}
			}()
		}
		close(start)
		wg.Wait()
		if len(won) != 1 {
			t.Fatalf("round %d: %d replicas won the Lease (%v), want exactly 1", round, len(won), won)
		}
		winner = won[0]
		if h := leaseHolder(admin, ns); h != ids[winner] {
			t.Fatalf("round %d: the Lease names %q, the winner is %s", round, h, ids[winner])
		}
		l, err := admin.CoordinationV1().Leases(ns).Get(ctx, "edge-leader", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if l.Spec.LeaseTransitions == nil || int(*l.Spec.LeaseTransitions) != round {
			t.Fatalf("round %d: leaseTransitions %v, want %d", round, l.Spec.LeaseTransitions, round)
		}
		if round < 2 {
			if err := locks[winner].ReleaseLeaderLock(ctx, ""); err != nil {
				t.Fatal(err)
			}
		}
	}

	// An operator labels the Lease: the holder's next renewal conflicts
	// with the edit and still renews.
	l, err := admin.CoordinationV1().Leases(ns).Get(ctx, "edge-leader", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	l.Labels = map[string]string{"team": "voice"}
	if _, err := admin.CoordinationV1().Leases(ns).Update(ctx, l, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if ok, err := locks[winner].RenewLeaderLock(ctx, "", ttl); !ok || err != nil {
		t.Fatalf("renewal after an operator's edit: ok=%v err=%v, want renewed", ok, err)
	}

	// A follower that has only just seen the holder's record does not take
	// the Lease, however old its renew time looks.
	other := (winner + 1) % len(locks)
	if _, ok, err := locks[other].AcquireLeaderLock(ctx, ids[other], ttl); ok || err != nil {
		t.Fatalf("%s took a live holder's Lease: ok=%v err=%v", ids[other], ok, err)
	}

	// Another replica takes the Lease over: the old holder's renewal says
	// it lost, and its release leaves the new holder's record alone.
	l, _ = admin.CoordinationV1().Leases(ns).Get(ctx, "edge-leader", metav1.GetOptions{})
	thief := "edge-thief"
	l.Spec.HolderIdentity = &thief
	if _, err := admin.CoordinationV1().Leases(ns).Update(ctx, l, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if ok, err := locks[winner].RenewLeaderLock(ctx, "", ttl); ok || err != nil {
		t.Fatalf("renewal of a Lease taken over: ok=%v err=%v, want lost", ok, err)
	}
	if err := locks[winner].ReleaseLeaderLock(ctx, ""); err != nil {
		t.Fatal(err)
	}
	if h := leaseHolder(admin, ns); h != thief {
		t.Fatalf("after the deposed holder's release the Lease names %q, want %s", h, thief)
	}
}
