package config

import (
	"errors"
	"log/slog"
	"strings"
	"time"

	"github.com/edge-voice/edge/allocator"
	"github.com/edge-voice/edge/api"
	"github.com/edge-voice/edge/internal/confcheck"
	"github.com/edge-voice/edge/poolmgr"
	"github.com/edge-voice/edge/providers"
	"github.com/edge-voice/edge/proxy"
	"github.com/edge-voice/edge/tlsconf"
)

// API and Pools name the two components whose settings are several
// top-level sections; embedded (squashed) under these names, their fields
// stay where users know them: cfg.Listen, cfg.HTTP, cfg.Pods, cfg.Leader.
type (
	API   = api.Config
	Pools = poolmgr.Config
)

// Config is everything edge reads at start: each component's own Config as
// a section, plus the process's log and the Watcher's reload settings. A
// loaded Config is shared between goroutines (Watcher.Current): treat it as
// read-only.
//
// Struct tags, in the components' types too: `koanf` is the key (",squash":
// no key of its own); `reload:"restart"` marks a field (or a whole section)
// that a running edge cannot change, so the Watcher keeps its old value and
// reports it; `secret:"true"` (or "url" for a URL whose password is the
// secret) hides the value in String, LogValue and Redacted.
//
// To add a section: a tagged type with its defaults and Validate in the
// component's package, a field here, one line in Default and one in
// Validate.
type Config struct {
	// API: listen.*, public_base_url, admin_token, admin_auth.*, http.*
	// (package api).
	API `koanf:",squash"`
	// Log configures the process logger.
	Log Log `koanf:"log"`
	// Redis is the connection to the pool state.
	Redis allocator.RedisConfig `koanf:"redis" reload:"restart"`
	// Allocator holds the lease and TTL settings of allocations, and in
	// Allocator.Tiers the tiers parsed from the raw top-level keys `tiers`
	// and `default_chain` (see the package doc).
	Allocator allocator.Config `koanf:"allocator"`
	// Admission: admission.* (rate limits, waiting; docs/admission.md), linked into
	// Allocator.Admission.
	Admission allocator.AdmissionConfig `koanf:"admission"`
	// Pools: pods.*, pool.*, leader.* (package poolmgr).
	Pools `koanf:",squash"`
	// Reload configures the Watcher.
	Reload Reload `koanf:"reload" reload:"restart"`
	// Proxy configures the /ws/pod/ media proxy.
	Proxy proxy.Config `koanf:"proxy"`
	// Providers configures the provider plugins.
	Providers providers.Config `koanf:"providers"`
	// TLS makes the public listener terminate TLS (package tlsconf). The
	// paths are fixed for the process; the files are re-read on change.
	TLS tlsconf.PublicConfig `koanf:"tls" reload:"restart"`
	// AdminTLS does the same for the admin listener.
	AdminTLS tlsconf.Config `koanf:"admin_tls" reload:"restart"`
}

// Default returns the defaults: what edge runs with given no file, no
// environment and no flags (embedded Redis, static pods, local listeners).
// Each value is written once, in its component's DefaultConfig.
func Default() *Config {
	c := &Config{
		API:       api.DefaultConfig(),
		Log:       Log{Level: "info", Format: "text"},
		Redis:     allocator.DefaultRedisConfig(),
		Allocator: allocator.DefaultConfig(),
		Admission: allocator.DefaultAdmissionConfig(),
		Pools:     poolmgr.DefaultConfig(),
		Reload:    Reload{Interval: 2 * time.Second},
		Proxy:     proxy.DefaultConfig(),
		Providers: providers.DefaultConfig(),
		TLS:       tlsconf.DefaultPublicConfig(),
	}
	c.link()
	return c
}

// link copies the settings a component reads from another section, so that
// each component still takes its own section whole: the allocator's key
// prefix is redis.key_prefix, the proxy renews leases every
// allocator.renew_interval, media URLs are wss:// when tls.* is set, a
// short admin_token is refused only without admin_tls.*. The copies are
// not keys (koanf:"-").
func (c *Config) link() {
	c.Allocator.KeyPrefix = c.Redis.KeyPrefix
	c.Allocator.Admission = c.Admission
	c.Proxy.RenewInterval = c.Allocator.RenewInterval
	c.PublicTLS = c.TLS.Enabled()
	c.AdminListenerTLS = c.AdminTLS.Enabled()
}

// Validate returns every problem of c joined (errors.Join), each naming the
// key path and the bad value.
func (c *Config) Validate() error {
	return errors.Join(
		c.API.Validate(),
		c.Log.validate(),
		c.Redis.Validate(),
		c.Allocator.Validate(),
		c.Admission.Validate(),
		c.Pools.Validate(),
		c.Pods.ValidateStaticTiers(c.Allocator.Tiers),
		c.Reload.validate(),
		c.Proxy.Validate(),
		c.Providers.Validate(),
		c.TLS.Validate(),
		c.AdminTLS.Validate("admin_tls"),
	)
}

// normalize applies the forgiving rewrites (trailing slash, case) before
// validation, so that both the running config and Validate see one form.
func (c *Config) normalize() {
	c.PublicBaseURL = strings.TrimRight(strings.TrimSpace(c.PublicBaseURL), "/")
	c.Log.Level = strings.ToLower(strings.TrimSpace(c.Log.Level))
	c.Log.Format = strings.ToLower(strings.TrimSpace(c.Log.Format))
	c.Pods.Source = strings.ToLower(strings.TrimSpace(c.Pods.Source))
}

// Log configures the process logger.
type Log struct {
	// Level is "debug", "info", "warn" or "error". Default "info". Runtime:
	// wire SlogLevel into a slog.LevelVar from Watcher.OnChange.
	Level string `koanf:"level"`
	// Format is "text" or "json". Default "text".
	Format string `koanf:"format" reload:"restart"`
}

// SlogLevel is Level as a slog.Level; an invalid level reads as info.
func (l Log) SlogLevel() slog.Level {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(l.Level)); err != nil {
		return slog.LevelInfo
	}
	return lv
}

func (l Log) validate() error {
	var errs []error
	switch l.Level {
	case "debug", "info", "warn", "error":
	default:
		errs = append(errs, confcheck.Invalid("log.level", l.Level, "must be debug, info, warn or error"))
	}
	switch l.Format {
	case "text", "json":
	default:
		errs = append(errs, confcheck.Invalid("log.format", l.Format, "must be text or json"))
	}
	return errors.Join(errs...)
}

// Reload configures the Watcher (restart: its ticker is built once).
type Reload struct {
	// Interval is how often the config file is read and compared by hash.
	// Default 2s.
	Interval time.Duration `koanf:"interval"`
}

func (r Reload) validate() error {
	return confcheck.Positive("reload.interval", r.Interval)
}

// OpenMode is Open with its default applied.
func (c *Config) OpenMode() string {
	switch {
	case c.GenericAPI.Open != "":
		return c.GenericAPI.Open
	case c.Redis.Embedded():
		return api.OpenLoopback
	default:
		return api.OpenOff
	}
}
