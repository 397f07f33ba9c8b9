package allocator_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/edge-voice/edge/allocator"
	"github.com/edge-voice/edge/allocator/allocatortest"
)

// Spread (the default) fills a shared tier's least loaded pod first. A
// tier with placement pack fills the most loaded pod below max_concurrent
// first, so whole pods stay idle for scale-down.
func TestSharedPlacement(t *testing.T) {
	for name, c := range map[string]struct {
		placement allocator.Placement
		want      map[string]int // pod -> calls after 6 allocations
	}{
		"default spreads": {"", map[string]int{"b0": 2, "b1": 2, "b2": 2}},
		"spread":          {allocator.Spread, map[string]int{"b0": 2, "b1": 2, "b2": 2}},
		"pack":            {allocator.Pack, map[string]int{"b0": 3, "b1": 3, "b2": 0}},
	} {
		t.Run(name, func(t *testing.T) {
			forEachBackend(t, func(t *testing.T, rdb redis.UniversalClient) {
				a := allocatortest.New(t, rdb, func(c2 *allocator.Config) {
					c2.Tiers = allocator.TierConfig{
						Tiers:        map[string]allocator.Tier{"basic": {Type: allocator.Shared, Target: 3, MaxConcurrent: 3, Placement: c.placement}},
						DefaultChain: []string{"basic"},
					}
				})
				register(t, a, "basic", "b0", "b1", "b2")
				got := map[string]int{"b0": 0, "b1": 0, "b2": 0}
				for i := range 6 {
					got[mustAllocate(t, a, fmt.Sprintf("C%d", i), "").PodName]++
				}
				if c.placement == allocator.Pack {
					// Which pod fills first is the ZSET's order; what
					// matters is that two are full and one is idle.
					full, idle := 0, 0
					for _, n := range got {
						switch n {
						case 3:
							full++
						case 0:
							idle++
						}
					}
					if full != 2 || idle != 1 {
						t.Fatalf("pack placed %v, want two full pods and one idle", got)
					}
				} else if fmt.Sprint(got) != fmt.Sprint(c.want) {
					t.Fatalf("placed %v, want %v", got, c.want)
				}
				// Full is full either way: the seventh goes to the idle or
				// least loaded pod, the tenth finds none.
				for i := 6; i < 9; i++ {
					mustAllocate(t, a, fmt.Sprintf("C%d", i), "")
				}
				if _, err := a.Allocate(context.Background(), allocator.Request{CallID: "C9"}); !errors.Is(err, allocator.ErrNoCapacity) {
					t.Fatalf("tenth call on 3x3 slots: %v, want no capacity", err)
				}
				st, err := a.Status(context.Background())
				if err != nil {
					t.Fatal(err)
				}
				want := (allocator.Tier{Placement: c.placement}).EffectivePlacement()
				if len(st) != 1 || st[0].Placement != want {
					t.Fatalf("status = %+v, want placement %s", st, want)
				}
			})
		})
	}
}

func TestPlacementValidation(t *testing.T) {
	for name, c := range map[string]struct {
		tier allocator.Tier
		ok   bool
	}{
		"shared pack":    {allocator.Tier{Type: allocator.Shared, MaxConcurrent: 2, Placement: allocator.Pack}, true},
		"shared spread":  {allocator.Tier{Type: allocator.Shared, MaxConcurrent: 2, Placement: allocator.Spread}, true},
		"exclusive pack": {allocator.Tier{Type: allocator.Exclusive, Placement: allocator.Pack}, false},
		"unknown":        {allocator.Tier{Type: allocator.Shared, MaxConcurrent: 2, Placement: "random"}, false},
	} {
		t.Run(name, func(t *testing.T) {
			tc := allocator.TierConfig{Tiers: map[string]allocator.Tier{"t": c.tier}, DefaultChain: []string{"t"}}
			err := tc.Validate()
			if c.ok != (err == nil) {
				t.Fatalf("err = %v, want ok %v", err, c.ok)
			}
			if err != nil && !strings.Contains(err.Error(), "tiers.t.placement") {
				t.Fatalf("err = %v, want it to name tiers.t.placement", err)
			}
		})
	}
	// The stored JSON shape round-trips.
	tc, err := allocator.ParseTierConfig([]byte(`{"tiers":{"b":{"type":"shared","target":1,"max_concurrent":4,"placement":"pack"}},"default_chain":["b"]}`))
	if err != nil || tc.Tiers["b"].Placement != allocator.Pack {
		t.Fatalf("parse = %+v, %v", tc, err)
	}
}
