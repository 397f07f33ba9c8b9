package config

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"time"

	"github.com/edge-voice/edge/allocator"
	"github.com/edge-voice/edge/forwarded"
)

// Config is everything edge reads at start. A loaded Config is shared
// between goroutines (Watcher.Current): treat it as read-only.
//
// Struct tags: `koanf` is the key; `reload:"restart"` marks a field (or a
// whole section) that a running edge cannot change, so the Watcher keeps its
// old value and reports it; `secret:"true"` (or "url" for a URL whose
// password is the secret) hides the value in String, LogValue and Redacted.
//
// To add a section: a type with its defaults and Validate in its own file, a
// field here, one line in Default and one in Validate.
type Config struct {
	// Listen holds the listener addresses.
	Listen Listen `koanf:"listen" reload:"restart"`
	// PublicBaseURL is the ws:// or wss:// base that providers are told to
	// open media sockets at (<base>/ws/pod/<pod>/...). Empty: derived from
	// Listen.Public, see PublicURL. A trailing slash is trimmed.
	PublicBaseURL string `koanf:"public_base_url"`
	// AdminToken, when set, is the bearer token the admin listener requires.
	AdminToken string `koanf:"admin_token" secret:"true"`
	// Log configures the process logger.
	Log Log `koanf:"log"`
	// Redis is the connection to the pool state.
	Redis Redis `koanf:"redis" reload:"restart"`
	// Allocator holds the lease and TTL settings of allocations.
	Allocator Allocator `koanf:"allocator"`
	// Tiers is parsed from the raw keys `tiers` and `default_chain` (see the
	// package doc). Default: DefaultTiers. It only bootstraps
	// voice:tier:config, which operators then change at runtime.
	Tiers allocator.TierConfig `koanf:"-"`
	// Pods says where voice-agent pods come from.
	Pods Pods `koanf:"pods"`
	// Pool holds the leader loops' periods.
	Pool Pool `koanf:"pool"`
	// Leader configures Kubernetes Lease leader election.
	Leader Leader `koanf:"leader" reload:"restart"`
	// HTTP holds limits and timeouts of both listeners.
	HTTP HTTP `koanf:"http"`
	// Reload configures the Watcher.
	Reload Reload `koanf:"reload" reload:"restart"`
	// Proxy configures the /ws/pod/ media proxy.
	Proxy Proxy `koanf:"proxy"`
	// Providers configures the provider plugins (config/plugins.go).
	Providers Providers `koanf:"providers"`
	// GenericAPI says who may call the generic allocate API.
	GenericAPI GenericAPI `koanf:"generic_api"`
	// TrustedProxies are the CIDRs (or addresses) of the load balancers in
	// front of edge whose X-Forwarded-For/-Proto/-Host edge believes: for
	// the webhook URL a provider signed, IP allow-lists and the headers
	// pods get. Empty (default): nobody's. Trusting everyone (0.0.0.0/0,
	// ::/0) lets any client set its own address: edge WARNs at start.
	TrustedProxies []string `koanf:"trusted_proxies"`
}

// Default returns the defaults: what edge runs with given no file, no
// environment and no flags (embedded Redis, static pods, local listeners).
func Default() *Config {
	return &Config{
		Listen:    defaultListen(),
		Log:       defaultLog(),
		Redis:     defaultRedis(),
		Allocator: defaultAllocator(),
		Tiers:     DefaultTiers(),
		Pods:      defaultPods(),
		Pool:      defaultPool(),
		Leader:    defaultLeader(),
		HTTP:      defaultHTTP(),
		Reload:    defaultReload(),
		Proxy:     defaultProxy(),
		Providers: defaultProviders(),
	}
}

// Validate returns every problem of c joined (errors.Join), each naming the
// key path and the bad value.
func (c *Config) Validate() error {
	return errors.Join(
		c.Listen.Validate(),
		validatePublicBaseURL(c.PublicBaseURL),
		validateAdminToken(c.AdminToken),
		validateAdminExposure(c.Listen.Admin, c.AdminToken),
		c.Log.Validate(),
		c.Redis.Validate(),
		c.Allocator.Validate(),
		c.Tiers.Validate(), // its errors name tiers.<name>.<field> and default_chain[i]
		c.Pods.Validate(c.Tiers),
		c.Pool.Validate(),
		c.Leader.Validate(),
		c.HTTP.Validate(),
		c.Reload.Validate(),
		c.Proxy.Validate(),
		c.Providers.Validate(),
		c.GenericAPI.Validate(),
		validateTrustedProxies(c.TrustedProxies),
	)
}

