package main

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/edge-voice/edge/config"
)

// The README's configuration table lists every key edge has, and no key it
// does not have: docs that match the code.
func TestREADMEListsEveryConfigKey(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	section := string(readme)
	start := strings.Index(section, "## Configuration")
	end := strings.Index(section[start+1:], "\n## ")
	section = section[start : start+1+end]
	row := regexp.MustCompile("(?m)^\\| `([a-z_.]+)` \\|")
	var documented []string
	for _, m := range row.FindAllStringSubmatch(section, -1) {
		documented = append(documented, m[1])
	}

	var keys []string
	for _, line := range strings.Split(config.Default().String(), "\n") {
		if key, _, ok := strings.Cut(line, ":"); ok && key != "" {
			keys = append(keys, key)
		}
	}
	keys = append(keys, "default_chain") // read with tiers, not a field of its own
	for _, k := range keys {
		if !slices.Contains(documented, k) {
			t.Errorf("config key %s is missing from the README's configuration table", k)
		}
	}
	for _, k := range documented {
		if !slices.Contains(keys, k) {
			t.Errorf("the README documents %s, which is not a config key", k)
		}
	}
}
