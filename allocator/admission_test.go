package allocator_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/edge-voice/edge/allocator"
	"github.com/edge-voice/edge/allocator/allocatortest"
	"github.com/edge-voice/edge/internal/testredis"
)

func capOf(n int) *int { return &n }

func setMerchant(t testing.TB, a *allocator.Allocator, id string, mc allocator.MerchantConfig) {
	t.Helper()
	if err := a.SetMerchantConfig(context.Background(), id, mc); err != nil {
		t.Fatalf("set merchant %s: %v", id, err)
	}
}

func wantAtCap(t *testing.T, err error) {
	t.Helper()
	var nc *allocator.NoCapacityError
	if !errors.As(err, &nc) || nc.Reason != allocator.ReasonMerchantAtCap {
		t.Fatalf("err = %v, want no capacity (merchant_at_cap)", err)
	}
}

// Uncapped, one merchant can take every pod. With max_calls it gets at
// most that many live calls while pods are free; other merchants (and the
// capped one after a release) are served as before.
func TestMerchantCapRefusesBeyondMaxCalls(t *testing.T) {
	forEachBackend(t, func(t *testing.T, rdb redis.UniversalClient) {
		ctx := context.Background()
		a := allocatortest.New(t, rdb)
		register(t, a, "standard", "s0", "s1", "s2", "s3")
		register(t, a, "basic", "b0")
		setMerchant(t, a, "acme", allocator.MerchantConfig{MaxCalls: capOf(2)})

		mustAllocate(t, a, "A1", "acme")
		mustAllocate(t, a, "A2", "acme")
		_, err := a.Allocate(ctx, allocator.Request{CallID: "A3", MerchantID: "acme"})
		wantAtCap(t, err)
		// The refusal wrote nothing: a retry after a release is a new call.
		if rdb.Exists(ctx, a.Keys().Call("A3"), a.Keys().CallEnded("A3")).Val() != 0 {
			t.Fatal("a refused allocation left keys behind")
		}
		mustAllocate(t, a, "B1", "other") // not capped, not affected
		mustAllocate(t, a, "N1", "")      // no merchant, not affected
		if _, err := a.Release(ctx, "A1"); err != nil {
			t.Fatal(err)
		}
		mustAllocate(t, a, "A3", "acme")
		// A repeat of a live call is not a new call: never refused.
		if al := mustAllocate(t, a, "A2", "acme"); !al.WasExisting {
			t.Fatalf("repeat of A2 = %+v, want the existing allocation", al)
		}
	})
}

