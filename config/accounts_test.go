package config

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// A provider's accounts come from the file (tokens as a list or a
// string) or the environment (one variable per account's key, or the
// whole map as JSON); their tokens never show.
func TestProviderAccountsFromFileAndEnv(t *testing.T) {
	file := filepath.Join(t.TempDir(), "edge.yaml")
	os.WriteFile(file, []byte(`
providers:
  plugins:
    twilio:
      accounts:
        AC11111111111111111111111111111111: {auth_tokens: [secret-a1, secret-a0], merchants: [acme]}
        AC22222222222222222222222222222222: {auth_tokens: secret-b}
`), 0o600)
	cfg, err := Load([]string{"--config", file}, []string{
		"EDGE_PROVIDERS__PLUGINS__PLIVO__ACCOUNTS__MAONE__AUTH_TOKENS=secret-p1,secret-p0",
		`EDGE_PROVIDERS__PLUGINS__EXOTEL__ACCOUNTS={"One":{"auth_tokens":"u:secret-e","merchants":["beta"]}}`,
	})
	if err != nil {
		t.Fatal(err)
	}
	tw := cfg.Providers.Plugins["twilio"].Accounts
	if a := tw["AC11111111111111111111111111111111"]; a.AuthTokens != "secret-a1,secret-a0" || !slices.Equal(a.Merchants, []string{"acme"}) {
		t.Errorf("twilio account 1 = %#v", a)
	}
	if a := tw["AC22222222222222222222222222222222"]; a.AuthTokens != "secret-b" || a.Merchants != nil {
		t.Errorf("twilio account 2 = %#v", a)
	}
	// The environment's keys are lower-cased; its JSON keeps the case.
	if a := cfg.Providers.Plugins["plivo"].Accounts["maone"]; a.AuthTokens != "secret-p1,secret-p0" {
		t.Errorf("plivo accounts = %#v", cfg.Providers.Plugins["plivo"].Accounts)
	}
	if a := cfg.Providers.Plugins["exotel"].Accounts["One"]; a.AuthTokens != "u:secret-e" || !slices.Equal(a.Merchants, []string{"beta"}) {
		t.Errorf("exotel accounts = %#v", cfg.Providers.Plugins["exotel"].Accounts)
	}
	s := cfg.String()
	if strings.Contains(s, "secret-") || !strings.Contains(s, "providers.plugins.twilio.accounts.AC11111111111111111111111111111111.merchants: [acme]") {
		t.Errorf("String:\n%s", s)
	}
	if got := cfg.Providers.Plugins["twilio"].PluginSettings(); got["auth_tokens.AC22222222222222222222222222222222"] != "secret-b" || got["auth_tokens"] != "" {
		t.Errorf("the plugin's settings = %v", got)
	}
}

func TestProviderAccountsValidate(t *testing.T) {
	const sid = "AC11111111111111111111111111111111"
	for name, tc := range map[string]struct {
		yaml string
		want string
	}{
		"both forms":     {`twilio: {auth_tokens: x, accounts: {` + sid + `: {auth_tokens: y}}}`, "providers.plugins.twilio.accounts: set either auth_tokens (one account) or accounts, not both"},
		"no tokens":      {`twilio: {accounts: {` + sid + `: {merchants: [acme]}}}`, "providers.plugins.twilio.accounts." + sid + ".auth_tokens: required"},
		"bad label":      {`plivo: {accounts: {"a b": {auth_tokens: y}}}`, `providers.plugins.plivo.accounts: an account is named by [A-Za-z0-9_-], 1 to 64 bytes (got "a b")`},
		"shared token":   {`plivo: {accounts: {one: {auth_tokens: secret-shared}, two: {auth_tokens: [other, secret-shared]}}}`, "providers.plugins.plivo.accounts.two.auth_tokens: a token of account one is listed here too"},
		"bad merchant":   {`plivo: {accounts: {one: {auth_tokens: y, merchants: ["a/b"]}}}`, `providers.plugins.plivo.accounts.one.merchants[0]: not a merchant id`},
		"telnyx":         {`telnyx: {accounts: {one: {auth_tokens: y}}}`, "providers.plugins.telnyx.accounts: the built-in telnyx plugin does not report accounts"},
		"comma in token": {`twilio: {accounts: {` + sid + `: {auth_tokens: ["a,b"]}}}`, "accounts[" + sid + "].auth_tokens: item 0 holds a comma"},
	} {
		t.Run(name, func(t *testing.T) {
			file := filepath.Join(t.TempDir(), "edge.yaml")
			os.WriteFile(file, []byte("providers:\n  plugins:\n    "+tc.yaml+"\n"), 0o600)
			_, err := Load([]string{"--config", file}, nil)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Load = %v, want an error with %q", err, tc.want)
			}
			if strings.Contains(err.Error(), "secret-") {
				t.Errorf("the error shows a token: %v", err)
			}
		})
	}
}
