package providers

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/edge-voice/edge/allocator"
	"github.com/edge-voice/edge/internal/confcheck"
	"github.com/edge-voice/edge/plugins"
)

// BuiltinNames are the providers edge ships and runs as plugin processes of its
// own binary (`edge plugin <name>`) with no configuration.
var BuiltinNames = []string{"twilio", "plivo", "exotel", "telnyx"}

// Config is the providers' section of edge's configuration (keys
// providers.*). Every provider is a go-plugin process; the built-ins run
// from edge's own binary.
//
//	providers:
//	  webhook_base_url: https://edge.example.com
//	  plugins:
//	    twilio: {auth_tokens: "tok-new,tok-old", settings: {failure_mode: fallback}}
//	    acme:   {path: /opt/edge/acme-provider, sha256: "…", secrets: {api_key: "…"}}
//
// Environment: EDGE_PROVIDERS__PLUGINS__TWILIO__AUTH_TOKENS=tok1,tok2.
type Config struct {
	// UnavailableAnswer is how a webhook is answered when edge cannot serve
	// for reasons of its own (Redis unreachable or timing out, an internal
	// error): UnavailableFallback (default) answers so that the provider
	// calls the number's fallback URL (a non-2xx status, 503, or the
	// provider's documented equivalent), where a second edge cluster can
	// take the call; UnavailableMarkup answers in the provider's failure
	// markup (a spoken hangup with HTTP 200 for Twilio and Plivo), for
	// numbers without a fallback URL. Refusals about the call (no capacity,
	// the merchant's cap or rate, an ended call) always keep the markup.
	// A plugin that is down or does not answer is a 503 either way.
	UnavailableAnswer string `koanf:"unavailable_answer"`
	// WebhookBaseURL is the http:// or https:// base providers call edge's
	// webhooks at, as configured in their consoles (edge usually sits
	// behind a TLS-terminating load balancer, so the request alone does not
	// say). Providers sign the full URL, so the plugins verify against this
	// base + path + query. It differs from public_base_url, the ws(s) base
	// of media URLs. Empty: the request's Host (and X-Forwarded-Proto/-Host
	// from a trusted proxy, see trusted_proxies); set it in production.
	WebhookBaseURL string `koanf:"webhook_base_url"`
	// Builtin runs the built-in providers (twilio, plivo, exotel, telnyx). Default
	// true. A built-in can also be disabled alone, or replaced by a binary.
	Builtin bool `koanf:"builtin" reload:"restart"`
	// RPCTimeout bounds each plugin RPC on the webhook path and the health
	// checks. Default 2s.
	RPCTimeout time.Duration `koanf:"rpc_timeout" reload:"restart"`
	// StartTimeout bounds a plugin's start, handshake and configuration.
	// Default 10s.
	StartTimeout time.Duration `koanf:"start_timeout" reload:"restart"`
	// HealthInterval is how often a running plugin is checked; two missed
	// checks restart it. Default 2s.
	HealthInterval time.Duration `koanf:"health_interval" reload:"restart"`
	// RestartBackoffMax caps the restart backoff of a crashing plugin
	// (100ms doubling). Default 30s.
	RestartBackoffMax time.Duration `koanf:"restart_backoff_max" reload:"restart"`
	// NonceTTL is how long a provider's nonce (Plivo's V3 nonce, which
	// Plivo sends fresh with every request) is remembered in Redis, shared
	// by every replica: a webhook whose nonce was seen within it is a
	// replay and gets 403. It must outlast the window in which a replay
	// could beat the provider's own media socket to a live call (the
	// lease, allocator.lease_ttl); an ended call is kept ended by its
	// marks (allocator.ended_ttl). Default 15m; at most 24h.
	NonceTTL time.Duration `koanf:"nonce_ttl"`
	// Plugins are the providers by name ([a-z0-9_-], at most 32 bytes):
	// settings for the built-ins, or third-party binaries. Settings and
	// secrets reload without a restart; adding or removing a provider needs
	// one.
	Plugins map[string]Plugin `koanf:"plugins"`
}

