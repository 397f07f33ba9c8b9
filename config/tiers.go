package config

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/edge-voice/edge/allocator"
)

// parseTiers turns the raw `tiers` and `default_chain` values (nil when
// unset) into a tier config. It does not validate: Config.Validate does.
func parseTiers(raw, chain any) (allocator.TierConfig, error) {
	tc := allocator.DefaultTiers()
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
	if s, ok := raw.(string); ok {
		s = strings.TrimSpace(s)
		if !strings.HasPrefix(s, "[") {
			var steps []string
			for step := range strings.SplitSeq(s, ",") {
				if step = strings.TrimSpace(step); step != "" {
					steps = append(steps, step)
				}
			}
			return steps, nil
		}
		if err := json.Unmarshal([]byte(s), &raw); err != nil {
			return nil, fmt.Errorf("%s: %q: not a JSON array of strings: %v", path, s, err)
		}
	}
	items, ok := raw.([]any)
	if !ok {
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
