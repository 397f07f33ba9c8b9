package allocator_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/edge-voice/edge/allocator"
	"github.com/edge-voice/edge/allocator/allocatortest"
	"github.com/edge-voice/edge/calls"
	"github.com/edge-voice/edge/internal/testredis"
)

// A Sentinel failover under allocation load: while no primary answers,
// allocations fail with ErrUnavailable (503 redis_unavailable, never a
// wrong answer); they resume on the promoted replica through the same
// client, with no restart; and once the load stops and the sweep has run,
// the invariants hold over every key.
func TestSentinelFailoverUnderLoad(t *testing.T) {
	ctx := context.Background()
	primary := testredis.Start(t, testredis.TCP())
	replica := testredis.StartReplica(t, primary)
	sentinels := testredis.StartSentinels(t, "edge", primary, 3, 1)

	cfg := allocator.DefaultRedisConfig()
	cfg.Sentinel = allocator.SentinelConfig{Master: "edge", Addrs: sentinels.Addrs()}
	cfg.DialTimeout, cfg.ReadTimeout, cfg.WriteTimeout = 300*time.Millisecond, 300*time.Millisecond, 300*time.Millisecond
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	rdb, err := cfg.NewClient()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rdb.Close() })
	const leaseTTL = 2 * time.Second
	a := allocatortest.New(t, rdb, func(c *allocator.Config) { c.LeaseTTL = leaseTTL })
	pods := map[string]string{"g0": "gold", "s0": "standard", "s1": "standard", "b0": "basic", "b1": "basic"}
	for pod, tier := range pods {
		register(t, a, tier, pod)
	}
	// The replica must hold the pods before the primary dies, or the test
	// measures lost registrations rather than the failover.
	if err := rdb.Do(ctx, "WAIT", 1, 5000).Err(); err != nil {
		t.Fatal(err)
	}

	// The switch is announced by the sentinels: await it, not a guess.
	watch := redis.NewSentinelClient(&redis.Options{Addr: sentinels.Addrs()[0]})
	t.Cleanup(func() { watch.Close() })
	switched := watch.Subscribe(ctx, "+switch-master")
	if _, err := switched.Receive(ctx); err != nil {
		t.Fatal(err)
	}

	var (
		ok, unavailable, afterSwitch atomic.Int64
		switchedAt                   atomic.Pointer[time.Time]
		firstUnavailable             atomic.Value // error
		stop                         = make(chan struct{})
		wg                           sync.WaitGroup
	)
	// Each worker allocates, then releases, retrying each step while Redis
	// is unavailable, as a provider retries its webhook and the media proxy
	// its release: the call ids are idempotent, so a retry after a lost
	// reply finds the call (or its end) rather than a second pod.
	retry := func(op func() error) {
		for {
			err := op()
			switch {
			case err == nil, errors.Is(err, allocator.ErrNoCapacity), errors.Is(err, allocator.ErrCallNotFound), errors.Is(err, allocator.ErrCallEnded):
				if err == nil {
					ok.Add(1)
					if switchedAt.Load() != nil {
						afterSwitch.Add(1)
					}
				}
				return
			case errors.Is(err, allocator.ErrUnavailable):
				unavailable.Add(1)
				firstUnavailable.CompareAndSwap(nil, err)
				time.Sleep(20 * time.Millisecond) // a client's retry back-off
			default:
				t.Errorf("not a failover error: %v", err)
				return
			}
		}
	}
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				call := fmt.Sprintf("CF-%d-%d", w, i)
				retry(func() error { _, err := a.Allocate(ctx, allocator.Request{CallID: call}); return err })
				retry(func() error { _, err := a.Release(ctx, call); return err })
			}
		}()
	}

	waitCount(t, &ok, 200, "allocations before the failover")
	killed := time.Now()
	primary.Kill()
	msg, err := switched.ReceiveMessage(ctx)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	switchedAt.Store(&now)
	t.Logf("sentinels switched %s after the kill: %s", now.Sub(killed).Round(time.Millisecond), msg.Payload)
	waitCount(t, &afterSwitch, 200, "allocations on the new primary")
	close(stop)
	wg.Wait()

	if got, err := sentinels.PrimaryAddr(ctx); err != nil || got != replica.Addr() {
		t.Fatalf("primary after failover = %q, %v; want the replica %s", got, err, replica.Addr())
	}
	if unavailable.Load() == 0 {
		t.Fatal("no request saw the failover: the test did not exercise it")
	}
	f := calls.FailureOf(firstUnavailable.Load().(error))
	if f.Status != http.StatusServiceUnavailable || f.Code != "redis_unavailable" {
		t.Errorf("a failover error answers %d %s, want 503 redis_unavailable", f.Status, f.Code)
	}
	t.Logf("%d operations ok (%d after the switch), %d attempts answered redis_unavailable", ok.Load(), afterSwitch.Load(), unavailable.Load())

	// A release acknowledged by the old primary but not yet replicated is
	// lost with it: its call is live again on the new primary. Its lease
	// runs out (no socket renews it) and the sweep ends it.
	checkLive(t, rdb, a, pods)
	time.Sleep(leaseTTL) // the lease TTL itself: no event marks its end
	var names []string
	for pod := range pods {
		names = append(names, pod)
	}
	res, err := a.SweepPods(ctx, "", names)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("sweep after the failover: %d pods recovered, %d shared slots reclaimed (lost acknowledged releases)", len(res.Recovered), res.SlotsReclaimed)
	checkQuiescent(t, rdb, a, pods)
}

// waitCount waits until n reaches want (the load's own progress).
func waitCount(t *testing.T, n *atomic.Int64, want int64, what string) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	start := n.Load()
	for n.Load()-start < want {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %d %s (got %d)", want, what, n.Load()-start)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A write that reaches a replica (a client still connected to a demoted
// primary during a failover) is refused with READONLY: that is Redis
// unavailable for now (503 redis_unavailable), not an internal error.
func TestWriteOnAReplicaIsUnavailable(t *testing.T) {
	primary := testredis.Start(t, testredis.TCP())
	replica := testredis.StartReplica(t, primary)
	a := allocatortest.New(t, replica.Client())
	_, err := a.Allocate(context.Background(), allocator.Request{CallID: "CA-ro"})
	if !errors.Is(err, allocator.ErrUnavailable) || !strings.Contains(err.Error(), "READONLY") {
		t.Fatalf("allocate on a replica: %v, want ErrUnavailable (READONLY)", err)
	}
	if f := calls.FailureOf(err); f.Code != "redis_unavailable" {
		t.Errorf("answered %d %s", f.Status, f.Code)
	}
}
