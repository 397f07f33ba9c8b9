package allocator_test

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/edge-voice/edge/allocator"
	"github.com/edge-voice/edge/allocator/allocatortest"
	"github.com/edge-voice/edge/internal/testredis"
)

// The predecessor's status reports a tier that the tier config declares as
// a merchant's dedicated pool under the tier's own name, with the
// merchant pool's figures ({"type":"exclusive","assigned":2,"available":2}
// under pools.9shines). edge reported pools.9shines as 0/0 and the figures
// under merchant:9shines, and its pool gauges alike: the runbook's first
// check (the same pools as the predecessor's) failed. Every replica answers
// the same, the leader (which adopted the merchant tiers) or not.
func TestStatusReportsTierConfigMerchantPoolsUnderTheirTier(t *testing.T) {
	ctx := context.Background()
	rdb := testredis.Start(t).Client()
	tiers := func(c *allocator.Config) {
		c.Tiers = allocator.TierConfig{
			Tiers: map[string]allocator.Tier{
				"standard": {Type: allocator.Exclusive, Target: 1},
				"9shines":  {Type: allocator.Exclusive, Target: 2},
				"basic":    {Type: allocator.Shared, Target: 1, MaxConcurrent: 3},
			},
			DefaultChain: []string{"standard", "basic"},
		}
	}
	leader := allocatortest.New(t, rdb, tiers)
	other := allocatortest.New(t, rdb, tiers) // a replica that never led
	k := leader.Keys()
	rdb.HSet(ctx, k.MerchantConfig(), "9shines", `{"tier":"dedicated","pool":"9shines"}`)
	var pods []allocator.PodState
	for _, name := range []string{"p0", "p1", "p2", "p3"} {
		pods = append(pods, allocator.PodState{Name: name, Address: "127.0.0.1:1", Ready: true})
	}
	mustSync(t, leader, pods...)
	// A merchant pool made through the admin API, which the tier config
	// does not name, keeps edge's "merchant:<id>" row.
	register(t, leader, "merchant:acme", "m0")
	mustAllocate(t, leader, "CA-9", "9shines")

	want := []allocator.PoolStatus{
		{Tier: "9shines", Type: allocator.Exclusive, Assigned: 2, Available: 1, Calls: 1},
		{Tier: "standard", Type: allocator.Exclusive, Assigned: 1, Available: 1},
		{Tier: "basic", Type: allocator.Shared, Assigned: 1, Available: 1, Placement: allocator.Spread},
		{Tier: "merchant:acme", Type: allocator.Exclusive, Assigned: 1, Available: 1},
	}
	for name, a := range map[string]*allocator.Allocator{"leader": leader, "other replica": other} {
		got, err := a.Status(ctx)
		if err != nil {
			t.Fatal(err)
		}
		byTier := map[string]allocator.PoolStatus{}
		for _, p := range got {
			if _, dup := byTier[p.Tier]; dup {
				t.Errorf("%s: pool %s reported twice", name, p.Tier)
			}
			byTier[p.Tier] = p
		}
		gotList := make([]allocator.PoolStatus, 0, len(want))
		for _, w := range want {
			gotList = append(gotList, byTier[w.Tier])
		}
		if d := cmp.Diff(want, gotList); d != "" {
			t.Errorf("%s: status (-want +got):\n%s", name, d)
		}
		if p, ok := byTier["merchant:9shines"]; ok {
			t.Errorf("%s: the tier's figures are also reported as merchant:9shines: %+v", name, p)
		}

		reg := prometheus.NewPedanticRegistry()
		reg.MustRegister(allocator.NewPoolCollector(a))
		for _, g := range []struct {
			metric, tier string
			want         float64
		}{
			{"pool_assigned_pods", "9shines", 2},
			{"pool_available_pods", "9shines", 1},
			{"pool_assigned_pods", "merchant:acme", 1},
		} {
			if v := gauge(t, reg, g.metric, g.tier); v != g.want {
				t.Errorf("%s: %s{tier=%q} = %v, want %v", name, g.metric, g.tier, v, g.want)
			}
		}
		if v := gauge(t, reg, "pool_assigned_pods", "merchant:9shines"); v != -1 {
			t.Errorf("%s: pool_assigned_pods{tier=\"merchant:9shines\"} = %v, want no such series", name, v)
		}
	}
}

// gauge reads metric{tier} from reg, -1 when there is no such series.
func gauge(t *testing.T, reg *prometheus.Registry, metric, tier string) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != metric {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "tier" && l.GetValue() == tier {
					return m.GetGauge().GetValue()
				}
			}
		}
	}
	return -1
}

// releases_total carries the call's pool beside the result, so that the
// predecessor's smart_router_releases_total{pool,status} can be recorded
// from it (deploy/base/recording-rules.yaml).
func TestReleaseMetricsCarryTheSourcePool(t *testing.T) {
	ctx := context.Background()
	rdb := testredis.Start(t).Client()
	reg := prometheus.NewPedanticRegistry()
	a, err := allocator.New(rdb, allocator.Config{Tiers: allocatortest.Tiers()}, reg)
	if err != nil {
		t.Fatal(err)
	}
	register(t, a, "gold", "g0")
	mustAllocate(t, a, "CA1", "")
	if _, err := a.Release(ctx, "CA1"); err != nil {
		t.Fatal(err)
	}
	a.Release(ctx, "CA1") // not found
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, f := range families {
		if f.GetName() != "releases_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, l.GetName()+"="+l.GetValue())
			}
			got = append(got, fmt.Sprintf("%s %v", strings.Join(labels, ","), m.GetCounter().GetValue()))
		}
	}
	sort.Strings(got)
	want := []string{"result=not_found,source_pool= 1", "result=released,source_pool=pool:gold 1"}
	if d := cmp.Diff(want, got); d != "" {
		t.Fatalf("releases_total (-want +got):\n%s", d)
	}
}
