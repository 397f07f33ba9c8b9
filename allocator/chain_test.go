package allocator_test

import (
	"context"
	"errors"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/edge-voice/edge/allocator"
	"github.com/edge-voice/edge/allocator/allocatortest"
)

func TestChainAndReasons(t *testing.T) {
	type step struct {
		merchant   string
		wantPod    string
		wantSource string
		wantReason allocator.Reason
	}
	cases := map[string]struct {
		pods      map[string][]string // tier -> pods
		drain     []string
		merchants map[string]string // merchant id -> raw config JSON
		steps     []step
	}{
		"empty chain says no pods": {
			steps: []step{{wantReason: allocator.ReasonNoPods}},
		},
		"all draining": {
			pods:  map[string][]string{"gold": {"g0"}, "basic": {"s0"}},
			drain: []string{"g0", "s0"},
			steps: []step{{wantReason: allocator.ReasonAllDraining}},
		},
		"all busy": {
			pods: map[string][]string{"gold": {"g0"}},
			steps: []step{
				{wantPod: "g0", wantSource: "pool:gold"},
				{wantReason: allocator.ReasonAtCapacity},
			},
		},
		"draining pod skipped, next tier used": {
			pods:  map[string][]string{"gold": {"g0"}, "standard": {"s0"}},
			drain: []string{"g0"},
			steps: []step{{wantPod: "s0", wantSource: "pool:standard"}},
		},
		"merchant pool first, then its fallback": {
			pods: map[string][]string{"merchant:acme": {"m0"}, "gold": {"g0"}, "standard": {"s0"}},
			merchants: map[string]string{
				"acme": `{"tier":"gold","pool":"acme","fallback":["standard"]}`,
			},
			steps: []step{
				{merchant: "acme", wantPod: "m0", wantSource: "merchant:acme"},
				{merchant: "acme", wantPod: "s0", wantSource: "pool:standard"},
				// gold is not in acme's fallback: nothing left for acme...
				{merchant: "acme", wantReason: allocator.ReasonAtCapacity},
				// ...while an unknown merchant walks the default chain.
				{merchant: "other", wantPod: "g0", wantSource: "pool:gold"},
			},
		},
		"malformed merchant config falls back to the default chain": {
			pods:      map[string][]string{"gold": {"g0"}},
			merchants: map[string]string{"bad": `{not json`},
			steps:     []step{{merchant: "bad", wantPod: "g0", wantSource: "pool:gold"}},
		},
		"fallback with an unknown tier skips it": {
			pods:      map[string][]string{"standard": {"s0"}},
			merchants: map[string]string{"m": `{"fallback":["platinum","standard"]}`},
			steps:     []step{{merchant: "m", wantPod: "s0", wantSource: "pool:standard"}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			forEachBackend(t, func(t *testing.T, rdb redis.UniversalClient) {
				ctx := context.Background()
				a := allocatortest.New(t, rdb)
				for tier, pods := range tc.pods {
					register(t, a, tier, pods...)
				}
				for _, p := range tc.drain {
					if _, err := a.Drain(ctx, p); err != nil {
						t.Fatal(err)
					}
				}
				for id, raw := range tc.merchants {
					rdb.HSet(ctx, a.Keys().MerchantConfig(), id, raw)
				}
				for i, s := range tc.steps {
					al, err := a.Allocate(ctx, allocator.Request{CallID: callID(i), MerchantID: s.merchant})
					if s.wantReason != "" {
						var nc *allocator.NoCapacityError
						if !errors.As(err, &nc) || nc.Reason != s.wantReason {
							t.Fatalf("step %d: err = %v, want %s", i, err, s.wantReason)
						}
						if rdb.Exists(ctx, a.Keys().Call(callID(i))).Val() != 0 {
							t.Fatalf("step %d: a failed allocation left its call info behind", i)
						}
						continue
					}
					if err != nil || al.PodName != s.wantPod || al.SourcePool != s.wantSource {
						t.Fatalf("step %d: got %+v, %v; want %s from %s", i, al, err, s.wantPod, s.wantSource)
					}
				}
			})
		})
	}
}

// A failed allocation leaves no key of its own behind (the predecessor left
// a 30 s lock key per failed call: 20k keys after 10 s of an empty pool).
// The one thing refusals write is the demand signal: its pending calls of
// the tier and of the merchant, bounded (admission.demand.uncapped_calls
// for a merchant without a config) and with a TTL.
func TestFailedAllocationLeavesNothing(t *testing.T) {
	forEachBackend(t, func(t *testing.T, rdb redis.UniversalClient) {
		ctx := context.Background()
		a := allocatortest.New(t, rdb)
		before := rdb.DBSize(ctx).Val()
		for i := range 50 {
			if _, err := a.Allocate(ctx, allocator.Request{CallID: callID(i), MerchantID: "acme"}); !errors.Is(err, allocator.ErrNoCapacity) {
				t.Fatalf("err = %v, want no capacity", err)
			}
		}
		demand := []string{a.Keys().DemandPending("basic"), a.Keys().DemandMerchant("")}
		for _, k := range demand {
			if n := rdb.ZCard(ctx, k).Val(); n != allocator.DefaultUncappedCalls {
				t.Errorf("%s holds %d calls, want the bound, %d", k, n, allocator.DefaultUncappedCalls)
			}
			if rdb.PTTL(ctx, k).Val() <= 0 {
				t.Fatalf("demand key %s has no TTL", k)
			}
		}
		if after := rdb.DBSize(ctx).Val() - int64(len(demand)); after != before {
			t.Fatalf("keys: %d before, %d after 50 failed allocations (the demand signal's aside)", before, after)
		}
	})
}

func TestInvalidIDsChangeNothing(t *testing.T) {
	rdb := backends[1].open(t)
	ctx := context.Background()
	a := allocatortest.New(t, rdb)
	register(t, a, "gold", "g0")
	before := rdb.DBSize(ctx).Val()
	bad := []string{"", "a:b", "CA 1", "x\x00y", string(make([]byte, allocator.MaxIDLength+1)), "../../etc", "CA*"}
	for _, id := range bad {
		if _, err := a.Allocate(ctx, allocator.Request{CallID: id}); !errors.Is(err, allocator.ErrInvalidID) {
			t.Errorf("allocate %q: err = %v, want ErrInvalidID", id, err)
		}
		if id != "" {
			if _, err := a.Allocate(ctx, allocator.Request{CallID: "CA1", MerchantID: id}); !errors.Is(err, allocator.ErrInvalidID) {
				t.Errorf("allocate with merchant %q: err = %v, want ErrInvalidID", id, err)
			}
		}
		if _, err := a.Release(ctx, id); !errors.Is(err, allocator.ErrInvalidID) {
			t.Errorf("release %q: err = %v", id, err)
		}
		if _, err := a.Drain(ctx, id); !errors.Is(err, allocator.ErrInvalidID) {
			t.Errorf("drain %q: err = %v", id, err)
		}
	}
	if after := rdb.DBSize(ctx).Val(); after != before {
		t.Fatalf("keys: %d before, %d after rejected requests", before, after)
	}
}
