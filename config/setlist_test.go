package config

import (
	"slices"
	"strings"
	"testing"
)

// A list given as one JSON value through --set or the environment is the
// list the YAML file's form gives, for every list-typed key: auth_tokens
// (kept as a comma-separated string, providers.Tokens) included, for a
// provider and for one of its accounts. A bracketed value that is not a
// JSON list of strings is refused, naming the key.
func TestSetAndEnvTakeAJSONListForListKeys(t *testing.T) {
	const yamlFile = `
providers:
  plugins:
    twilio:
      auth_tokens: [tok-new, tok-old]
proxy:
  resume:
    tiers: [gold, basic]
`
	fromFile, err := loadT(t, yamlFile, nil)
	if err != nil {
		t.Fatal(err)
	}
	wantTokens := string(fromFile.Providers.Plugins["twilio"].AuthTokens)
	if wantTokens != "tok-new,tok-old" {
		t.Fatalf("the file's auth_tokens = %q", wantTokens)
	}

	for name, tc := range map[string]struct {
		env  []string
		args []string
	}{
		"--set":                            {args: []string{"--set", `providers.plugins.twilio.auth_tokens=["tok-new","tok-old"]`, "--set", `proxy.resume.tiers=["gold","basic"]`}},
		"--set space":                      {args: []string{"--set", `providers.plugins.twilio.auth_tokens= [ "tok-new" , "tok-old" ] `, "--set", `proxy.resume.tiers=["gold","basic"]`}},
		"environment":                      {env: []string{`EDGE_PROVIDERS__PLUGINS__TWILIO__AUTH_TOKENS=["tok-new","tok-old"]`, `EDGE_PROXY__RESUME__TIERS=["gold","basic"]`}},
		"the comma-separated string still": {args: []string{"--set", "providers.plugins.twilio.auth_tokens=tok-new,tok-old", "--set", `proxy.resume.tiers=["gold","basic"]`}},
	} {
		t.Run(name, func(t *testing.T) {
			cfg, err := loadT(t, "", tc.env, tc.args...)
			if err != nil {
				t.Fatal(err)
			}
			if got := string(cfg.Providers.Plugins["twilio"].AuthTokens); got != wantTokens {
				t.Errorf("auth_tokens = %q, want %q as from the file", got, wantTokens)
			}
			if got := cfg.Proxy.Resume.Tiers; !slices.Equal(got, fromFile.Proxy.Resume.Tiers) {
				t.Errorf("proxy.resume.tiers = %q, want %q as from the file", got, fromFile.Proxy.Resume.Tiers)
			}
		})
	}

	t.Run("an account's auth_tokens", func(t *testing.T) {
		cfg, err := loadT(t, "", nil, "--set", `providers.plugins.twilio.accounts.AC1.auth_tokens=["tok-a","tok-b"]`)
		if err != nil {
			t.Fatal(err)
		}
		if got := string(cfg.Providers.Plugins["twilio"].Accounts["AC1"].AuthTokens); got != "tok-a,tok-b" {
			t.Errorf("accounts.AC1.auth_tokens = %q, want tok-a,tok-b", got)
		}
	})

	for name, val := range map[string]string{
		"broken JSON":        `["tok-new",`,
		"not strings":        `[1, 2]`,
		"a comma inside one": `["a,b"]`,
	} {
		t.Run("refused: "+name, func(t *testing.T) {
			_, err := loadT(t, "", nil, "--set", "providers.plugins.twilio.auth_tokens="+val)
			if err == nil || !strings.Contains(err.Error(), "twilio") || !strings.Contains(err.Error(), "auth_tokens") {
				t.Errorf("--set auth_tokens=%s: err = %v, want one naming the key", val, err)
			}
		})
	}
}