// Plugin is one provider's configuration.
type Plugin struct {
	// Path is the plugin binary. Required for a provider that is not built
	// in; for a built-in it replaces edge's own implementation.
	Path string `koanf:"path"`
	// SHA256 (64 hex digits), when set, is checked against the binary
	// before every start.
	SHA256 string `koanf:"sha256"`
	// Disabled turns the provider off (its routes answer 404).
	Disabled bool `koanf:"disabled"`
	// AuthTokens are the provider's webhook credentials, all accepted
	// (rotation): Twilio and Plivo auth tokens, Exotel "user:password"
	// pairs, Telnyx's base64 public keys. A YAML list or a
	// comma-separated string (env). Empty: webhooks are not verified and
	// edge warns at start. These tokens are one account's: a webhook any
	// of them verifies may end or repeat a call another of them created.
	// For several accounts of one provider, use Accounts instead.
	AuthTokens Tokens `koanf:"auth_tokens"`
	// Accounts are several accounts of the provider, by label (Twilio:
	// the AccountSid; Plivo: the auth id; Exotel: a name), instead of
	// AuthTokens. A call belongs to the account whose credentials verified
	// the webhook that created it: status callbacks and repeats of it are
	// taken only from that account, and an account bound to merchants
	// allocates only for them. Built-ins twilio, plivo and exotel; a
	// third-party plugin must report the account (docs/plugins.md).
	Accounts map[string]Account `koanf:"accounts"`
	// WebhookBaseURL overrides providers.webhook_base_url for this provider.
	WebhookBaseURL string `koanf:"webhook_base_url"`
	// UnavailableAnswer overrides providers.unavailable_answer for this
	// provider ("": the providers' setting): numbers of one provider may
	// have a fallback URL while another's have none.
	UnavailableAnswer string `koanf:"unavailable_answer"`
	// Settings are options handed to the plugin as they are (see
	// docs/plugins.md for the built-ins' keys). Not secret: logged.
	Settings map[string]string `koanf:"settings"`
	// Secrets are handed to the plugin like settings, never logged.
	Secrets map[string]Secret `koanf:"secrets"`
}

// Account is one provider account (Plugin.Accounts).
type Account struct {
	// AuthTokens are the account's credentials, newest first, all
	// accepted (rotation), as Plugin.AuthTokens: a YAML list or a
	// comma-separated string. Required.
	AuthTokens Tokens `koanf:"auth_tokens"`
	// Merchants bind the account to merchants (the webhook's
	// merchant_id): when set, the account's webhooks allocate only for
	// these, and a merchant some account lists is allocated for only by
	// the accounts that list it. Another merchant, or none, is refused in
	// the provider's failure markup. Empty: any merchant no other account
	// lists.
	Merchants []string `koanf:"merchants"`
}

// merchantAllowed reports whether account (one of accounts) may allocate
// for merchant: only for its merchants when it lists any, and for a
// merchant some account lists only when it is one of them.
func merchantAllowed(accounts map[string]Account, account, merchant string) bool {
	own := accounts[account].Merchants
	if len(own) > 0 {
		return slices.Contains(own, merchant)
	}
	for _, a := range accounts {
		if slices.Contains(a.Merchants, merchant) {
			return false
		}
	}
	return true
}

// accountsSupported are the built-ins that report the account of a
// webhook (plugins.WebhookResult.Account).
var accountsSupported = []string{"twilio", "plivo", "exotel"}

// PluginSettings is what the plugin gets with Configure: its settings,
// its secrets and its credentials (auth_tokens, or each account's as
// auth_tokens.<account>), in one map.
func (pl Plugin) PluginSettings() plugins.Settings {
	s := plugins.Settings{}
	maps.Copy(s, pl.Settings)
	for k, v := range pl.Secrets {
		s[k] = string(v)
	}
	if pl.AuthTokens != "" {
		s[plugins.SettingAuthTokens] = string(pl.AuthTokens)
	}
	for label, a := range pl.Accounts {
		s[plugins.AccountTokensPrefix+label] = string(a.AuthTokens)
	}
	return s
}

// SettingPath is the config key a key of PluginSettings came from, under
// base ("providers.plugins.<name>").
func (pl Plugin) SettingPath(base, key string) string {
	_, secret := pl.Secrets[key]
	switch label, account := strings.CutPrefix(key, plugins.AccountTokensPrefix); {
	case key == "":
		return base
	case key == plugins.SettingAuthTokens:
		return base + ".auth_tokens"
	case account && !secret:
		return base + ".accounts." + label + ".auth_tokens"
	case secret:
		return base + ".secrets." + key
	default:
		return base + ".settings." + key
	}
}

// Values of unavailable_answer.
const (
	UnavailableFallback = "fallback"
	UnavailableMarkup   = "markup"
)

