package config

import (
	"strings"
	"testing"
	"time"

	"github.com/edge-voice/edge/allocator"
	"github.com/edge-voice/edge/api"
	"github.com/edge-voice/edge/poolmgr"
)

func TestValidate(t *testing.T) {
	pod := func(name, addr, tier string) poolmgr.StaticPod {
		return poolmgr.StaticPod{Name: name, Address: addr, Tier: tier}
	}
	tests := map[string]struct {
		edit func(c *Config)
		want []string // each a substring of the error; none: valid
		not  []string // substrings that must not appear (secrets)
	}{
		"defaults": {edit: func(*Config) {}},
		"a full valid config": {edit: func(c *Config) {
			c.Listen = api.Listen{Public: "10.0.0.1:8080", Admin: "127.0.0.1:8080"}
			c.PublicBaseURL = "wss://edge.example.com/voice"
			c.AdminToken = "t0ken"
			c.Redis.URL = "rediss://user:pw@redis.example:6380/2"
			c.Pods = poolmgr.PodsConfig{Source: "kubernetes", Namespace: "voice", LabelSelector: "app=agent", PodPort: 8000,
				Static: []poolmgr.StaticPod{pod("a", "[::1]:9000", "standard"), pod("b", "localhost:9001", "merchant:acme"), pod("c", "10.1.2.3:9", "")}}
		}},
		"unix socket Redis": {edit: func(c *Config) { c.Redis.URL = "unix:///run/redis.sock" }},
		"lease_ttl zero": {
			edit: func(c *Config) { c.Allocator.LeaseTTL = 0 },
			want: []string{`allocator.lease_ttl: must be > 0 (got "0s")`},
		},
		"renew_interval too slow": {
			edit: func(c *Config) { c.Allocator.RenewInterval = 30 * time.Second },
			want: []string{`allocator.renew_interval: must be < allocator.lease_ttl/2 = 30s (got "30s")`},
		},
		"call info shorter than lease": {
			edit: func(c *Config) { c.Allocator.CallInfoTTL = 10 * time.Second },
			want: []string{`allocator.call_info_ttl: must be >= allocator.lease_ttl (1m0s) (got "10s")`},
		},
		"negative TTLs": {
			edit: func(c *Config) { c.Allocator.DrainingTTL = -time.Second },
			want: []string{`allocator.draining_ttl: must be > 0 (got "-1s")`},
		},
		"listen without port": {
			edit: func(c *Config) { c.Listen.Public = "8080" },
			want: []string{`listen.public: "8080": missing port`},
		},
		"listen port not a number": {
			edit: func(c *Config) { c.Listen.Admin = ":http" },
			want: []string{`listen.admin: ":http": port must be a number 0-65535`},
		},
		"listeners share a port": {
			edit: func(c *Config) { c.Listen.Admin = "127.0.0.1:8080" },
			want: []string{`listen.admin: must not share port 8080 with listen.public (got "127.0.0.1:8080")`},
		},
		"public_base_url not ws": {
			edit: func(c *Config) { c.PublicBaseURL = "https://edge.example" },
			want: []string{`public_base_url: must be a ws:// or wss:// URL (got "https://edge.example")`},
		},
		"public_base_url with query": {
			edit: func(c *Config) { c.PublicBaseURL = "wss://edge.example/?a=b" },
			want: []string{`public_base_url: must not have a query or fragment (got "wss://edge.example/?a=b")`},
		},
		"public_base_url without host": {
			edit: func(c *Config) { c.PublicBaseURL = "ws:///x" },
			want: []string{`public_base_url: must name a host (got "ws:///x")`},
		},
		"public_base_url with password": {
			edit: func(c *Config) { c.PublicBaseURL = "wss://u:hunter2@edge.example" },
			want: []string{"public_base_url: must not carry user info"},
			not:  []string{"hunter2"},
		},
		"admin token with newline": {
			edit: func(c *Config) { c.AdminToken = "s3cret\n" },
			want: []string{"admin_token: has leading or trailing whitespace"},
			not:  []string{"s3cret"},
		},
		"log level and format": {
			edit: func(c *Config) { c.Log = Log{Level: "verbose", Format: "xml"} },
			want: []string{`log.level: must be debug, info, warn or error (got "verbose")`, `log.format: must be text or json (got "xml")`},
		},
		"redis bad scheme, password hidden": {
			edit: func(c *Config) { c.Redis.URL = "http://:hunter2@redis:6379" },
			want: []string{`redis.url: "http://:xxxxx@redis:6379": invalid URL scheme: http`},
			not:  []string{"hunter2"},
		},
		"redis unparseable, password hidden": {
			edit: func(c *Config) { c.Redis.URL = "redis://:hun ter2@red is:%zz" },
			want: []string{`redis.url: "[redacted]": not a URL`},
			not:  []string{"hun ter2"},
		},
		"redis bad database": {
			edit: func(c *Config) { c.Redis.URL = "redis://redis:6379/zero" },
			want: []string{`redis.url: "redis://redis:6379/zero": invalid database number: "zero"`},
		},
		"redis limits": {
			edit: func(c *Config) {
				c.Redis.KeyPrefix, c.Redis.PoolSize, c.Redis.ReadTimeout = "", -1, 0
			},
			want: []string{"redis.key_prefix: must not be empty", "redis.pool_size: must be >= 0 (0: go-redis default) (got -1)", `redis.read_timeout: must be > 0 (got "0s")`},
		},
		"tiers": {
			edit: func(c *Config) {
				c.Allocator.Tiers = allocator.TierConfig{Tiers: map[string]allocator.Tier{"gold": {Type: "premium"}}, DefaultChain: []string{"gold", "silver"}}
			},
			want: []string{`tiers.gold.type`, `"premium"`, `default_chain[1]: unknown tier "silver"`},
		},
		"pod source": {
			edit: func(c *Config) { c.Pods.Source = "consul" },
			want: []string{`pods.source: must be "static" or "kubernetes" (got "consul")`},
		},
		"kubernetes needs namespace and selector": {
			edit: func(c *Config) { c.Pods.Source, c.Pods.Namespace, c.Pods.LabelSelector = "kubernetes", "Voice_NS", " " },
			want: []string{`pods.namespace: must be a Kubernetes namespace name (got "Voice_NS")`, `pods.label_selector: must not be empty (got " ")`},
		},
		"pod port": {
			edit: func(c *Config) { c.Pods.PodPort = 70000 },
			want: []string{"pods.pod_port: must be 1-65535 (got 70000)"},
		},
		"static pods": {
			edit: func(c *Config) {
				c.Pods.Static = []poolmgr.StaticPod{
					pod("ok", "127.0.0.1:9000", "standard"),
					pod("bad name", "127.0.0.1:9001", ""),
					pod("c", "foo", ""),
					pod("d", "agent.local:9000", ""),
					pod("e", "127.0.0.1:0", ""),
					pod("ok", "127.0.0.1:9005", ""),
					pod("f", "127.0.0.1:9006", "gold"),
					pod("g", "127.0.0.1:9007", "merchant:acme:x"),
				}
			},
			want: []string{
				`pods.static[1].name: "bad name"`,
				`pods.static[2].address: "foo": missing port`,
				`pods.static[3].address: "agent.local:9000": host must be an IP address or localhost`,
				`pods.static[4].address: "127.0.0.1:0": port must be a number 1-65535`,
				`pods.static[5].name: "ok" already used by pods.static[0]`,
				`pods.static[6].tier: "gold": no such tier (have basic, standard)`,
				`pods.static[7].tier: "merchant:acme:x"`,
			},
		},
		"pool periods": {
			edit: func(c *Config) { c.Pool.ZombieSweepInterval = 0 },
			want: []string{`pool.zombie_sweep_interval: must be > 0 (got "0s")`},
		},
		"leader order": {
			edit: func(c *Config) { c.Leader.LeaseDuration, c.Leader.RetryPeriod = 10*time.Second, 10*time.Second },
			want: []string{
				`leader.lease_duration: must be > leader.renew_deadline (10s) (got "10s")`,
				`leader.renew_deadline: must be > leader.retry_period (10s) (got "10s")`,
			},
		},
		"leader lease name": {
			edit: func(c *Config) { c.Leader.LeaseName = "Edge Leader" },
			want: []string{`leader.lease_name: must be a Kubernetes object name (got "Edge Leader")`},
		},
		"http": {
			edit: func(c *Config) {
				c.HTTP.MaxBodyBytes, c.HTTP.ShutdownTimeout, c.HTTP.ShutdownDelay = 0, 0, -time.Second
				c.HTTP.ReadinessRedisGrace = -time.Second
			},
			want: []string{"http.max_body_bytes: must be > 0 (got 0)", `http.shutdown_timeout: must be > 0 (got "0s")`,
				`http.shutdown_delay: must be >= 0 (got "-1s")`,
				`http.readiness_redis_grace: must be >= 0 (0: unready at the first failed Redis check) (got "-1s")`},
		},
		"reload": {
			edit: func(c *Config) { c.Reload.Interval = 0 },
			want: []string{`reload.interval: must be > 0 (got "0s")`},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			c := Default()
			tc.edit(c)
			err := c.Validate()
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				return
			}
			if err == nil {
				t.Fatal("Validate() = nil, want an error")
			}
			errorMentions(t, err, tc.want, tc.not)
		})
	}
}

