package allocator_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/edge-voice/edge/allocator"
	"github.com/edge-voice/edge/allocator/allocatortest"
	"github.com/edge-voice/edge/internal/testredis"
)

// A pod released on one replica goes to a call waiting on another (two
// allocators with their own Wakers on one Redis), within the budget, as a
// new allocation; the wait leaves nothing behind.
func TestWaitHandOffAcrossReplicas(t *testing.T) {
	srv := testredis.Start(t)
	reg := prometheus.NewRegistry()
	a := waitingAllocator(t, srv.Client(), 5*time.Second, nil, onePodTiers)
	b := waitingAllocator(t, srv.Client(), 5*time.Second, reg, onePodTiers)
	register(t, a, "standard", "p0")
	mustAllocate(t, a, "CA-first", "acme")

	second := goAllocate(context.Background(), b, "CA-second", "acme")
	awaitWaiters(t, srv.Client(), a, 1)
	released := time.Now()
	if _, err := a.Release(context.Background(), "CA-first"); err != nil {
		t.Fatal(err)
	}
	o := <-second
	handOff := time.Since(released)
	if o.err != nil {
		t.Fatalf("waiting call: %v", o.err)
	}
	if o.al.PodName != "p0" || o.al.WasExisting {
		t.Fatalf("waiting call got %+v, want p0, new", o.al)
	}
	t.Logf("release on replica A to the waiter on replica B answered: %v", handOff)
	if handOff > time.Second {
		t.Errorf("hand-off took %v: the wake-up did not arrive (the poll would take 250ms)", handOff)
	}
	checkNoWaitKeys(t, srv.Client(), a.Keys())
	if got := histogramCount(t, reg, "edge_admission_wait_seconds", "served"); got != 1 {
		t.Errorf("edge_admission_wait_seconds{result=served} count = %d, want 1", got)
	}
	// The call is a normal live call: a repeat is existing, a release ends it.
	if al := mustAllocate(t, a, "CA-second", "acme"); !al.WasExisting || al.PodName != "p0" {
		t.Errorf("repeat of the served call: %+v", al)
	}
	if _, err := b.Release(context.Background(), "CA-second"); err != nil {
		t.Fatal(err)
	}
}

// One merchant's burst cannot starve another's single call: with 900 of
// m0's calls queued before m1's one, m1 is served by the second pod freed;
// m0's calls are served in the order they came.
func TestWaitFairAcrossMerchantsFIFOWithin(t *testing.T) {
	srv := testredis.Start(t)
	rdb := srv.Client()
	a := waitingAllocator(t, rdb, allocator.MaxWaitBudget, nil, onePodTiers)
	register(t, a, "standard", "p0")
	mustAllocate(t, a, "CA-hold", "")

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	const burst, ordered = 900, 10
	outcomes := map[string]<-chan outcome{}
	for i := range burst {
		call := fmt.Sprintf("m0-%03d", i)
		outcomes[call] = goAllocate(ctx, a, call, "m0")
		if i < ordered {
			awaitWaiters(t, rdb, a, int64(i+1)) // the first ones queued in this order
		}
	}
	awaitWaiters(t, rdb, a, burst)
	outcomes["m1-only"] = goAllocate(ctx, a, "m1-only", "m1")
	awaitWaiters(t, rdb, a, burst+1)
	// The waiters gauge is read from Redis: any replica's scrape shows them.
	gauges := prometheus.NewRegistry()
	gauges.MustRegister(allocator.NewPoolCollector(allocatortest.New(t, rdb, onePodTiers)))
	if ms := family(t, gauges, "edge_admission_waiters"); len(ms) != 1 || ms[0].GetGauge().GetValue() != burst+1 {
		t.Errorf("edge_admission_waiters = %v, want %d", ms, burst+1)
	}

	// Free the pod five times; each time exactly one waiter gets it.
	holder := "CA-hold"
	var served []string
	for range 5 {
		if _, err := a.Release(context.Background(), holder); err != nil {
			t.Fatal(err)
		}
		got := awaitServed(t, outcomes)
		served = append(served, got)
		holder = got
	}
	t.Logf("served in order: %v", served)
	want := []string{"m0-000", "m1-only", "m0-001", "m0-002", "m0-003"}
	for i := range want {
		if served[i] != want[i] {
			t.Fatalf("served %v, want %v (round robin across merchants, FIFO within)", served, want)
		}
	}

	// The rest give up: they take no pod and leave no ticket.
	cancel()
	for call, ch := range outcomes {
		o := <-ch
		if !errors.Is(o.err, context.Canceled) {
			t.Errorf("%s: err %v, want context.Canceled", call, o.err)
		}
	}
	checkNoWaitKeys(t, rdb, a.Keys())
	if _, err := a.Release(context.Background(), holder); err != nil {
		t.Fatal(err)
	}
	if !rdb.SIsMember(context.Background(), a.Keys().PoolAvailable("standard"), "p0").Val() {
		t.Error("p0 is not back in its pool after the waiters gave up and its call ended")
	}
}

