package allocator_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/edge-voice/edge/allocator"
	"github.com/edge-voice/edge/allocator/allocatortest"
	"github.com/edge-voice/edge/internal/testredis"
)

// Only busy pods are waited for: no_pods, merchant_at_cap and rate_limited
// are answered at once.
func TestWaitOnlyForBusyPods(t *testing.T) {
	srv := testredis.Start(t)
	rdb := srv.Client()
	a := waitingAllocator(t, rdb, 5*time.Second, nil, onePodTiers, func(c *allocator.Config) {
		c.Admission.Rate.MerchantPerSecond = 0.001
		c.Admission.Rate.MerchantBurst = 1
	})
	for _, tc := range []struct {
		name   string
		setup  func()
		reason string
	}{
		{"no pods", func() {}, "no_pods"},
		{"merchant at its cap", func() {
			register(t, a, "standard", "p0")
			setMerchant(t, a, "capped", allocator.MerchantConfig{MaxCalls: capOf(1)})
			mustAllocate(t, a, "CA-capped-1", "capped")
		}, "merchant_at_cap"},
	} {
		name := tc.name
		tc.setup()
		call, merchant := "CA-"+strings.ReplaceAll(name, " ", "-"), "capped"
		if tc.reason == "no_pods" {
			merchant = "other"
		}
		o := <-goAllocate(context.Background(), a, call, merchant)
		var nc *allocator.NoCapacityError
		if !errors.As(o.err, &nc) || string(nc.Reason) != tc.reason || o.took > time.Second {
			t.Errorf("%s: %v after %v, want %s at once", name, o.err, o.took, tc.reason)
		}
	}
	// The rate-limited merchant used its one token above ("other").
	if o := <-goAllocate(context.Background(), a, "CA-rate", "other"); !errors.Is(o.err, allocator.ErrRateLimited) || o.took > time.Second {
		t.Errorf("rate limited: %v after %v, want rate_limited at once", o.err, o.took)
	}
	checkNoWaitKeys(t, rdb, a.Keys())
}

// A new call does not overtake a waiting one: room that appears without a
// release (a new pod) goes to the waiter when the next allocate looks,
// before the new call may take it.
func TestWaitNewArrivalDoesNotOvertake(t *testing.T) {
	srv := testredis.Start(t)
	rdb := srv.Client()
	a := waitingAllocator(t, rdb, 5*time.Second, nil, onePodTiers)
	// Another replica with waiting off: its calls never wait.
	impatient := allocatortest.New(t, rdb, onePodTiers)
	register(t, a, "standard", "p0")
	mustAllocate(t, a, "CA-hold", "")
	w := goAllocate(context.Background(), a, "CA-waiting", "m1")
	awaitWaiters(t, rdb, a, 1)

	register(t, a, "standard", "p1")
	_, err := impatient.Allocate(context.Background(), allocator.Request{CallID: "CA-new", MerchantID: "m2"})
	var nc *allocator.NoCapacityError
	if !errors.As(err, &nc) || nc.Reason != allocator.ReasonAtCapacity {
		t.Errorf("new call: %v, want at_capacity (the free pod is the waiter's)", err)
	}
	if o := <-w; o.err != nil || o.al.PodName != "p1" {
		t.Fatalf("waiter: %+v %v, want p1", o.al, o.err)
	}
}

// Calls waiting on a replica that died leave the queue once their deadline
// passes, swept by the next script that looks, and never hold a pod.
func TestWaitersOfDeadReplicaSwept(t *testing.T) {
	srv := testredis.Start(t)
	rdb := srv.Client()
	a := waitingAllocator(t, rdb, 5*time.Second, nil, onePodTiers)
	register(t, a, "standard", "p0")
	mustAllocate(t, a, "CA-hold", "")

	// Replica B with its own connection; it dies (its connection closes)
	// while three of its calls wait, so it can end none of their waits.
	bClient := srv.Client()
	b := waitingAllocator(t, bClient, 500*time.Millisecond, nil, onePodTiers)
	ctx, cancel := context.WithCancel(context.Background())
	var outs []<-chan outcome
	for i := range 3 {
		outs = append(outs, goAllocate(ctx, b, fmt.Sprintf("CA-b%d", i), fmt.Sprintf("m%d", i%2)))
		awaitWaiters(t, rdb, a, int64(i+1))
	}
	start := time.Now()
	bClient.Close()
	cancel()
	for _, ch := range outs {
		if o := <-ch; o.err == nil {
			t.Fatalf("%s: allocated on a dead replica", o.call)
		}
	}
	if n := waiters(t, rdb, a); n != 3 {
		t.Fatalf("%d waiters in Redis after B died, want its 3 (nothing could end them)", n)
	}
	// Past their deadlines (B's 500ms budget), the next release sweeps them
	// and the pod goes back to the pool, not to a dead waiter.
	time.Sleep(time.Until(start.Add(600 * time.Millisecond)))
	if _, err := a.Release(context.Background(), "CA-hold"); err != nil {
		t.Fatal(err)
	}
	checkNoWaitKeys(t, rdb, a.Keys())
	if !rdb.SIsMember(context.Background(), a.Keys().PoolAvailable("standard"), "p0").Val() {
		t.Error("p0 went to a dead replica's waiter")
	}
	if n := rdb.Exists(context.Background(), a.Keys().Call("CA-b0"), a.Keys().Call("CA-b1"), a.Keys().Call("CA-b2")).Val(); n != 0 {
		t.Errorf("%d of the dead replica's calls hold a pod", n)
	}
}