func TestPublicURL(t *testing.T) {
	tests := map[string]struct {
		listen, base, want string
		tls                bool
	}{
		"derived from port":          {listen: ":8080", want: "ws://127.0.0.1:8080"},
		"unspecified host":           {listen: "0.0.0.0:9000", want: "ws://127.0.0.1:9000"},
		"unspecified IPv6 host":      {listen: "[::]:9000", want: "ws://127.0.0.1:9000"},
		"specific host kept":         {listen: "10.0.0.5:8080", want: "ws://10.0.0.5:8080"},
		"specific IPv6 host bracket": {listen: "[fd00::1]:8080", want: "ws://[fd00::1]:8080"},
		"configured wins":            {listen: ":8080", base: "wss://edge.example", want: "wss://edge.example"},
		"TLS on: wss":                {listen: ":8443", tls: true, want: "wss://127.0.0.1:8443"},
		"TLS on, configured wins":    {listen: ":8443", tls: true, base: "ws://plain.example", want: "ws://plain.example"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			c := Default()
			c.Listen.Public, c.PublicBaseURL = tc.listen, tc.base
			if tc.tls {
				c.TLS.CertFile, c.TLS.KeyFile = "edge.crt", "edge.key"
				c.link()
			}
			if got := c.PublicURL(); got != tc.want {
				t.Errorf("PublicURL() = %q, want %q", got, tc.want)
			}
		})
	}
}

