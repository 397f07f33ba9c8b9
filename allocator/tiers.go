package allocator

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"sort"
	"strings"
)

// TierType says how a tier's pods take calls.
type TierType string

const (
	// Exclusive pods take one call at a time (available pods in a SET).
	Exclusive TierType = "exclusive"
	// Shared pods take up to MaxConcurrent calls (available pods in a ZSET
	// scored by calls in progress).
	Shared TierType = "shared"
)

// DefaultMaxConcurrent is the predecessor's default for a shared tier whose
// max_concurrent is unset.
const DefaultMaxConcurrent = 5

// merchantStep prefixes a chain step that names a merchant's dedicated pool.
const merchantStep = "merchant:"

// Placement says which pod of a shared tier a new call goes to.
type Placement string

const (
	// Spread: least loaded first (the default, and all there was before):
	// calls spread over the pods, each pod's load stays low.
	Spread Placement = "spread"
	// Pack: most loaded below max_concurrent first: calls fill pods one
	// after another, so whole pods fall idle for scale-down.
	Pack Placement = "pack"
)

// Tier is one tier of the tier config.
type Tier struct {
	Type          TierType `json:"type"`
	Target        int      `json:"target"`
	MaxConcurrent int      `json:"max_concurrent,omitempty"`
	// Placement applies to shared tiers; "" means Spread.
	Placement Placement `json:"placement,omitempty"`
}

// effectivePlacement is the tier's placement with the default applied.
func (t Tier) effectivePlacement() Placement {
	if t.Placement == "" {
		return Spread
	}
	return t.Placement
}

// TierConfig is the tier config: the tiers and the default fallback chain. It
// is what `voice:tier:config` holds, always written as the envelope shape.
type TierConfig struct {
	Tiers        map[string]Tier `json:"tiers"`
	DefaultChain []string        `json:"default_chain"`
}

// ParseTierConfig reads a tier config in any of the three shapes the
// predecessor accepted:
//
//	{"tiers":{"gold":{"type":"exclusive","target":1}},"default_chain":["gold"]}  envelope
//	{"gold":{"type":"exclusive","target":1},"basic":{"type":"shared",...}}       flat map of tiers
//	{"gold":1,"standard":2}                                                     tier name -> target
//
// The two flat shapes carry no chain: the default chain is then the exclusive
// tiers by name, then the shared tiers by name. In the target-only shape every
// tier is exclusive. Shared tiers without max_concurrent get
// DefaultMaxConcurrent. The result is not validated: call Validate.
func ParseTierConfig(data []byte) (TierConfig, error) {
	var top map[string]json.RawMessage
	if err := decodeStrict(data, &top); err != nil {
		return TierConfig{}, fmt.Errorf("%w: tier config is not a JSON object: %v", ErrInvalidConfig, err)
	}
	var tc TierConfig
	switch {
	case isObject(top["tiers"]):
		if err := decodeStrict(data, &tc); err != nil {
			return TierConfig{}, fmt.Errorf("%w: tier config envelope: %v", ErrInvalidConfig, err)
		}
	case allNumbers(top):
		tc.Tiers = make(map[string]Tier, len(top))
		for name, raw := range top {
			var target int
			if err := json.Unmarshal(raw, &target); err != nil {
				return TierConfig{}, fmt.Errorf("%w: tier %q: target %s is not an integer", ErrInvalidConfig, name, raw)
			}
			tc.Tiers[name] = Tier{Type: Exclusive, Target: target}
		}
	default:
		tc.Tiers = make(map[string]Tier, len(top))
		for name, raw := range top {
			var t Tier
			if err := decodeStrict(raw, &t); err != nil {
				return TierConfig{}, fmt.Errorf("%w: tier %q: %v", ErrInvalidConfig, name, err)
			}
			tc.Tiers[name] = t
		}
	}
	for name, t := range tc.Tiers {
		if t.Type == Shared && t.MaxConcurrent == 0 {
			t.MaxConcurrent = DefaultMaxConcurrent
			tc.Tiers[name] = t
		}
	}
	if len(tc.DefaultChain) == 0 {
		tc.DefaultChain = tc.derivedChain()
	}
	return tc, nil
}