// Waiting is off without a Waker (nobody would wake the call), with a zero
// budget, and beyond max_waiters on this replica.
func TestWaitOffCases(t *testing.T) {
	srv := testredis.Start(t)
	rdb := srv.Client()
	for name, mk := range map[string]func() *allocator.Allocator{
		"no-waker": func() *allocator.Allocator {
			return allocatortest.New(t, rdb, onePodTiers, func(c *allocator.Config) { c.Admission.Wait.Budget = 5 * time.Second })
		},
		"budget-0": func() *allocator.Allocator { return waitingAllocator(t, rdb, 0, nil, onePodTiers) },
	} {
		a := mk()
		register(t, a, "standard", "p0")
		mustAllocate(t, a, "CA-hold-"+name, "")
		if o := <-goAllocate(context.Background(), a, "CA-"+name, ""); !errors.Is(o.err, allocator.ErrNoCapacity) || o.took > time.Second {
			t.Errorf("%s: %v after %v, want refused at once", name, o.err, o.took)
		}
		if _, err := a.Release(context.Background(), "CA-hold-"+name); err != nil {
			t.Fatal(err)
		}
	}

	a := waitingAllocator(t, rdb, 5*time.Second, nil, onePodTiers, func(c *allocator.Config) { c.Admission.Wait.MaxWaiters = 2 })
	mustAllocate(t, a, "CA-hold", "")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	for i := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			a.Allocate(ctx, allocator.Request{CallID: fmt.Sprintf("CA-w%d", i)})
		}()
		awaitWaiters(t, rdb, a, int64(i+1))
	}
	if o := <-goAllocate(context.Background(), a, "CA-third", ""); !errors.Is(o.err, allocator.ErrNoCapacity) || o.took > time.Second {
		t.Errorf("beyond max_waiters: %v after %v, want refused at once", o.err, o.took)
	}
	cancel()
	wg.Wait()
	checkNoWaitKeys(t, rdb, a.Keys())
}

func TestWaitConfigValidation(t *testing.T) {
	for name, tc := range map[string]struct {
		wait allocator.WaitConfig
		want string
	}{
		"default":          {allocator.DefaultAdmissionConfig().Wait, ""},
		"off":              {allocator.WaitConfig{}, ""},
		"max":              {allocator.WaitConfig{Budget: 10 * time.Second, MaxWaiters: 100000}, ""},
		"negative budget":  {allocator.WaitConfig{Budget: -time.Second}, "admission.wait.budget"},
		"absurd budget":    {allocator.WaitConfig{Budget: time.Minute}, "admission.wait.budget"},
		"negative waiters": {allocator.WaitConfig{Budget: time.Second, MaxWaiters: -1}, "admission.wait.max_waiters"},
		"absurd waiters":   {allocator.WaitConfig{Budget: time.Second, MaxWaiters: 1 << 30}, "admission.wait.max_waiters"},
	} {
		t.Run(name, func(t *testing.T) {
			err := allocator.AdmissionConfig{Wait: tc.wait}.Validate()
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("err = %v, want one naming %s", err, tc.want)
			}
		})
	}
}

// Waiting works on every backend, miniredis (the embedded dev mode)
// included: its scripts publish the wake-up and its Pub/Sub delivers it.
func TestWaitEveryBackend(t *testing.T) {
	forEachBackend(t, func(t *testing.T, rdb redis.UniversalClient) {
		a := waitingAllocator(t, rdb, 5*time.Second, nil, onePodTiers)
		register(t, a, "standard", "p0")
		mustAllocate(t, a, "CA-first", "")
		second := goAllocate(context.Background(), a, "CA-second", "")
		awaitWaiters(t, rdb, a, 1)
		if _, err := a.Release(context.Background(), "CA-first"); err != nil {
			t.Fatal(err)
		}
		o := <-second
		t.Logf("served %v after it started waiting", o.took)
		if o.err != nil || o.al.PodName != "p0" || o.took > 2*time.Second {
			t.Fatalf("waiter: %+v %v after %v, want p0 soon after the release", o.al, o.err, o.took)
		}
		checkNoWaitKeys(t, rdb, a.Keys())
	})
}