// errorMentions checks that err names every want and none of not (secrets).
func errorMentions(t *testing.T, err error, want, not []string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error lacks %q:\n%v", w, err)
		}
	}
	for _, n := range not {
		if strings.Contains(err.Error(), n) {
			t.Errorf("error shows %q:\n%v", n, err)
		}
	}
}

// An admin listener other hosts can reach needs a token, of at least 32
// characters unless it serves TLS or the risk is accepted; loopback needs
// neither.
func TestAdminExposedNeedsToken(t *testing.T) {
	const long = "0123456789abcdef0123456789abcdef"
	cases := map[string]struct {
		addr, token string
		tls, accept bool
		ok          bool
		want        string // the key the error names
	}{
		"default loopback":                 {addr: "127.0.0.1:9090", ok: true},
		"localhost":                        {addr: "localhost:9090", ok: true},
		"ipv6 loopback":                    {addr: "[::1]:9090", ok: true},
		"every interface":                  {addr: ":9090", want: "listen.admin"},
		"unspecified":                      {addr: "0.0.0.0:9090", want: "listen.admin"},
		"pod address":                      {addr: "10.1.2.3:9090", want: "listen.admin"},
		"every interface, token":           {addr: ":9090", token: long, ok: true},
		"every interface, short token":     {addr: ":9090", token: "s3cret-token", want: "admin_token"},
		"unspecified, one character":       {addr: "0.0.0.0:9090", token: "a", want: "admin_token"},
		"31 characters":                    {addr: "10.1.2.3:9090", token: long[1:], want: "admin_token"},
		"short token, admin_tls":           {addr: ":9090", token: "a", tls: true, ok: true},
		"short token, risk accepted":       {addr: ":9090", token: "a", accept: true, ok: true},
		"short token on loopback":          {addr: "127.0.0.1:9090", token: "a", ok: true},
		"32 characters of multibyte runes": {addr: ":9090", token: strings.Repeat("é", 32), ok: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c := Default()
			c.Listen.Admin, c.AdminToken, c.AdminListenerTLS, c.AdminAuth.AcceptShortToken = tc.addr, tc.token, tc.tls, tc.accept
			err := c.Validate()
			if tc.ok && err != nil {
				t.Fatalf("Validate: %v", err)
			}
			if !tc.ok && (err == nil || !strings.HasPrefix(err.Error(), tc.want+":") || !strings.Contains(err.Error(), "admin_token")) {
				t.Fatalf("Validate = %v, want an error naming %s and how to fix it", err, tc.want)
			}
			if err != nil && len(tc.token) > 3 && strings.Contains(err.Error(), tc.token) {
				t.Fatalf("the error shows the token: %v", err)
			}
		})
	}
}

// admin_auth's allowance must be spendable and refill.
func TestAdminAuthLimits(t *testing.T) {
	c := Default()
	c.AdminAuth.FailureBurst, c.AdminAuth.FailuresPerSecond = 0, 0
	errorMentions(t, c.Validate(), []string{"admin_auth.failure_burst: must be >= 1", "admin_auth.failures_per_second: must be > 0"}, nil)
}
