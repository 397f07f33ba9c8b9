package allocator_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/edge-voice/edge/allocator"
	"github.com/edge-voice/edge/allocator/allocatortest"
	"github.com/edge-voice/edge/internal/testredis"
)

// TestBurstAdmission is the admission burst benchmark (docs/benchmarks.md):
// 1,000 calls from 10 merchants, one of them sending 90 %, arriving over one
// second against 50 exclusive pods, each call holding its pod 1-5 s; run
// without caps and with them, without waiting for capacity and with a 3 s
// wait (two replicas on one Redis, calls alternating between them), side
// by side; then the hand-off latency alone. It takes about 40 s, so it
// runs only with EDGE_BURST_BENCH=1:
//
//	EDGE_BURST_BENCH=1 go test -count=1 -run TestBurstAdmission -v ./allocator/
//
// It checks what caps promise (the big merchant never above its cap, the
// pods it may not take all going to the others, each of them served) and
// logs the figures.
func TestBurstAdmission(t *testing.T) {
	if os.Getenv("EDGE_BURST_BENCH") == "" {
		t.Skip("the burst benchmark runs with EDGE_BURST_BENCH=1")
	}
	for _, sc := range []struct {
		name string
		caps map[string]int
		wait time.Duration
	}{
		{"no caps", nil, 0},
		{"big merchant capped at 30 of 50 pods", map[string]int{"m0": 30}, 0},
		{"3 s wait for capacity", nil, 3 * time.Second},
		{"big merchant capped at 30 + 3 s wait", map[string]int{"m0": 30}, 3 * time.Second},
	} {
		t.Run(sc.name, func(t *testing.T) {
			r := runBurst(t, sc.caps, sc.wait)
			t.Logf("%s: served %d of %d (%.1f %%), p50 %v, p99 %v allocation time", sc.name,
				r.served, r.sent, 100*float64(r.served)/float64(r.sent), r.p50, r.p99)
			if sc.wait > 0 {
				t.Logf("  %d served after waiting (p50 %v, p99 %v of wait), %d refused after the budget",
					r.servedAfterWait, r.waitP50, r.waitP99, r.sent-r.served)
			}
			for m := range 10 {
				id := fmt.Sprintf("m%d", m)
				t.Logf("  %s: sent %4d, served %3d (%5.1f %% of its calls, %5.1f %% of all served)", id,
					r.sentBy[id], r.servedBy[id], 100*float64(r.servedBy[id])/float64(r.sentBy[id]),
					100*float64(r.servedBy[id])/float64(max(r.served, 1)))
			}
			if c, ok := sc.caps["m0"]; ok {
				if r.peakBig > c {
					t.Errorf("m0 held %d calls at once, cap %d", r.peakBig, c)
				}
				// The pods m0 may not take go to the others, all of them:
				// no pod idles while a call is refused, every merchant is
				// served.
				small := 0
				for m := 1; m < 10; m++ {
					id := fmt.Sprintf("m%d", m)
					small += r.servedBy[id]
					if r.servedBy[id] == 0 {
						t.Errorf("%s: none of %d calls served while m0 was capped", id, r.sentBy[id])
					}
				}
				if sc.wait == 0 && small != 50-c {
					t.Errorf("the nine small merchants got %d pods, want the %d m0 may not take", small, 50-c)
				}
			}
			if sc.wait > 0 {
				// Waiting serves more than refusing at once: pods freed
				// during the burst's budget go to waiters.
				for m := range 10 {
					id := fmt.Sprintf("m%d", m)
					if r.servedBy[id] == 0 {
						t.Errorf("%s: none of %d calls served with waiting", id, r.sentBy[id])
					}
				}
			}
		})
	}
	t.Run("hand-off latency", func(t *testing.T) { handOffLatency(t) })
}