// A waiter whose caller gave up takes no pod: the pod freed afterwards goes
// back to its pool, the call has no allocation and no ticket, and the same
// call id may still be allocated later (it never started).
func TestWaitCancelledTakesNoPod(t *testing.T) {
	srv := testredis.Start(t)
	rdb := srv.Client()
	reg := prometheus.NewRegistry()
	a := waitingAllocator(t, rdb, 5*time.Second, reg, onePodTiers)
	register(t, a, "standard", "p0")
	mustAllocate(t, a, "CA-hold", "acme")

	ctx, cancel := context.WithCancel(context.Background())
	w := goAllocate(ctx, a, "CA-gone", "acme")
	awaitWaiters(t, rdb, a, 1)
	cancel()
	if o := <-w; !errors.Is(o.err, context.Canceled) {
		t.Fatalf("cancelled waiter: %v, want context.Canceled", o.err)
	}
	checkNoWaitKeys(t, rdb, a.Keys())
	if _, err := a.Release(context.Background(), "CA-hold"); err != nil {
		t.Fatal(err)
	}
	if !rdb.SIsMember(context.Background(), a.Keys().PoolAvailable("standard"), "p0").Val() {
		t.Error("p0 did not go back to its pool")
	}
	if n := rdb.Exists(context.Background(), a.Keys().Call("CA-gone"), a.Keys().CallEnded("CA-gone")).Val(); n != 0 {
		t.Errorf("the call that gave up has %d call keys", n)
	}
	if got := histogramCount(t, reg, "edge_admission_wait_seconds", "gave_up"); got != 1 {
		t.Errorf("edge_admission_wait_seconds{result=gave_up} count = %d, want 1", got)
	}
	mustAllocate(t, a, "CA-gone", "acme")
}

// A wait that runs out of budget is refused at_capacity (the same answer
// as without waiting), counted as a timeout, and leaves nothing behind.
func TestWaitBudgetRunsOut(t *testing.T) {
	srv := testredis.Start(t)
	rdb := srv.Client()
	reg := prometheus.NewRegistry()
	a := waitingAllocator(t, rdb, 300*time.Millisecond, reg, onePodTiers)
	register(t, a, "standard", "p0")
	mustAllocate(t, a, "CA-hold", "acme")

	o := <-goAllocate(context.Background(), a, "CA-late", "acme")
	var nc *allocator.NoCapacityError
	if !errors.As(o.err, &nc) || nc.Reason != allocator.ReasonAtCapacity {
		t.Fatalf("err = %v, want no capacity (at_capacity)", o.err)
	}
	if len(nc.Chain) != 1 || nc.Chain[0] != "standard" {
		t.Errorf("chain %v, want [standard]", nc.Chain)
	}
	if o.took < 300*time.Millisecond || o.took > 2*time.Second {
		t.Errorf("refused after %v, want the 300ms budget", o.took)
	}
	checkNoWaitKeys(t, rdb, a.Keys())
	if got := counterValue(t, reg, "edge_admission_wait_timeouts_total"); got != 1 {
		t.Errorf("edge_admission_wait_timeouts_total = %v, want 1", got)
	}
	if got := histogramCount(t, reg, "edge_admission_wait_seconds", "timeout"); got != 1 {
		t.Errorf("edge_admission_wait_seconds{result=timeout} count = %d, want 1", got)
	}
	if got := counterValue(t, reg, "allocations_total", "result", "at_capacity"); got != 1 {
		t.Errorf("allocations_total{result=at_capacity} = %v, want 1 (counted once, at the end)", got)
	}

	// A caller whose own deadline is nearer than the budget is answered
	// before it, with the capacity refusal, not its own timeout.
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	o = <-goAllocate(ctx, a, "CA-hurried", "acme")
	if !errors.As(o.err, &nc) || nc.Reason != allocator.ReasonAtCapacity || ctx.Err() != nil {
		t.Fatalf("err = %v (ctx %v), want at_capacity before the caller's deadline", o.err, ctx.Err())
	}
}