// A call ended by any path stops counting: released, found dead by the
// sweep (its lease ran out), or ended with its unregistered pod. A call
// moved to another pod (failover) still counts, once.
func TestMerchantCapCountFollowsEveryEnd(t *testing.T) {
	forEachBackend(t, func(t *testing.T, rdb redis.UniversalClient) {
		ctx := context.Background()
		a := allocatortest.New(t, rdb)
		k := a.Keys()
		register(t, a, "standard", "s0", "s1", "s2")
		register(t, a, "basic", "b0")
		setMerchant(t, a, "acme", allocator.MerchantConfig{MaxCalls: capOf(2)})
		count := func() int64 { return rdb.ZCard(ctx, k.MerchantCalls("acme")).Val() }

		// Swept: the exclusive call's lease runs out, the sweep ends it.
		dead := mustAllocate(t, a, "D1", "acme")
		mustAllocate(t, a, "D2", "acme")
		rdb.Del(ctx, k.Lease(dead.PodName))
		if _, err := a.SweepPods(ctx, "", []string{dead.PodName}); err != nil {
			t.Fatal(err)
		}
		if n := count(); n != 1 {
			t.Fatalf("after the sweep ended D1: %d counted, want 1", n)
		}
		// Unregistered: its pod leaves, the call ends with it.
		al := mustAllocate(t, a, "U1", "acme")
		if _, err := a.UnregisterPod(ctx, "", al.PodName); err != nil {
			t.Fatal(err)
		}
		if n := count(); n != 1 {
			t.Fatalf("after U1's pod was unregistered: %d counted, want 1", n)
		}
		// Moved: still one call.
		mv := mustAllocate(t, a, "M1", "acme")
		if _, err := a.ClaimMedia(ctx, "M1", mv.PodName, "r/1"); err != nil {
			t.Fatal(err)
		}
		if _, err := a.MoveCall(ctx, "M1", mv.PodName, "r/1", "refused", testEjection); err != nil {
			t.Fatal(err)
		}
		if n := count(); n != 2 {
			t.Fatalf("after M1 moved: %d counted, want 2", n)
		}
		_, err := a.Allocate(ctx, allocator.Request{CallID: "X", MerchantID: "acme"})
		wantAtCap(t, err)
		// A call whose lease ran out without a release stops counting at
		// once, before any sweep ends it.
		for _, c := range []string{"D2", "M1"} {
			if _, err := a.Release(ctx, c); err != nil {
				t.Fatal(err)
			}
		}
		mustAllocate(t, a, "S1", "acme")
		rdb.ZAdd(ctx, k.MerchantCalls("acme"), redis.Z{Score: 1, Member: "S1"})
		mustAllocate(t, a, "S2", "acme")
		mustAllocate(t, a, "S3", "acme")
		if n := count(); n != 2 {
			t.Fatalf("an expired entry is still counted: %d, want 2", n)
		}
	})
}

// Renewing a call keeps it counted past its first lease, so a long call
// is not forgotten by the cap.
func TestMerchantCapRenewKeepsCount(t *testing.T) {
	ctx := context.Background()
	rdb := testredis.Start(t).Client()
	a := allocatortest.New(t, rdb)
	k := a.Keys()
	register(t, a, "standard", "s0", "s1")
	setMerchant(t, a, "acme", allocator.MerchantConfig{MaxCalls: capOf(1)})
	al := mustAllocate(t, a, "R1", "acme")
	rdb.ZAdd(ctx, k.MerchantCalls("acme"), redis.Z{Score: 1, Member: "R1"}) // lease as good as over
	if held, err := a.Renew(ctx, []allocator.Lease{{CallID: "R1", PodName: al.PodName}}); err != nil || !held[0] {
		t.Fatalf("renew = %v, %v", held, err)
	}
	_, err := a.Allocate(ctx, allocator.Request{CallID: "R2", MerchantID: "acme"})
	wantAtCap(t, err)
	// The count does not outlive the calls: its key goes with the last.
	if _, err := a.Release(ctx, "R1"); err != nil {
		t.Fatal(err)
	}
	if n := rdb.Exists(ctx, k.MerchantCalls("acme")).Val(); n != 0 {
		t.Fatal("the count's key outlived the merchant's last call")
	}
}

