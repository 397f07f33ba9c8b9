package allocator_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/edge-voice/edge/allocator"
)

// Issue 10: nothing told an autoscaler how many pods the calls need. The
// demand of a pool is its live calls plus the calls refused for want of a
// pod in the last minute (charged to the last tier of their chain), in
// pods of its capacity; every replica reads the same numbers from Redis.
func TestDemandSignal(t *testing.T) {
	forEachBackend(t, func(t *testing.T, rdb redis.UniversalClient) {
		ctx := context.Background()
		a := newAllocator(t, rdb)
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