// derivedChain orders exclusive tiers before shared ones (a shared tier is
// the last resort), each group by name, so the order never depends on map
// iteration.
func (tc TierConfig) derivedChain() []string {
	names := make([]string, 0, len(tc.Tiers))
	for name := range tc.Tiers {
		names = append(names, name)
	}
	sort.Slice(names, func(i, j int) bool {
		si, sj := tc.Tiers[names[i]].Type == Shared, tc.Tiers[names[j]].Type == Shared
		if si != sj {
			return sj
		}
		return names[i] < names[j]
	})
	return names
}

// Validate checks the tier config and returns every problem, each naming the
// tier or chain position and the bad value.
func (tc TierConfig) Validate() error {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: "+format, append([]any{ErrInvalidConfig}, args...)...))
	}
	if len(tc.Tiers) == 0 {
		bad("tiers: at least one tier is required")
	}
	names := make([]string, 0, len(tc.Tiers))
	for name := range tc.Tiers {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		t := tc.Tiers[name]
		if err := ValidateID("tier name", name); err != nil {
			bad("tiers.%s: %v", name, err)
		}
		switch t.Type {
		case Exclusive:
			if t.MaxConcurrent != 0 {
				bad("tiers.%s.max_concurrent: only shared tiers take it (got %d)", name, t.MaxConcurrent)
			}
		case Shared:
			if t.MaxConcurrent < 1 {
				bad("tiers.%s.max_concurrent: must be >= 1 (got %d)", name, t.MaxConcurrent)
			}
		default:
			bad("tiers.%s.type: must be %q or %q (got %q)", name, Exclusive, Shared, t.Type)
		}
		if t.Target < 0 {
			bad("tiers.%s.target: must be >= 0 (got %d)", name, t.Target)
		}
		switch t.Placement {
		case "", Spread:
		case Pack:
			if t.Type != Shared {
				bad("tiers.%s.placement: %q applies to shared tiers only (an exclusive pod takes one call)", name, Pack)
			}
		default:
			bad("tiers.%s.placement: must be %q or %q (got %q)", name, Spread, Pack, t.Placement)
		}
	}
	if len(tc.DefaultChain) == 0 {
		bad("default_chain: at least one tier is required")
	}
	if err := tc.validateChain("default_chain", tc.DefaultChain); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// validateChain checks a fallback chain against the tiers: every step a known
// tier or "merchant:<id>", no step twice.
func (tc TierConfig) validateChain(field string, chain []string) error {
	var errs []error
	seen := make(map[string]bool, len(chain))
	for i, step := range chain {
		if seen[step] {
			errs = append(errs, fmt.Errorf("%w: %s[%d]: %q appears twice", ErrInvalidConfig, field, i, step))
		}
		seen[step] = true
		if id, ok := strings.CutPrefix(step, merchantStep); ok {
			if err := ValidateID("merchant pool", id); err != nil {
				errs = append(errs, fmt.Errorf("%w: %s[%d]: %v", ErrInvalidConfig, field, i, err))
			}
			continue
		}
		if _, ok := tc.Tiers[step]; !ok {
			errs = append(errs, fmt.Errorf("%w: %s[%d]: unknown tier %q", ErrInvalidConfig, field, i, step))
		}
	}
	return errors.Join(errs...)
}

// Marshal encodes the config as the envelope stored in voice:tier:config.
func (tc TierConfig) Marshal() ([]byte, error) { return json.Marshal(tc) }