// DefaultConfig is the providers' defaults.
func DefaultConfig() Config {
	return Config{
		UnavailableAnswer: UnavailableFallback,
		Builtin:           true,
		RPCTimeout:        2 * time.Second,
		StartTimeout:      10 * time.Second,
		HealthInterval:    2 * time.Second,
		RestartBackoffMax: 30 * time.Second,
		NonceTTL:          DefaultNonceTTL,
	}
}

// DefaultNonceTTL is providers.nonce_ttl's default.
const DefaultNonceTTL = 15 * time.Minute

// maxNonceTTL bounds providers.nonce_ttl: past a day a nonce guards
// nothing that the ended calls' marks do not.
const maxNonceTTL = 24 * time.Hour

// nonceTTL is NonceTTL in effect (0: the default).
func (c Config) nonceTTL() time.Duration {
	if c.NonceTTL <= 0 {
		return DefaultNonceTTL
	}
	return c.NonceTTL
}

var providerName = regexp.MustCompile(`^[a-z0-9_-]{1,32}$`)

// Validate checks names, binaries, checksums and URLs.
func (c Config) Validate() error {
	errs := []error{
		validateUnavailableAnswer("providers.unavailable_answer", c.UnavailableAnswer),
		validateWebhookBase("providers.webhook_base_url", c.WebhookBaseURL),
		confcheck.Positive("providers.rpc_timeout", c.RPCTimeout),
		confcheck.Positive("providers.start_timeout", c.StartTimeout),
		confcheck.Positive("providers.health_interval", c.HealthInterval),
		confcheck.Positive("providers.restart_backoff_max", c.RestartBackoffMax),
	}
	if c.NonceTTL < 0 || c.NonceTTL > maxNonceTTL {
		errs = append(errs, confcheck.Invalid("providers.nonce_ttl", c.NonceTTL,
			fmt.Sprintf("must be between 0 (the default, %s) and %s", DefaultNonceTTL, maxNonceTTL)))
	}
	for name, pl := range c.Plugins {
		path := "providers.plugins." + name
		if !providerName.MatchString(name) {
			errs = append(errs, confcheck.Invalid(path, name, "a provider name is [a-z0-9_-], at most 32 bytes"))
			continue
		}
		if pl.Path == "" && !slices.Contains(BuiltinNames, name) && !pl.Disabled {
			errs = append(errs, fmt.Errorf("%s.path: required for a provider that is not built in (%s)", path, strings.Join(BuiltinNames, ", ")))
		}
		if pl.SHA256 != "" {
			if b, err := hex.DecodeString(pl.SHA256); err != nil || len(b) != 32 {
				errs = append(errs, confcheck.Invalid(path+".sha256", pl.SHA256, "must be 64 hex digits"))
			}
			if pl.Path == "" {
				errs = append(errs, fmt.Errorf("%s.sha256: needs path", path))
			}
		}
		if strings.TrimSpace(string(pl.AuthTokens)) != string(pl.AuthTokens) {
			errs = append(errs, fmt.Errorf("%s.auth_tokens: has leading or trailing whitespace", path))
		}
		errs = append(errs, validateAccounts(path, name, pl))
		errs = append(errs, validateWebhookBase(path+".webhook_base_url", pl.WebhookBaseURL),
			validateUnavailableAnswer(path+".unavailable_answer", pl.UnavailableAnswer))
	}
	return errors.Join(errs...)
}

// validateUnavailableAnswer accepts "" too: the default (fallback) for
// the providers' setting, the providers' setting for a plugin's.
func validateUnavailableAnswer(path, s string) error {
	switch s {
	case "", UnavailableFallback, UnavailableMarkup:
		return nil
	}
	return confcheck.Invalid(path, s, `must be "fallback" or "markup"`)
}

// unavailableFallback reports whether provider name answers edge's own
// failures for the fallback URL: its override, else the providers'
// setting; fallback unless one says markup.
func (c Config) unavailableFallback(name string) bool {
	v := c.Plugins[name].UnavailableAnswer
	if v == "" {
		v = c.UnavailableAnswer
	}
	return v != UnavailableMarkup
}

func validateWebhookBase(path, s string) error {
	if s == "" {
		return nil
	}
	u, err := url.Parse(s)
	switch {
	case err != nil:
		return fmt.Errorf("%s: %q: not a URL", path, s)
	case u.Scheme != "http" && u.Scheme != "https":
		return confcheck.Invalid(path, s, "must be an http:// or https:// URL")
	case u.Host == "":
		return confcheck.Invalid(path, s, "must name a host")
	case u.RawQuery != "" || u.Fragment != "" || u.User != nil:
		return confcheck.Invalid(path, u.Redacted(), "must not have user info, a query or a fragment")
	}
	return nil
}

