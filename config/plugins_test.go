package config

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestProvidersFromEnvAndFileKeepSecretsOut(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "edge.yaml")
	os.WriteFile(file, []byte(`
providers:
  webhook_base_url: https://edge.example.com
  plugins:
    acme:
      path: /opt/acme
      settings: {greeting: hello}
      secrets: {api_key: file-secret-1}
`), 0o600)
	cfg, err := Load([]string{"--config", file}, []string{"EDGE_PROVIDERS__PLUGINS__TWILIO__AUTH_TOKENS=env-secret-2,env-secret-3"})
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.Providers.Plugins["twilio"].AuthTokens; got != "env-secret-2,env-secret-3" {
		t.Errorf("twilio auth_tokens = %q", got)
	}
	if got := cfg.Providers.Plugins["acme"]; got.Path != "/opt/acme" || got.Settings["greeting"] != "hello" || got.Secrets["api_key"] != "file-secret-1" {
		t.Errorf("acme = %#v", got)
	}
	var text, js bytes.Buffer
	slog.New(slog.NewTextHandler(&text, nil)).Info("config", "config", cfg)
	slog.New(slog.NewJSONHandler(&js, nil)).Info("config", "config", cfg)
	raw, _ := json.Marshal(cfg.Providers)
	for what, out := range map[string]string{"String": cfg.String(), "text log": text.String(), "json log": js.String(), "json": string(raw)} {
		if strings.Contains(out, "secret-") {
			t.Errorf("%s shows a secret:\n%s", what, out)
		}
		if !strings.Contains(out, "hello") {
			t.Errorf("%s hides a plain setting:\n%s", what, out)
		}
	}
}

func TestProvidersValidate(t *testing.T) {
	for name, tc := range map[string]struct {
		env  string
		want string
	}{
		"bad name":                    {`EDGE_PROVIDERS__PLUGINS='{"Acme!":{"path":"/x"}}'`, "providers.plugins.Acme!"},
		"third party no path":         {`EDGE_PROVIDERS__PLUGINS='{"acme":{}}'`, "providers.plugins.acme.path: required"},
		"bad sha":                     {`EDGE_PROVIDERS__PLUGINS='{"acme":{"path":"/x","sha256":"zz"}}'`, "providers.plugins.acme.sha256"},
		"ws base":                     {"EDGE_PROVIDERS__WEBHOOK_BASE_URL=wss://edge.example", "providers.webhook_base_url"},
		"zero timeout":                {"EDGE_PROVIDERS__RPC_TIMEOUT=0s", "providers.rpc_timeout"},
		"unavailable answer":          {"EDGE_PROVIDERS__UNAVAILABLE_ANSWER=hangup", `providers.unavailable_answer: must be "fallback" or "markup" (got "hangup")`},
		"plugin's unavailable answer": {`EDGE_PROVIDERS__PLUGINS__TWILIO__UNAVAILABLE_ANSWER=say`, `providers.plugins.twilio.unavailable_answer: must be "fallback" or "markup"`},
	} {
		t.Run(name, func(t *testing.T) {
			env := strings.Replace(tc.env, "'", "", 2)
			_, err := Load(nil, []string{env})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Load(%s) = %v, want an error naming %q", env, err, tc.want)
			}
		})
	}
	if err := Default().Validate(); err != nil {
		t.Errorf("defaults: %v", err)
	}
}

// auth_tokens was a comma-separated string where generic_api.tokens is a
// list, and a YAML list was refused without saying how to write it. Both
// forms are accepted; a token holding a comma is refused, naming the key.
func TestAuthTokensAsAListOrAString(t *testing.T) {
	for name, tc := range map[string]struct {
		yaml, want, err string
	}{
		"list":         {yaml: "auth_tokens: [tok-new, tok-old]", want: "tok-new,tok-old"},
		"block list":   {yaml: "auth_tokens:\n        - tok-new\n        - tok-old", want: "tok-new,tok-old"},
		"string":       {yaml: "auth_tokens: tok-new,tok-old", want: "tok-new,tok-old"},
		"comma inside": {yaml: `auth_tokens: ["a,b"]`, err: "auth_tokens"},
		"not a string": {yaml: "auth_tokens: [{a: b}]", err: "auth_tokens"},
	} {
		t.Run(name, func(t *testing.T) {
			cfg, err := loadT(t, "providers:\n  plugins:\n    twilio:\n      "+tc.yaml+"\n", nil)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want one naming %s", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := string(cfg.Providers.Plugins["twilio"].AuthTokens); got != tc.want {
				t.Fatalf("auth_tokens = %q, want %q", got, tc.want)
			}
		})
	}
}