// With waiting on, an allocation that does not wait is still one round
// trip: the queue is looked at inside allocate.lua.
func TestWaitKeepsOneRoundTrip(t *testing.T) {
	srv := testredis.Start(t)
	rdb := srv.Client()
	trips := &testredis.RoundTrips{}
	a := waitingAllocator(t, rdb, 5*time.Second, nil, onePodTiers)
	register(t, a, "standard", "p0")
	if err := a.Preload(context.Background()); err != nil {
		t.Fatal(err)
	}
	rdb.AddHook(trips)
	mustAllocate(t, a, "CA-1", "acme")
	if n := trips.Load(); n != 1 {
		t.Errorf("allocate with waiting on took %d round trips, want 1", n)
	}
}

// A stranger naming a waiting call's id (another creator) neither joins
// nor ends its wait: it is refused at once, its giving up changes nothing,
// and once the call is served the stranger sees it as another's live call.
func TestWaitStrangerCannotTouchAWait(t *testing.T) {
	srv := testredis.Start(t)
	rdb := srv.Client()
	a := waitingAllocator(t, rdb, 5*time.Second, nil, onePodTiers)
	register(t, a, "standard", "p0")
	mustAllocate(t, a, "CA-hold", "")
	owner := allocator.Request{CallID: "CA-mine", Creator: "token:owner"}
	mine := make(chan outcome, 1)
	go func() {
		al, err := a.Allocate(context.Background(), owner)
		mine <- outcome{owner.CallID, al, err, 0}
	}()
	awaitWaiters(t, rdb, a, 1)

	stranger := allocator.Request{CallID: "CA-mine", Creator: "token:stranger"}
	ctx, cancel := context.WithCancel(context.Background())
	start := time.Now()
	_, err := a.Allocate(ctx, stranger)
	cancel()
	if !errors.Is(err, allocator.ErrNoCapacity) || time.Since(start) > time.Second {
		t.Fatalf("stranger: %v after %v, want refused at once", err, time.Since(start))
	}
	if waiters(t, rdb, a) != 1 {
		t.Fatal("the stranger's refusal ended the owner's wait")
	}
	if _, err := a.Release(context.Background(), "CA-hold"); err != nil {
		t.Fatal(err)
	}
	o := <-mine
	if o.err != nil || o.al.PodName != "p0" || o.al.WasExisting {
		t.Fatalf("owner: %+v %v, want p0, new", o.al, o.err)
	}
	al, err := a.Allocate(context.Background(), stranger)
	if err != nil || !al.WasExisting || al.Creator != "token:owner" {
		t.Fatalf("stranger after the hand-off: %+v %v, want the owner's existing call", al, err)
	}
	checkNoWaitKeys(t, rdb, a.Keys())
}

// When edge stops, its Waker's Run ends first; calls still waiting are not
// left to their budget: a pod given to one is answered at once (each asks
// again by itself every 250ms), and no new call waits.
func TestWaitAfterWakerStops(t *testing.T) {
	srv := testredis.Start(t)
	rdb := srv.Client()
	a := allocatortest.New(t, rdb, onePodTiers, func(c *allocator.Config) { c.Admission.Wait.Budget = 5 * time.Second })
	ctx, stop := context.WithCancel(context.Background())
	waker := a.Waker()
	done := make(chan error, 1)
	go func() { done <- waker.Run(ctx) }()
	<-waker.Started()
	register(t, a, "standard", "p0")
	mustAllocate(t, a, "CA-hold", "")
	w := goAllocate(context.Background(), a, "CA-waiting", "")
	awaitWaiters(t, rdb, a, 1)

	stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if o := <-goAllocate(context.Background(), a, "CA-late", ""); !errors.Is(o.err, allocator.ErrNoCapacity) || o.took > time.Second {
		t.Errorf("a new call after the Waker stopped: %v after %v, want refused at once", o.err, o.took)
	}
	released := time.Now()
	if _, err := a.Release(context.Background(), "CA-hold"); err != nil {
		t.Fatal(err)
	}
	o := <-w
	if o.err != nil || o.al.PodName != "p0" {
		t.Fatalf("waiter: %+v %v", o.al, o.err)
	}
	if d := time.Since(released); d > 2*time.Second {
		t.Errorf("the waiter was answered %v after the release, want about one 250ms poll", d)
	}
}
