package poolmgr

import (
	"context"
	"log/slog"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

// heldLease makes the Lease ns/edge-leader, held by holder since renewed
// with a duration of secs seconds and leaseTransitions 3.
func heldLease(t *testing.T, client *fake.Clientset, holder string, renewed time.Time, secs int32) {
	t.Helper()
	n := int32(3)
	at := metav1.NewMicroTime(renewed)
	if _, err := client.CoordinationV1().Leases(ns).Create(context.Background(), &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "edge-leader"},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: &holder, LeaseDurationSeconds: &secs,
			RenewTime: &at, AcquireTime: &at, LeaseTransitions: &n},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// acquireWithin tries to take the Lease every 50 ms for up to d; it
// reports when it did (0: not within d).
func acquireWithin(t *testing.T, k *LeaseLock, identity string, d time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	for time.Since(start) < d {
		_, ok, err := k.AcquireLeaderLock(context.Background(), identity, time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if ok {
			return time.Since(start)
		}
		time.Sleep(50 * time.Millisecond) // the Lease's duration passing: nothing to await
	}
	return 0
}

// A Lease whose renew time looks an hour old is still not taken on first
// sight: the holder's clock may be off. It is taken once its record has
// stood still for its duration by this replica's clock, and the term is
// new.
func TestLeaseLockWaitsOutAHolderByItsOwnClock(t *testing.T) {
	client := fake.NewClientset()
	heldLease(t, client, "edge-old", time.Now().Add(-time.Hour), 1)
	k := &LeaseLock{Leases: client.CoordinationV1().Leases(ns), Name: "edge-leader", RetryPeriod: 50 * time.Millisecond, Log: quietLog()}
	if _, ok, err := k.AcquireLeaderLock(context.Background(), "edge-new", time.Second); ok || err != nil {
		t.Fatalf("first sight of a holder's Lease: ok=%v err=%v, want not taken", ok, err)
	}
	took := acquireWithin(t, k, "edge-new", 5*time.Second)
	if took == 0 || took < 900*time.Millisecond {
		t.Fatalf("taken after %v, want after the Lease's 1 s duration", took)
	}
	l, _ := client.CoordinationV1().Leases(ns).Get(context.Background(), "edge-leader", metav1.GetOptions{})
	if holderOf(l) != "edge-new" || *l.Spec.LeaseTransitions != 4 {
		t.Fatalf("Lease after the takeover: holder %q, leaseTransitions %d; want edge-new, 4", holderOf(l), *l.Spec.LeaseTransitions)
	}
}

// A Lease that names this replica's own identity when it starts to
// campaign belongs to an earlier process of the same name, or to another
// replica wrongly given the same identity: it is waited out like any
// holder's, and the term taken is a new one (a fence newer than the
// earlier holder's). A holder that keeps renewing keeps it.
func TestLeaseLockWaitsOutItsOwnNameToo(t *testing.T) {
	client := fake.NewClientset()
	// A 2 s duration renewed every 100 ms: only a stall of the renewing
	// goroutine of most of 2 s would let the record stand still.
	heldLease(t, client, "edge-0", time.Now(), 2)
	leases := client.CoordinationV1().Leases(ns)
	warned := make(chan struct{}, 1)
	k := &LeaseLock{Leases: leases, Name: "edge-leader", RetryPeriod: 50 * time.Millisecond,
		Log: slog.New(&onMessage{msg: leaseNamesMe, ch: warned})}

	// The other "edge-0" renews every 100 ms for 3 s: never taken.
	renewing, stop := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(renewing)
		for {
			select {
			case <-stop:
				return
			case <-time.After(100 * time.Millisecond):
			}
			l, err := leases.Get(context.Background(), "edge-leader", metav1.GetOptions{})
			if err != nil {
				return
			}
			now := metav1.NewMicroTime(time.Now())
			l.Spec.RenewTime = &now
			leases.Update(context.Background(), l, metav1.UpdateOptions{})
		}
	}()
	if took := acquireWithin(t, k, "edge-0", 3*time.Second); took != 0 {
		t.Fatalf("took a Lease still renewed under its own name after %v", took)
	}
	close(stop)
	<-renewing
	select {
	case <-warned:
	default:
		t.Error("no warning that the Lease names this replica's own identity")
	}
	if took := acquireWithin(t, k, "edge-0", 10*time.Second); took == 0 {
		t.Fatal("never took its own name's Lease once it stood still")
	}
	l, _ := leases.Get(context.Background(), "edge-leader", metav1.GetOptions{})
	if got := *l.Spec.LeaseTransitions; got != 4 {
		t.Fatalf("leaseTransitions %d after a new term under the same name, want 4", got)
	}
}