// MerchantConfig is one merchant's entry in voice:merchant:config.
type MerchantConfig struct {
	// Tier, when set, names a tier of the tier config tried right after
	// Pool, before the default chain (the predecessor stored it and never
	// read it). With a Fallback, which is the whole chain, it must be one
	// of its steps.
	Tier string `json:"tier,omitempty"`
	// Pool names the merchant's dedicated pool, tried first.
	Pool string `json:"pool,omitempty"`
	// Fallback replaces the default chain for this merchant.
	Fallback []string `json:"fallback,omitempty"`
	// MaxCalls caps the merchant's live calls: an allocation
	// beyond it is refused with ReasonMerchantAtCap. nil: no cap.
	MaxCalls *int `json:"max_calls,omitempty"`
	// RatePerSecond and RateBurst override admission.rate.merchant_* for
	// this merchant: the new calls it may start per second on
	// average, and at once after a quiet spell (default: the rate, at
	// least 1). nil: the global merchant rate, off when that is 0.
	RatePerSecond *float64 `json:"rate_per_second,omitempty"`
	RateBurst     *int     `json:"rate_burst,omitempty"`
}

// MaxMerchantCalls bounds max_calls: a larger cap is a typo, not a plan
// (no fleet edge serves has a million pods).
const MaxMerchantCalls = 1_000_000

// validateMerchantConfig checks a merchant entry against the tiers.
func (tc TierConfig) validateMerchantConfig(id string, mc MerchantConfig) error {
	var errs []error
	if err := ValidateID("merchant_id", id); err != nil {
		errs = append(errs, err)
	}
	if mc.Pool != "" {
		if err := ValidateID("pool", mc.Pool); err != nil {
			errs = append(errs, err)
		}
	}
	if err := tc.validateChain("fallback", mc.Fallback); err != nil {
		errs = append(errs, err)
	}
	if _, ok := tc.Tiers[mc.Tier]; mc.Tier != "" && !ok {
		errs = append(errs, fmt.Errorf("%w: tier: %q is not a tier (the tiers are %s); leave it out for the default chain",
			ErrInvalidConfig, mc.Tier, strings.Join(slices.Sorted(maps.Keys(tc.Tiers)), ", ")))
	} else if mc.Tier != "" && len(mc.Fallback) > 0 && !slices.Contains(mc.Fallback, mc.Tier) {
		// A tier allocation would never reach: refused rather than kept
		// and ignored.
		errs = append(errs, fmt.Errorf("%w: tier: %q is not in fallback %v, which is the merchant's whole chain: add the tier to the fallback where it belongs, or leave fallback out for the tier, then the default chain",
			ErrInvalidConfig, mc.Tier, mc.Fallback))
	}
	if mc.MaxCalls != nil && (*mc.MaxCalls < 1 || *mc.MaxCalls > MaxMerchantCalls) {
		errs = append(errs, fmt.Errorf("%w: max_calls: must be between 1 and %d (got %d); leave it out for no cap",
			ErrInvalidConfig, MaxMerchantCalls, *mc.MaxCalls))
	}
	if r := mc.RatePerSecond; r != nil && (math.IsNaN(*r) || *r <= 0 || *r > maxRatePerSecond) {
		errs = append(errs, fmt.Errorf("%w: rate_per_second: must be above 0 and at most %d (got %v); leave it out for admission.rate.merchant_per_second",
			ErrInvalidConfig, maxRatePerSecond, *r))
	}
	if b := mc.RateBurst; b != nil {
		switch {
		case *b < 1 || *b > maxRateBurst:
			errs = append(errs, fmt.Errorf("%w: rate_burst: must be between 1 and %d (got %d)", ErrInvalidConfig, maxRateBurst, *b))
		case mc.RatePerSecond == nil:
			errs = append(errs, fmt.Errorf("%w: rate_burst: needs rate_per_second", ErrInvalidConfig))
		}
	}
	return errors.Join(errs...)
}

func decodeStrict(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("trailing data after the JSON value")
	}
	return nil
}

func isObject(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	return len(raw) > 0 && raw[0] == '{'
}

func allNumbers(m map[string]json.RawMessage) bool {
	if len(m) == 0 {
		return false
	}
	for _, raw := range m {
		raw = bytes.TrimSpace(raw)
		if len(raw) == 0 || !(raw[0] == '-' || raw[0] >= '0' && raw[0] <= '9') {
			return false
		}
	}
	return true
}