// Secret is a string that never prints: in String, the log (text and
// JSON) and JSON it shows as [redacted]. Secrets inside maps (the plugins'
// secrets) are hidden this way, where edge config's secret:"true" tag
// cannot reach.
type Secret string

func (s Secret) String() string {
	if s == "" {
		return ""
	}
	return confcheck.Redacted
}

// GoString hides the value from %#v too.
func (s Secret) GoString() string { return fmt.Sprintf("%q", s.String()) }

// LogValue implements slog.LogValuer.
func (s Secret) LogValue() slog.Value { return slog.StringValue(s.String()) }

// MarshalJSON implements json.Marshaler.
func (s Secret) MarshalJSON() ([]byte, error) { return json.Marshal(s.String()) }

// Tokens are credentials kept as one comma-separated Secret (the form the
// plugins take them in). Config accepts a list of them as well
// (TokensFromList).
type Tokens Secret

func (t Tokens) String() string { return Secret(t).String() }

// GoString hides the value from %#v too.
func (t Tokens) GoString() string { return Secret(t).GoString() }

// LogValue implements slog.LogValuer.
func (t Tokens) LogValue() slog.Value { return Secret(t).LogValue() }

// MarshalJSON implements json.Marshaler.
func (t Tokens) MarshalJSON() ([]byte, error) { return Secret(t).MarshalJSON() }

// TokensFromList joins a list of tokens into Tokens. A token that is not a
// string, is empty or holds a comma is refused: the comma separates them.
func TokensFromList(list []any) (Tokens, error) {
	out := make([]string, 0, len(list))
	for i, v := range list {
		s, ok := v.(string)
		switch {
		case !ok:
			return "", fmt.Errorf("item %d: want a string, got a %T", i, v)
		case strings.TrimSpace(s) == "":
			return "", fmt.Errorf("item %d is empty", i)
		case strings.Contains(s, ","):
			return "", fmt.Errorf("item %d holds a comma, which separates tokens", i)
		}
		out = append(out, s)
	}
	return Tokens(strings.Join(out, ",")), nil
}

// validateAccounts checks a provider's accounts: labels fit to store with
// a call, tokens present and each in one account only, merchants that can
// be merchant ids, and not beside auth_tokens. Errors name the key, never
// a token.
func validateAccounts(path, name string, pl Plugin) error {
	if len(pl.Accounts) == 0 {
		return nil
	}
	path += ".accounts"
	var errs []error
	if pl.AuthTokens != "" {
		errs = append(errs, fmt.Errorf("%s: set either auth_tokens (one account) or accounts, not both", path))
	}
	if slices.Contains(BuiltinNames, name) && !slices.Contains(accountsSupported, name) && pl.Path == "" {
		errs = append(errs, fmt.Errorf("%s: the built-in %s plugin does not report accounts (only %s do)", path, name,
			strings.Join(accountsSupported, ", ")))
	}
	owner := map[string]string{}
	for _, label := range slices.Sorted(maps.Keys(pl.Accounts)) {
		a, at := pl.Accounts[label], path+"."+label
		if !plugins.ValidAccount(label) {
			errs = append(errs, confcheck.Invalid(path, label, fmt.Sprintf("an account is named by [A-Za-z0-9_-], 1 to %d bytes", plugins.MaxAccountLength)))
			continue
		}
		tokens := plugins.SplitList(string(a.AuthTokens))
		switch {
		case len(tokens) == 0:
			errs = append(errs, fmt.Errorf("%s.auth_tokens: required", at))
		case strings.TrimSpace(string(a.AuthTokens)) != string(a.AuthTokens):
			errs = append(errs, fmt.Errorf("%s.auth_tokens: has leading or trailing whitespace", at))
		}
		for _, tok := range tokens {
			if other, ok := owner[tok]; ok && other != label {
				errs = append(errs, fmt.Errorf("%s.auth_tokens: a token of account %s is listed here too: a token may verify for one account only", at, other))
				break
			}
			owner[tok] = label
		}
		for i, m := range a.Merchants {
			if err := allocator.ValidateID("merchant_id", m); err != nil {
				errs = append(errs, confcheck.Invalid(fmt.Sprintf("%s.merchants[%d]", at, i), m, "not a merchant id ([A-Za-z0-9_.-], at most 128 bytes)"))
			}
		}
	}
	return errors.Join(errs...)
}