// PublicURL is the effective public base URL, without a trailing slash:
// PublicBaseURL if set, else ws://<host>:<port> of Listen.Public, where an
// empty or unspecified host (":8080", "0.0.0.0:8080") becomes 127.0.0.1.
// It is derived on each call so that it follows the listener edge runs with,
// not a restart-only change in the file. With port 0 (a free port picked at
// bind time) the derived URL is useless: set PublicBaseURL once bound.
func (c *Config) PublicURL() string {
	if c.PublicBaseURL != "" {
		return c.PublicBaseURL
	}
	host, port, err := net.SplitHostPort(c.Listen.Public)
	if err != nil {
		return ""
	}
	if wildcard(host) {
		host = "127.0.0.1"
	}
	return "ws://" + net.JoinHostPort(host, port)
}

// normalize applies the forgiving rewrites (trailing slash, case) before
// validation, so that both the running config and Validate see one form.
func (c *Config) normalize() {
	c.PublicBaseURL = strings.TrimRight(strings.TrimSpace(c.PublicBaseURL), "/")
	c.Log.Level = strings.ToLower(strings.TrimSpace(c.Log.Level))
	c.Log.Format = strings.ToLower(strings.TrimSpace(c.Log.Format))
	c.Pods.Source = strings.ToLower(strings.TrimSpace(c.Pods.Source))
}

func validatePublicBaseURL(s string) error {
	const path = "public_base_url"
	if s == "" {
		return nil
	}
	u, err := url.Parse(s)
	if err != nil {
		return fmt.Errorf("%s: %q: not a URL", path, s)
	}
	switch {
	case u.Scheme != "ws" && u.Scheme != "wss":
		return invalid(path, s, `must be a ws:// or wss:// URL`)
	case u.Host == "":
		return invalid(path, s, "must name a host")
	case u.User != nil:
		return invalid(path, u.Redacted(), "must not carry user info")
	case u.RawQuery != "" || u.ForceQuery || u.Fragment != "":
		return invalid(path, s, "must not have a query or fragment")
	}
	return nil
}

func validateTrustedProxies(cidrs []string) error {
	_, err := forwarded.Parse("trusted_proxies", cidrs)
	return err
}

func validateAdminToken(s string) error {
	// The value is a secret: never echo it. A trailing newline is the usual
	// way a token from a mounted Secret or an env file goes wrong.
	if s != strings.TrimSpace(s) {
		return errors.New("admin_token: has leading or trailing whitespace")
	}
	return nil
}

// invalid reports a value outside its constraint:
// `allocator.lease_ttl: must be > 0 (got "0s")`.
func invalid(path string, value any, problem string) error {
	return fmt.Errorf("%s: %s (got %s)", path, problem, show(value))
}

// show quotes strings and durations and prints numbers bare.
func show(v any) string {
	switch v := v.(type) {
	case string:
		return fmt.Sprintf("%q", v)
	case time.Duration:
		return fmt.Sprintf("%q", v.String())
	default:
		return fmt.Sprint(v)
	}
}

// positive reports durations that must be > 0.
func positive(path string, d time.Duration) error {
	if d <= 0 {
		return invalid(path, d, "must be > 0")
	}
	return nil
}

// hostPort checks a "host:port" address and returns its parts. The problem
// text drops the stdlib's " in address" suffix:
// `pods.static[2].address: "foo": missing port`.
func hostPort(path, addr string, minPort int) (host string, port int, err error) {
	host, p, err := net.SplitHostPort(addr)
	if err != nil {
		msg := err.Error()
		var ae *net.AddrError
		if errors.As(err, &ae) {
			msg = strings.TrimSuffix(ae.Err, " in address")
		}
		return "", 0, fmt.Errorf("%s: %q: %s", path, addr, msg)
	}
	port, ok := parsePort(p)
	if !ok || port < minPort {
		return "", 0, fmt.Errorf("%s: %q: port must be a number %d-65535", path, addr, minPort)
	}
	return host, port, nil
}

func parsePort(s string) (int, bool) {
	if s == "" || len(s) > 5 {
		return 0, false
	}
	n := 0
	for _, c := range s {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	return n, n <= 65535
}
