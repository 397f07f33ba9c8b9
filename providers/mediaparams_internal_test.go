package providers

import (
	"strings"
	"testing"

	"github.com/edge-voice/edge/plugins"
)

// A declaration a media URL could not carry as it is stops the plugin's
// start (launch refuses it), so a webhook can never ask for one.
func TestCompileMediaParamsRefusesBadDeclarations(t *testing.T) {
	nine := make([]plugins.MediaParam, 9)
	for i := range nine {
		nine[i] = plugins.MediaParam{Name: string(rune('a' + i)), Values: []string{"1"}}
	}
	for name, ds := range map[string][]plugins.MediaParam{
		"bad name":       {{Name: "a b", Values: []string{"1"}}},
		"empty name":     {{Name: "", Values: []string{"1"}}},
		"twice":          {{Name: "a", Values: []string{"1"}}, {Name: "a", Values: []string{"2"}}},
		"bad value":      {{Name: "a", Values: []string{"x/y"}}},
		"dot-dot value":  {{Name: "a", Values: []string{".."}}},
		"bad pattern":    {{Name: "a", Pattern: "("}},
		"allows nothing": {{Name: "a"}},
		"too many":       nine,
	} {
		if _, err := compileMediaParams(ds); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	m, err := compileMediaParams([]plugins.MediaParam{{Name: "tag", Pattern: "[a-z]+|x/y"}})
	if err != nil {
		t.Fatal(err)
	}
	// A pattern cannot widen what a URL carries, nor match a part.
	for _, v := range []string{"x/y", "abc1", "1abc"} {
		if q, err := m.query(map[string]string{"tag": v}); err == nil {
			t.Errorf("tag=%s allowed: %q", v, q)
		}
	}
	if q, err := m.query(map[string]string{"tag": "abc"}); err != nil || !strings.HasPrefix(q, "tag=abc") {
		t.Errorf("tag=abc: %q, %v", q, err)
	}
}
