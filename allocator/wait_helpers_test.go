package allocator_test

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/redis/go-redis/v9"

	"github.com/edge-voice/edge/allocator"
	"github.com/edge-voice/edge/allocator/allocatortest"
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
	cfg := allocator.Config{LeaseTTL: time.Minute, CallInfoTTL: time.Hour, DrainingTTL: 6 * time.Minute, Tiers: allocatortest.Tiers()}
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