// Concurrent allocations for one capped merchant, with releases and
// duplicates racing them, never hold more than max_calls live calls, and
// the count equals the merchant's live calls when all is done. The pool is
// far larger than the cap, so only the cap refuses.
func TestMerchantCapHoldsUnderConcurrency(t *testing.T) {
	ctx := context.Background()
	rdb := testredis.Start(t).Client()
	a := allocatortest.New(t, rdb)
	k := a.Keys()
	var pods []string
	for i := range 20 {
		pods = append(pods, fmt.Sprintf("s%d", i))
	}
	register(t, a, "standard", pods...)
	register(t, a, "basic", "b0", "b1")
	const limit = 5
	setMerchant(t, a, "acme", allocator.MerchantConfig{MaxCalls: capOf(limit)})

	var (
		live, peak, served, capped atomic.Int64
		wg                         sync.WaitGroup
		failures                   = make(chan error, 32)
	)
	for w := range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for c := range 25 {
				call := fmt.Sprintf("C-%d-%d", w, c)
				var dup sync.WaitGroup
				dup.Add(1)
				go func() { defer dup.Done(); a.Allocate(ctx, allocator.Request{CallID: call, MerchantID: "acme"}) }()
				_, err := a.Allocate(ctx, allocator.Request{CallID: call, MerchantID: "acme"})
				dup.Wait()
				if errors.Is(err, allocator.ErrNoCapacity) {
					capped.Add(1)
					// The racing duplicate may have got the pod.
					a.Release(ctx, call)
					continue
				}
				if err != nil {
					failures <- err
					return
				}
				n := live.Add(1)
				for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
				}
				served.Add(1)
				// Inside Redis, at one instant: the merchant's call infos
				// never exceed its cap.
				if got := merchantCallInfos(t, rdb, k, "acme"); got > limit {
					failures <- fmt.Errorf("%d live calls of acme > cap %d", got, limit)
				}
				live.Add(-1)
				if _, err := a.Release(ctx, call); err != nil {
					failures <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(failures)
	for err := range failures {
		t.Error(err)
	}
	if served.Load() == 0 || capped.Load() == 0 {
		t.Fatalf("served %d, capped %d: the test did not exercise the cap", served.Load(), capped.Load())
	}
	if n := rdb.ZCard(ctx, k.MerchantCalls("acme")).Val(); n != 0 {
		t.Errorf("after every release %d calls still counted", n)
	}
	checkQuiescent(t, rdb, a, map[string]string{"s0": "standard", "b0": "basic"})
	t.Logf("served %d, capped %d, peak held by workers %d", served.Load(), capped.Load(), peak.Load())
}

// merchantCallInfos counts, in one script, the call infos naming merchant.
func merchantCallInfos(t *testing.T, rdb redis.UniversalClient, k allocator.Keys, merchant string) int {
	t.Helper()
	const count = `
local n = 0
for _, ck in ipairs(redis.call('KEYS', KEYS[1])) do
  if redis.call('HGET', ck, 'merchant_id') == ARGV[1] then n = n + 1 end
end
return n`
	n, err := rdb.Eval(context.Background(), count, []string{k.Call("*")}, merchant).Int()
	if err != nil {
		t.Error(err)
	}
	return n
}

// Caps that make no sense are refused naming the field; no cap is no cap.
func TestMerchantCapValidation(t *testing.T) {
	tc := allocatortest.Tiers()
	for name, c := range map[string]struct {
		max *int
		ok  bool
	}{
		"absent":   {nil, true},
		"one":      {capOf(1), true},
		"largest":  {capOf(allocator.MaxMerchantCalls), true},
		"zero":     {capOf(0), false},
		"negative": {capOf(-3), false},
		"absurd":   {capOf(allocator.MaxMerchantCalls + 1), false},
	} {
		t.Run(name, func(t *testing.T) {
			err := tc.ValidateMerchantConfig("acme", allocator.MerchantConfig{MaxCalls: c.max})
			if c.ok != (err == nil) {
				t.Fatalf("err = %v, want ok %v", err, c.ok)
			}
			if err != nil && (!errors.Is(err, allocator.ErrInvalidConfig) || !strings.Contains(err.Error(), "max_calls")) {
				t.Fatalf("err = %v, want an invalid config naming max_calls", err)
			}
		})
	}
}

// A max_calls written to Redis by hand that is not a positive integer caps
// nothing (and says so), rather than refusing every call of the merchant.
func TestMerchantCapStoredBadIsNoCap(t *testing.T) {
	ctx := context.Background()
	rdb := testredis.Start(t).Client()
	a := allocatortest.New(t, rdb)
	register(t, a, "standard", "s0", "s1")
	rdb.HSet(ctx, a.Keys().MerchantConfig(), "acme", `{"max_calls":0}`)
	al := mustAllocate(t, a, "A1", "acme")
	if !strings.Contains(al.Warning, "max_calls") {
		t.Fatalf("warning = %q, want a note about max_calls", al.Warning)
	}
	mustAllocate(t, a, "A2", "acme")
}
