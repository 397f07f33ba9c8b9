package config

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/edge-voice/edge/allocator"
)

func TestLoadTierShapes(t *testing.T) {
	exclusive := func(target int) allocator.Tier { return allocator.Tier{Type: allocator.Exclusive, Target: target} }
	shared := func(target, max int) allocator.Tier {
		return allocator.Tier{Type: allocator.Shared, Target: target, MaxConcurrent: max}
	}
	tests := map[string]struct {
		file string
		env  []string
		args []string
		want allocator.TierConfig
	}{
		"none: default tiers": {
			want: allocator.DefaultTiers(),
		},
		"envelope": {
			file: `
tiers:
  tiers:
    gold: {type: exclusive, target: 3}
    pool: {type: shared, target: 2, max_concurrent: 8}
  default_chain: [gold, pool]
`,
			want: allocator.TierConfig{
				Tiers:        map[string]allocator.Tier{"gold": exclusive(3), "pool": shared(2, 8)},
				DefaultChain: []string{"gold", "pool"},
			},
		},
		"flat map of tiers": {
			file: `
tiers:
  zeta: {type: exclusive, target: 1}
  alpha: {type: exclusive, target: 2}
  basic: {type: shared, target: 1}
`,
			want: allocator.TierConfig{
				Tiers: map[string]allocator.Tier{
					"zeta": exclusive(1), "alpha": exclusive(2), "basic": shared(1, allocator.DefaultMaxConcurrent),
				},
				DefaultChain: []string{"alpha", "zeta", "basic"},
			},
		},
		"map of targets": {
			file: "tiers:\n  gold: 1\n  standard: 2\n",
			want: allocator.TierConfig{
				Tiers:        map[string]allocator.Tier{"gold": exclusive(1), "standard": exclusive(2)},
				DefaultChain: []string{"gold", "standard"},
			},
		},
		"tier names with dots survive the key delimiter": {
			file: "tiers:\n  gold.v2: 1\n",
			want: allocator.TierConfig{
				Tiers:        map[string]allocator.Tier{"gold.v2": exclusive(1)},
				DefaultChain: []string{"gold.v2"},
			},
		},
		"top-level default_chain replaces the parsed one": {
			file: "tiers:\n  gold: 1\n  standard: 2\ndefault_chain: [standard, gold]\n",
			want: allocator.TierConfig{
				Tiers:        map[string]allocator.Tier{"gold": exclusive(1), "standard": exclusive(2)},
				DefaultChain: []string{"standard", "gold"},
			},
		},
		"default_chain alone reorders the default tiers": {
			env: []string{"EDGE_DEFAULT_CHAIN=basic, standard"},
			want: allocator.TierConfig{
				Tiers:        allocator.DefaultTiers().Tiers,
				DefaultChain: []string{"basic", "standard"},
			},
		},
		"JSON string in the file": {
			file: "tiers: '{\"gold\": 4}'\n",
			want: allocator.TierConfig{
				Tiers:        map[string]allocator.Tier{"gold": exclusive(4)},
				DefaultChain: []string{"gold"},
			},
		},
		"EDGE_TIERS envelope overrides the file": {
			file: "tiers:\n  gold: 1\n",
			env:  []string{`EDGE_TIERS={"tiers":{"x":{"type":"shared","target":1,"max_concurrent":2}},"default_chain":["x"]}`},
			want: allocator.TierConfig{
				Tiers:        map[string]allocator.Tier{"x": shared(1, 2)},
				DefaultChain: []string{"x"},
			},
		},
		"--set default_chain as JSON": {
			args: []string{"--set", `default_chain=["basic","standard"]`},
			want: allocator.TierConfig{
				Tiers:        allocator.DefaultTiers().Tiers,
				DefaultChain: []string{"basic", "standard"},
			},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			cfg, err := loadT(t, tc.file, tc.env, tc.args...)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, cfg.Allocator.Tiers); diff != "" {
				t.Errorf("tiers (-want +got):\n%s", diff)
			}
		})
	}
}
