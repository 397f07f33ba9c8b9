package allocator_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/redis/go-redis/v9"

	"github.com/edge-voice/edge/allocator"
	"github.com/edge-voice/edge/internal/testredis"
)

// onePodTiers: one exclusive pod, so every wait is for that pod.
func onePodTiers(c *allocator.Config) {
	c.Tiers = allocator.TierConfig{
		Tiers:        map[string]allocator.Tier{"standard": {Type: allocator.Exclusive, Target: 1}},
		DefaultChain: []string{"standard"},
	}
}

// waitingAllocator is an allocator whose calls may wait up to budget, with
// its Waker running until the test ends (one "replica" of edge).
func waitingAllocator(t testing.TB, rdb redis.UniversalClient, budget time.Duration, reg prometheus.Registerer, mutate ...func(*allocator.Config)) *allocator.Allocator {
	t.Helper()
	cfg := allocator.Config{LeaseTTL: time.Minute, CallInfoTTL: time.Hour, DrainingTTL: 6 * time.Minute, Tiers: testTiers()}
	for _, m := range mutate {
		m(&cfg)
	}
	cfg.Admission.Wait.Budget = budget
	a, err := allocator.New(rdb, cfg, reg)
	if err != nil {
		t.Fatal(err)
	}
	startWaker(t, a)
	return a
}

func startWaker(t testing.TB, a *allocator.Allocator) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	w := a.Waker()
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("waker: %v", err)
		}
	})
	select {
	case <-w.Started():
	case err := <-done:
		t.Fatalf("waker stopped at once: %v", err)
	}
}

// waiters is the number of calls queued in Redis.
func waiters(t testing.TB, rdb redis.UniversalClient, a *allocator.Allocator) int64 {
	t.Helper()
	n, err := rdb.ZCard(context.Background(), a.Keys().WaitDeadline()).Result()
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// awaitWaiters waits until n calls are queued in Redis (the event the
// test waits for is a write by another goroutine's script).
func awaitWaiters(t testing.TB, rdb redis.UniversalClient, a *allocator.Allocator, n int64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for waiters(t, rdb, a) != n {
		if time.Now().After(deadline) {
			t.Fatalf("%d calls queued, want %d", waiters(t, rdb, a), n)
		}
		time.Sleep(time.Millisecond)
	}
}

// checkNoWaitKeys asserts that waiting left nothing behind: no deadline,
// ring, queue or ticket.
func checkNoWaitKeys(t testing.TB, rdb redis.UniversalClient, k allocator.Keys) {
	t.Helper()
	ctx := context.Background()
	var left []string
	for _, pattern := range []string{k.WaitDeadline(), k.WaitRing(), k.WaitQueue("*"), k.WaitTicket("*")} {
		keys, err := rdb.Keys(ctx, pattern).Result()
		if err != nil {
			t.Fatal(err)
		}
		left = append(left, keys...)
	}
	if len(left) > 0 {
		t.Errorf("wait keys left: %v", left)
	}
}

type outcome struct {
	call string
	al   allocator.Allocation
	err  error
	took time.Duration
}

// goAllocate starts an allocation in the background; its outcome arrives
// on the channel.
func goAllocate(ctx context.Context, a *allocator.Allocator, call, merchant string) <-chan outcome {
	ch := make(chan outcome, 1)
	go func() {
		start := time.Now()
		al, err := a.Allocate(ctx, allocator.Request{CallID: call, MerchantID: merchant})
		ch <- outcome{call, al, err, time.Since(start)}
	}()
	return ch
}

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
	gauges.MustRegister(allocator.NewPoolCollector(newAllocator(t, rdb, onePodTiers)))
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

// awaitServed returns the call whose allocation succeeded next, removing it
// from outcomes.
func awaitServed(t *testing.T, outcomes map[string]<-chan outcome) string {
	t.Helper()
	deadline := time.After(5 * time.Second)
	for {
		for call, ch := range outcomes {
			select {
			case o := <-ch:
				if o.err != nil {
					t.Fatalf("%s: %v", call, o.err)
				}
				delete(outcomes, call)
				return call
			default:
			}
		}
		select {
		case <-deadline:
			t.Fatal("no waiter was served after a release")
		case <-time.After(time.Millisecond):
		}
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
	impatient := newAllocator(t, rdb, onePodTiers)
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
			return newAllocator(t, rdb, onePodTiers, func(c *allocator.Config) { c.Admission.Wait.Budget = 5 * time.Second })
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

// histogramCount is the sample count of a histogram series with the given
// result label.
func histogramCount(t testing.TB, reg *prometheus.Registry, name, result string) uint64 {
	t.Helper()
	var n uint64
	for _, m := range family(t, reg, name) {
		if labelOf(m, "result") == result {
			n += m.GetHistogram().GetSampleCount()
		}
	}
	return n
}

// counterValue is a counter's value, summed over the series whose label
// matches (label, value), or over all when none is given.
func counterValue(t testing.TB, reg *prometheus.Registry, name string, labelValue ...string) float64 {
	t.Helper()
	var sum float64
	for _, m := range family(t, reg, name) {
		if len(labelValue) == 2 && labelOf(m, labelValue[0]) != labelValue[1] {
			continue
		}
		sum += m.GetCounter().GetValue()
	}
	return sum
}

func family(t testing.TB, reg *prometheus.Registry, name string) []*dto.Metric {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			return mf.GetMetric()
		}
	}
	return nil
}

func labelOf(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
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
	a := newAllocator(t, rdb, onePodTiers, func(c *allocator.Config) { c.Admission.Wait.Budget = 5 * time.Second })
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
