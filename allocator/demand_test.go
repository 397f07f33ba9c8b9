package allocator_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/edge-voice/edge/allocator"
	"github.com/edge-voice/edge/allocator/allocatortest"
)

// An autoscaler needs to know how many pods the calls need. The
// demand of a pool is its live calls plus the calls refused for want of a
// pod in the last minute (charged to the last tier of their chain), in
// pods of its capacity; every replica reads the same numbers from Redis.
func TestDemandSignal(t *testing.T) {
	forEachBackend(t, func(t *testing.T, rdb redis.UniversalClient) {
		ctx := context.Background()
		a := allocatortest.New(t, rdb)
		register(t, a, "standard", "s0")
		register(t, a, "basic", "b0") // max_concurrent 3
		for i := range 4 {
			mustAllocate(t, a, fmt.Sprintf("C%d", i), "")
		}
		for i := range 5 {
			if _, err := a.Allocate(ctx, allocator.Request{CallID: fmt.Sprintf("R%d", i)}); !errors.Is(err, allocator.ErrNoCapacity) {
				t.Fatalf("R%d: %v, want no capacity", i, err)
			}
		}
		// A refusal by policy (the merchant's cap) is not demand for pods.
		one := 1
		if err := a.SetMerchantConfig(ctx, "acme", allocator.MerchantConfig{MaxCalls: &one, Fallback: []string{"standard"}}); err != nil {
			t.Fatal(err)
		}
		rdb.ZAdd(ctx, a.Keys().MerchantCalls("acme"), redis.Z{Score: 1e15, Member: "elsewhere"})
		a.Allocate(ctx, allocator.Request{CallID: "P1", MerchantID: "acme"})

		got, err := a.Demand(ctx)
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]allocator.TierDemand{
			"standard": {Tier: "standard", Calls: 1, PodCapacity: 1, Pods: 1},
			"basic":    {Tier: "basic", Calls: 3, Refused: 5, PodCapacity: 3, Pods: 3},
			"gold":     {Tier: "gold", PodCapacity: 1},
		}
		for _, d := range got {
			if w, ok := want[d.Tier]; ok && d != w {
				t.Errorf("demand of %s = %+v, want %+v", d.Tier, d, w)
			}
		}
		reg := prometheus.NewPedanticRegistry()
		reg.MustRegister(allocator.NewPoolCollector(a))
		families, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		pods := map[string]float64{}
		for _, f := range families {
			if f.GetName() != "edge_tier_demand_pods" {
				continue
			}
			for _, m := range f.GetMetric() {
				pods[m.GetLabel()[0].GetValue()] = m.GetGauge().GetValue()
			}
		}
		if fmt.Sprint(pods) != "map[basic:3 gold:0 standard:1]" {
			t.Fatalf("edge_tier_demand_pods = %v, want basic 3, gold 0, standard 1", pods)
		}
	})
}

// demandOf is the demand of one tier.
func demandOf(t *testing.T, a *allocator.Allocator, tier string) allocator.TierDemand {
	t.Helper()
	all, err := a.Demand(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range all {
		if d.Tier == tier {
			return d
		}
	}
	t.Fatalf("no demand for tier %s in %+v", tier, all)
	return allocator.TierDemand{}
}

// One caller could move the demand signal as far as it liked: a single
// generic-API token asking for new call ids drove edge_tier_demand_pods to
// 120-139 for a one-pod tier. The signal counts only what admission would
// have admitted had there been pods: a refused call once however often it
// asks, a merchant's refused calls up to its max_calls less its live
// calls, a merchant without a cap up to admission.demand.uncapped_calls,
// and every call whose merchant has no config (or none at all) up to that
// bound together, whatever merchant ids a caller makes up.
func TestDemandCountsOnlyWhatAdmissionWouldAdmit(t *testing.T) {
	forEachBackend(t, func(t *testing.T, rdb redis.UniversalClient) {
		ctx := context.Background()
		a := allocatortest.New(t, rdb)
		register(t, a, "gold", "g0")
		three := 3
		if err := a.SetMerchantConfig(ctx, "acme", allocator.MerchantConfig{MaxCalls: &three, Fallback: []string{"gold"}}); err != nil {
			t.Fatal(err)
		}
		if err := a.SetMerchantConfig(ctx, "open", allocator.MerchantConfig{Fallback: []string{"standard"}}); err != nil {
			t.Fatal(err)
		}
		mustAllocate(t, a, "live", "acme") // g0, the tier's one pod
		ask := func(call, merchant string) {
			t.Helper()
			_, err := a.Allocate(ctx, allocator.Request{CallID: call, MerchantID: merchant, Creator: "token:crm"})
			if !errors.Is(err, allocator.ErrNoCapacity) {
				t.Fatalf("allocate %s (%s): %v, want no capacity", call, merchant, err)
			}
		}
		for i := range 130 {
			ask(fmt.Sprintf("acme-%d", i), "acme")
		}
		for range 5 {
			ask("acme-0", "acme") // the same call asking again
		}
		if d := demandOf(t, a, "gold"); d.Refused != 2 || d.Pods != 3 {
			t.Errorf("gold after 130 refused calls of a merchant capped at 3 with 1 live = %+v, want 2 refused, 3 pods", d)
		}
		for i := range 100 {
			ask(fmt.Sprintf("open-%d", i), "open")
			ask(fmt.Sprintf("made-up-%d", i), fmt.Sprintf("nobody-%d", i))
			ask(fmt.Sprintf("none-%d", i), "")
		}
		if d := demandOf(t, a, "standard"); d.Refused != 20 {
			t.Errorf("standard after 100 refused calls of an uncapped merchant = %+v, want 20 refused (the default bound)", d)
		}
		if d := demandOf(t, a, "basic"); d.Refused != 20 {
			t.Errorf("basic after 200 refused calls of made-up merchants and none = %+v, want 20 refused, the one shared bound", d)
		}
	})
}
