package allocator_test

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/edge-voice/edge/allocator"
)

func TestParseTierConfigShapes(t *testing.T) {
	cases := map[string]struct {
		in   string
		want allocator.TierConfig
	}{
		"envelope": {
			in: `{"tiers":{"gold":{"type":"exclusive","target":1},"basic":{"type":"shared","target":1,"max_concurrent":3}},"default_chain":["gold","basic"]}`,
			want: allocator.TierConfig{
				Tiers: map[string]allocator.Tier{
					"gold":  {Type: allocator.Exclusive, Target: 1},
					"basic": {Type: allocator.Shared, Target: 1, MaxConcurrent: 3},
				},
				DefaultChain: []string{"gold", "basic"},
			},
		},
		"flat map of tiers, chain derived: exclusive by name, then shared": {
			in: `{"standard":{"type":"exclusive","target":2},"basic":{"type":"shared","target":1},"gold":{"type":"exclusive","target":1}}`,
			want: allocator.TierConfig{
				Tiers: map[string]allocator.Tier{
					"gold":     {Type: allocator.Exclusive, Target: 1},
					"standard": {Type: allocator.Exclusive, Target: 2},
					"basic":    {Type: allocator.Shared, Target: 1, MaxConcurrent: allocator.DefaultMaxConcurrent},
				},
				DefaultChain: []string{"gold", "standard", "basic"},
			},
		},
		"tier name to target": {
			in: `{"standard":2,"gold":1}`,
			want: allocator.TierConfig{
				Tiers: map[string]allocator.Tier{
					"gold":     {Type: allocator.Exclusive, Target: 1},
					"standard": {Type: allocator.Exclusive, Target: 2},
				},
				DefaultChain: []string{"gold", "standard"},
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := allocator.ParseTierConfig([]byte(tc.in))
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Fatalf("(-want +got):\n%s", d)
			}
			if err := got.Validate(); err != nil {
				t.Fatalf("Validate: %v", err)
			}
			// What edge stores is the envelope, and it reads back the same.
			data, _ := got.Marshal()
			again, err := allocator.ParseTierConfig(data)
			if err != nil || !cmp.Equal(got, again) {
				t.Fatalf("round trip: %v, %v", again, err)
			}
		})
	}
}

func TestTierConfigErrorsNameTheField(t *testing.T) {
	cases := map[string]struct {
		in   string
		want []string // substrings of the error
	}{
		"not JSON":           {`{`, []string{"not a JSON object"}},
		"unknown field":      {`{"tiers":{"gold":{"type":"exclusive","targt":1}}}`, []string{"targt"}},
		"bad type":           {`{"tiers":{"gold":{"type":"exclusiv"}},"default_chain":["gold"]}`, []string{"tiers.gold.type", `"exclusiv"`}},
		"negative target":    {`{"gold":-1}`, []string{"tiers.gold.target", "-1"}},
		"chain unknown tier": {`{"tiers":{"gold":{"type":"exclusive"}},"default_chain":["gold","platinum"]}`, []string{"default_chain[1]", `"platinum"`}},
		"chain duplicate":    {`{"tiers":{"gold":{"type":"exclusive"}},"default_chain":["gold","gold"]}`, []string{"default_chain[1]", "twice"}},
		"bad tier name":      {`{"tiers":{"go:ld":{"type":"exclusive"}},"default_chain":["go:ld"]}`, []string{"tiers.go:ld"}},
		"shared max below 1": {`{"tiers":{"b":{"type":"shared","max_concurrent":-2}},"default_chain":["b"]}`, []string{"tiers.b.max_concurrent", "-2"}},
		"target not integer": {`{"gold":1.5}`, []string{"gold", "1.5"}},
		"no tiers":           {`{"tiers":{},"default_chain":[]}`, []string{"at least one tier"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			tcfg, err := allocator.ParseTierConfig([]byte(tc.in))
			if err == nil {
				err = tcfg.Validate()
			}
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
}

func FuzzParseTierConfig(f *testing.F) {
	for _, seed := range []string{
		`{"tiers":{"gold":{"type":"exclusive","target":1}},"default_chain":["gold"]}`,
		`{"gold":{"type":"shared","target":1,"max_concurrent":3}}`,
		`{"gold":1,"standard":2}`,
		`{"tiers":{"a":{"type":"shared"}},"default_chain":["merchant:x","a"]}`,
		`[]`, `null`, `{"tiers":[]}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		tc, err := allocator.ParseTierConfig(data)
		if err != nil || tc.Validate() != nil {
			return
		}
		// A valid config survives the round trip through Redis' envelope.
		out, err := tc.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		again, err := allocator.ParseTierConfig(out)
		if err != nil || !cmp.Equal(tc, again) || again.Validate() != nil {
			t.Fatalf("round trip of %s: %+v, %v", out, again, err)
		}
	})
}

func FuzzValidateID(f *testing.F) {
	for _, seed := range []string{"CA123", "voice-agent-0", "a:b", "", "x y", "\xff", ".", "..", "..."} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if allocator.ValidateID("id", s) != nil {
			return
		}
		// An accepted id can never change which key it names.
		// Nor a URL path segment ("." and ".." mean something there).
		if strings.ContainsAny(s, ":*?[]{} \\/\x00\n") || len(s) > allocator.MaxIDLength || s == "" || s == "." || s == ".." {
			t.Fatalf("accepted %q", s)
		}
	})
}