// handOffLatency measures the added latency of the Redis-side hand-off:
// from a release on one replica to the call waiting on another replica
// answered, 200 times over one pod.
func handOffLatency(t *testing.T) {
	srv := testredis.Start(t)
	a := waitingAllocator(t, srv.Client(), 5*time.Second, nil, onePodTiers)
	b := waitingAllocator(t, srv.Client(), 5*time.Second, nil, onePodTiers)
	register(t, a, "standard", "p0")
	holder := "H-0"
	mustAllocate(t, a, holder, "m")
	var took []time.Duration
	for i := 1; i <= 200; i++ {
		next := fmt.Sprintf("H-%d", i)
		w := goAllocate(context.Background(), b, next, "m")
		awaitWaiters(t, srv.Client(), a, 1)
		start := time.Now()
		if _, err := a.Release(context.Background(), holder); err != nil {
			t.Fatal(err)
		}
		o := <-w
		took = append(took, time.Since(start))
		if o.err != nil {
			t.Fatal(o.err)
		}
		holder = next
	}
	slices.Sort(took)
	t.Logf("hand-off, release on replica A to the waiter on replica B answered (200 times): p50 %v, p99 %v, max %v",
		took[len(took)/2], took[len(took)*99/100], took[len(took)-1])
}

type burstResult struct {
	sent, served     int
	sentBy, servedBy map[string]int
	p50, p99         time.Duration
	peakBig          int
	servedAfterWait  int
	waitP50, waitP99 time.Duration
}

func runBurst(t *testing.T, caps map[string]int, wait time.Duration) burstResult {
	ctx := context.Background()
	srv := testredis.Start(t)
	rdb := srv.Client()
	fifty := func(c *allocator.Config) {
		c.Tiers = allocator.TierConfig{
			Tiers:        map[string]allocator.Tier{"standard": {Type: allocator.Exclusive, Target: 50}},
			DefaultChain: []string{"standard"},
		}
	}
	a := allocatortest.New(t, rdb, fifty)
	replicas := []*allocator.Allocator{a}
	if wait > 0 {
		// Two replicas, each with its own connection and Waker.
		a = waitingAllocator(t, rdb, wait, nil, fifty, func(c *allocator.Config) { c.Admission.Wait.MaxWaiters = 1000 })
		replicas = []*allocator.Allocator{a, waitingAllocator(t, srv.Client(), wait, nil, fifty)}
	}
	for i := range 50 {
		register(t, a, "standard", fmt.Sprintf("p%02d", i))
	}
	for m, c := range caps {
		setMerchant(t, a, m, allocator.MerchantConfig{MaxCalls: capOf(c)})
	}

	const calls = 1000
	r := burstResult{sent: calls, sentBy: map[string]int{}, servedBy: map[string]int{}}
	var (
		mu        sync.Mutex
		latencies []time.Duration
		waited    []time.Duration
		big       int
		wg        sync.WaitGroup
	)
	rng := rand.New(rand.NewPCG(1, 2))
	start := time.Now()
	for i := range calls {
		// One merchant sends 90 %, nine send 10 in all, interleaved.
		merchant := "m0"
		if i%10 == 9 {
			merchant = fmt.Sprintf("m%d", 1+(i/10)%9)
		}
		hold := time.Second + time.Duration(rng.Int64N(int64(4*time.Second)))
		r.sentBy[merchant]++
		time.Sleep(time.Until(start.Add(time.Duration(i) * time.Second / calls)))
		wg.Add(1)
		go func() {
			defer wg.Done()
			call := fmt.Sprintf("B%d", i)
			t0 := time.Now()
			al, err := replicas[i%len(replicas)].Allocate(ctx, allocator.Request{CallID: call, MerchantID: merchant})
			d := time.Since(t0)
			mu.Lock()
			latencies = append(latencies, d)
			if err == nil && al.Waited > 0 {
				waited = append(waited, al.Waited)
			}
			if err == nil {
				r.served++
				r.servedBy[merchant]++
				if merchant == "m0" {
					big++
					r.peakBig = max(r.peakBig, big)
				}
			}
			mu.Unlock()
			if err != nil {
				if !errors.Is(err, allocator.ErrNoCapacity) {
					t.Errorf("%s: %v", call, err)
				}
				return
			}
			time.Sleep(hold)
			mu.Lock()
			if merchant == "m0" {
				big--
			}
			mu.Unlock()
			if _, err := a.Release(ctx, call); err != nil {
				t.Errorf("release %s: %v", call, err)
			}
		}()
	}
	wg.Wait()
	slices.Sort(latencies)
	r.p50 = latencies[len(latencies)/2]
	r.p99 = latencies[len(latencies)*99/100]
	if len(waited) > 0 {
		slices.Sort(waited)
		r.servedAfterWait = len(waited)
		r.waitP50, r.waitP99 = waited[len(waited)/2], waited[len(waited)*99/100]
	}
	return r
}
