package config

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/edge-voice/edge/allocator"
)

// DefaultTiers is the tier config used when none is given: two exclusive
// "standard" pods, then one "basic" pod shared by up to 4 calls. It suits
// the embedded development mode.
//
//	{"tiers":{"standard":{"type":"exclusive","target":2},
//	          "basic":{"type":"shared","target":1,"max_concurrent":4}},
//	 "default_chain":["standard","basic"]}
func DefaultTiers() allocator.TierConfig {
	return allocator.TierConfig{
		Tiers: map[string]allocator.Tier{
			"standard": {Type: allocator.Exclusive, Target: 2},
			"basic":    {Type: allocator.Shared, Target: 1, MaxConcurrent: 4},
		},
		DefaultChain: []string{"standard", "basic"},
	}
}

// parseTiers turns the raw `tiers` and `default_chain` values (nil when
// unset) into a tier config. It does not validate: Config.Validate does.
func parseTiers(raw, chain any) (allocator.TierConfig, error) {
	tc := DefaultTiers()
	if s, ok := raw.(string); ok && strings.TrimSpace(s) == "" {
		raw = nil // EDGE_TIERS= means "not set", like an absent key
	}
	if raw != nil {
		var data []byte
		switch v := raw.(type) {
		case string:
			data = []byte(v)
		case map[string]any:
			var err error
			if data, err = json.Marshal(v); err != nil {
				return tc, fmt.Errorf("tiers: %w", err)
			}
		default:
			return tc, fmt.Errorf("tiers: must be a map or a JSON object (got %T)", raw)
		}
		var err error
		if tc, err = allocator.ParseTierConfig(data); err != nil {
			return tc, fmt.Errorf("tiers: %w", err)
		}
	}
	if chain != nil {
		steps, err := parseChain(chain)
		if err != nil {
			return tc, err
		}
		tc.DefaultChain = steps
	}
	return tc, nil
}

// parseChain reads default_chain from a YAML list, a JSON array string or a
// comma-separated string (the last two come from the environment or --set).
func parseChain(raw any) ([]string, error) {
	const path = "default_chain"
	var items []any
	switch v := raw.(type) {
	case []any:
		items = v
	case string:
		s := strings.TrimSpace(v)
		if strings.HasPrefix(s, "[") {
			var steps []string
			if err := json.Unmarshal([]byte(s), &steps); err != nil {
				return nil, fmt.Errorf("%s: %q: not a JSON array of strings: %v", path, s, err)
			}
			return steps, nil
		}
		var steps []string
		for step := range strings.SplitSeq(s, ",") {
			if step = strings.TrimSpace(step); step != "" {
				steps = append(steps, step)
			}
		}
		return steps, nil
	default:
		return nil, fmt.Errorf("%s: must be a list of tier names (got %T)", path, raw)
	}
	steps := make([]string, 0, len(items))
	for i, it := range items {
		s, ok := it.(string)
		if !ok {
			return nil, fmt.Errorf("%s[%d]: must be a tier name (got %v)", path, i, it)
		}
		steps = append(steps, s)
	}
	return steps, nil
}
