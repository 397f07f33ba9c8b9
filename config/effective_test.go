package config

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The effective configuration names each plugin's keys under its name
// (not one unnamed struct), hides every secret, keeps the file's key order
// in its JSON and gives the tiers as a JSON object.
func TestEffectiveNamesPluginsAndHidesSecrets(t *testing.T) {
	file := filepath.Join(t.TempDir(), "edge.yaml")
	os.WriteFile(file, []byte(`
admin_token: admin-secret-0123456789
redis: {url: "redis://:redis-secret@127.0.0.1:6379/0"}
generic_api:
  tokens: [{name: crm, token: crm-secret-0123456789, merchants: ["*"]}]
providers:
  plugins:
    acme:
      path: /opt/acme
      settings: {greeting: hello}
      secrets: {api_key: plugin-secret-1}
    twilio:
      auth_tokens: [twilio-secret-2]
`), 0o600)
	cfg, err := Load([]string{"--config", file}, nil)
	if err != nil {
		t.Fatal(err)
	}
	eff := cfg.Effective()
	raw, err := json.Marshal(eff)
	if err != nil {
		t.Fatal(err)
	}
	for _, out := range []string{string(raw), cfg.String()} {
		if strings.Contains(out, "secret-") {
			t.Errorf("shows a secret:\n%s", out)
		}
		for _, want := range []string{"providers.plugins.acme.path", "providers.plugins.twilio.auth_tokens", "greeting", "generic_api.tokens[0].name"} {
			if !strings.Contains(out, want) {
				t.Errorf("no %s in:\n%s", want, out)
			}
		}
		if strings.Contains(out, "{  ") || strings.Contains(out, "map[acme:{") {
			t.Errorf("a plugin block shows as an unnamed struct:\n%s", out)
		}
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	if m["redis.url"] != "redis://:xxxxx@127.0.0.1:6379/0" || m["admin_token"] != "[redacted]" || m["http.request_timeout"] != "10s" {
		t.Errorf("redis.url = %v, admin_token = %v, http.request_timeout = %v", m["redis.url"], m["admin_token"], m["http.request_timeout"])
	}
	if tiers, ok := m["tiers"].(map[string]any); !ok || tiers["default_chain"] == nil {
		t.Errorf("tiers = %#v, want a JSON object", m["tiers"])
	}
	// The JSON keeps the order of the entries.
	if first := strings.Index(string(raw), `"listen.public"`); first != 1 {
		t.Errorf("first key at %d, want listen.public first: %.80s", first, raw)
	}
	for k, v := range m {
		if v == nil {
			t.Errorf("%s is null, want a value ({} for an empty map)", k)
		}
	}
	if len(m) != len(eff) {
		t.Errorf("%d JSON keys for %d entries (a key repeated?)", len(m), len(eff))
	}
}
