package config

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/knadh/koanf/v2"
)

// writeFile writes a config file in a fresh temp dir and returns its path.
func writeFile(t *testing.T, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "edge.yaml")
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// loadT runs Load with the file (if any) before args.
func loadT(t *testing.T, file string, env []string, args ...string) (*Config, error) {
	t.Helper()
	if file != "" {
		args = append([]string{"--config", writeFile(t, file)}, args...)
	}
	return Load(args, env)
}

func TestLoadLayers(t *testing.T) {
	tests := map[string]struct {
		file string
		env  []string
		args []string
		want map[string]string // keys of flatten(cfg)
	}{
		"defaults": {
			want: map[string]string{
				"listen.public": ":8080", "redis.url": "", "allocator.lease_ttl": "1m0s",
				"pods.pod_port": "8000", "log.level": "info",
			},
		},
		"file over defaults": {
			file: "listen:\n  public: \":8081\"\nallocator:\n  lease_ttl: 45s\nredis:\n  key_prefix: \"{voice}:\"\npods:\n  pod_port: 9000\n",
			want: map[string]string{
				"listen.public": ":8081", "listen.admin": "127.0.0.1:9090", "allocator.lease_ttl": "45s",
				"allocator.renew_interval": "20s", "redis.key_prefix": "{voice}:", "pods.pod_port": "9000",
			},
		},
		"env over file": {
			file: "allocator:\n  lease_ttl: 45s\nredis:\n  key_prefix: \"{voice}:\"\n",
			env: []string{
				"EDGE_ALLOCATOR__LEASE_TTL=50s", "EDGE_REDIS__URL=redis://redis:6379/0",
				"EDGE_PUBLIC_BASE_URL=wss://edge.example/", "EDGE_PODS__POD_PORT=7000",
				"PATH=/bin", "REDIS_URL=redis://ignored:6379",
			},
			want: map[string]string{
				"allocator.lease_ttl": "50s", "redis.url": "redis://redis:6379/0",
				"redis.key_prefix": "{voice}:", "public_base_url": "wss://edge.example",
				"pods.pod_port": "7000",
			},
		},
		"--set over env": {
			env:  []string{"EDGE_ALLOCATOR__LEASE_TTL=50s", "EDGE_LOG__LEVEL=debug"},
			args: []string{"--set", "allocator.lease_ttl=55s", "--set=http.max_body_bytes=1024"},
			want: map[string]string{"allocator.lease_ttl": "55s", "log.level": "debug", "http.max_body_bytes": "1024"},
		},
		"later --set wins": {
			args: []string{"--set", "allocator.lease_ttl=55s", "--set", "allocator.lease_ttl=58s"},
			want: map[string]string{"allocator.lease_ttl": "58s"},
		},
		"dedicated flags over --set and env": {
			file: "redis:\n  url: redis://file:6379\nlog:\n  level: warn\n",
			env:  []string{"EDGE_REDIS__URL=redis://env:6379", "EDGE_LISTEN__PUBLIC=:7001"},
			args: []string{
				"--set", "listen.public=:7002", "--listen-public", ":7003", "--listen-admin=127.0.0.1:7004",
				"--redis-url", "redis://flag:6379", "--public-base-url", "ws://10.0.0.1:7003",
				"--log-level", "error",
			},
			want: map[string]string{
				"listen.public": ":7003", "listen.admin": "127.0.0.1:7004", "redis.url": "redis://flag:6379",
				"public_base_url": "ws://10.0.0.1:7003", "log.level": "error",
			},
		},
		"unset flags do not override": {
			file: "listen:\n  public: \":8081\"\n",
			args: []string{"--log-level", "debug"},
			want: map[string]string{"listen.public": ":8081", "log.level": "debug"},
		},
		"kubernetes service variables are ignored": {
			env: []string{
				"EDGE_SERVICE_HOST=10.0.0.9", "EDGE_PORT=tcp://10.0.0.9:8080",
				"EDGE_PORT_8080_TCP_ADDR=10.0.0.9", "EDGE_CONFIG=/etc/edge.yaml",
			},
			want: map[string]string{"listen.public": ":8080"},
		},
		"static pods from env JSON": {
			env: []string{`EDGE_PODS__STATIC=[{"name":"agent-0","address":"127.0.0.1:9100","tier":"basic"}]`},
			want: map[string]string{
				"pods.static[0].name": "agent-0", "pods.static[0].address": "127.0.0.1:9100",
				"pods.static[0].tier": "basic",
			},
		},
		"static pods from file, env empties them": {
			file: "pods:\n  static:\n    - name: a\n      address: 127.0.0.1:9100\n",
			env:  []string{"EDGE_PODS__STATIC="},
			want: map[string]string{"pods.static": "[]"},
		},
		"case of enums is forgiven": {
			file: "log:\n  level: DEBUG\n  format: JSON\npods:\n  source: Static\n",
			want: map[string]string{"log.level": "debug", "log.format": "json", "pods.source": "static"},
		},
		"days are not durations but hours are": {
			file: "allocator:\n  call_info_ttl: 24h\n",
			want: map[string]string{"allocator.call_info_ttl": "24h0m0s"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			cfg, err := loadT(t, tc.file, tc.env, tc.args...)
			if err != nil {
				t.Fatal(err)
			}
			all := flatten(cfg)
			got := make(map[string]string, len(tc.want))
			for k := range tc.want {
				got[k] = all[k]
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("keys (-want +got):\n%s", diff)
			}
		})
	}
}

// Settings a component reads from another section reach it, on load and
// when a reload keeps a restart-only value.
func TestLoadLinksSections(t *testing.T) {
	cfg, err := loadT(t, "redis:\n  key_prefix: \"{voice}:\"\nallocator:\n  renew_interval: 15s\n", nil)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Allocator.KeyPrefix != "{voice}:" || cfg.Proxy.RenewInterval != 15*time.Second {
		t.Errorf("allocator key prefix %q, proxy renew interval %s; want {voice}: and 15s", cfg.Allocator.KeyPrefix, cfg.Proxy.RenewInterval)
	}
	next := Default()
	keepRestartFields(cfg, next)
	next.link()
	if next.Allocator.KeyPrefix != "{voice}:" {
		t.Errorf("after keepRestartFields, allocator key prefix %q, want the running {voice}:", next.Allocator.KeyPrefix)
	}
}

func TestLoadDefaultsEqualDefault(t *testing.T) {
	cfg, err := Load(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(Default(), cfg); diff != "" {
		t.Errorf("Load(nil, nil) differs from Default() (-want +got):\n%s", diff)
	}
	if err := Default().Validate(); err != nil {
		t.Errorf("Default().Validate() = %v", err)
	}
	empty, err := loadT(t, "# nothing here\n", nil)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(Default(), empty); diff != "" {
		t.Errorf("empty file differs from Default() (-want +got):\n%s", diff)
	}
}

// TestLoadErrors covers errors that stop Load before or during decoding, and
// validation errors reported through it.
func TestLoadErrors(t *testing.T) {
	tests := map[string]struct {
		file string
		env  []string
		args []string
		want []string // substrings of the error, each required
		not  []string // substrings that must not appear (secrets)
	}{
		"unknown top-level key in file": {
			file: "listen:\n  public: \":8080\"\nredis_url: redis://x\n",
			want: []string{`unknown key "redis_url"`, "edge.yaml"},
		},
		"unknown nested keys in file, all reported": {
			file: "redis:\n  urll: redis://x\nallocator:\n  lease_tll: 5s\n",
			want: []string{`unknown key "redis.urll"`, `unknown key "allocator.lease_tll"`},
		},
		"unknown key in a list item": {
			file: "pods:\n  static:\n    - name: a\n      adress: 127.0.0.1:1\n",
			want: []string{`unknown key "pods.static[0].adress"`},
		},
		"unknown nested env key": {
			env:  []string{"EDGE_REDIS__URLL=redis://x"},
			want: []string{"EDGE_REDIS__URLL", `unknown key "redis.urll"`},
		},
		"unknown --set key": {
			args: []string{"--set", "allocator.lease=5s"},
			want: []string{`unknown key "allocator.lease"`},
		},
		"--set without value": {
			args: []string{"--set", "allocator.lease_ttl"},
			want: []string{`--set "allocator.lease_ttl": want key.path=value`},
		},
		"wait budget beyond a webhook's patience": {
			file: "admission:\n  wait:\n    budget: 30s\n    max_waiters: -1\n",
			want: []string{"admission.wait.budget", "30s", "admission.wait.max_waiters"},
		},
		"negative wait budget": {
			args: []string{"--set", "admission.wait.budget=-1s"},
			want: []string{"admission.wait.budget"},
		},
		"unknown flag": {
			args: []string{"--redis", "x"},
			want: []string{"unknown flag: --redis"},
		},
		"positional argument": {
			args: []string{"serve"},
			want: []string{`unexpected argument "serve"`},
		},
		"bare number duration": {
			file: "allocator:\n  lease_ttl: 60\n",
			want: []string{"allocator.lease_ttl", "60 has no unit"},
		},
		"bad duration from env": {
			env:  []string{"EDGE_POOL__RECONCILE_INTERVAL=soon"},
			want: []string{"pool.reconcile_interval", `"soon" is not a duration`},
		},
		"not a number": {
			file: "pods:\n  pod_port: eighty\n",
			want: []string{"pods.pod_port", "eighty"},
		},
		"bad JSON in env": {
			env:  []string{`EDGE_PODS__STATIC=[{"name":}]`},
			want: []string{"pods.static", "not valid JSON"},
		},
		"YAML syntax": {
			file: "listen: [\n",
			want: []string{"edge.yaml"},
		},
		"missing file": {
			args: []string{"--config", "/nonexistent/edge.yaml"},
			want: []string{"read config file", "/nonexistent/edge.yaml"},
		},
		"tiers not parseable": {
			file: "tiers:\n  gold: {type: exclusive, target: 1, colour: red}\n",
			want: []string{"tiers:", "colour"},
		},
		"tiers invalid": {
			file: "tiers:\n  gold: {type: premium, target: 1}\n",
			want: []string{"tiers.gold.type", "premium"},
		},
		"tiers are one value in the environment": {
			env:  []string{"EDGE_TIERS__GOLD=1"},
			want: []string{`EDGE_TIERS__GOLD: unknown key "tiers.gold"`},
		},
		"tiers a list": {
			file: "tiers: [gold]\n",
			want: []string{"tiers: must be a map or a JSON object"},
		},
		"validation reports every problem": {
			file: "allocator:\n  lease_ttl: 0s\nlisten:\n  admin: nope\npods:\n  static:\n    - {name: a, address: foo}\n",
			want: []string{
				`allocator.lease_ttl: must be > 0 (got "0s")`,
				`listen.admin: "nope": missing port`,
				`pods.static[0].address: "foo": missing port`,
			},
		},
		"secrets are not echoed": {
			env:  []string{"EDGE_REDIS__URL=http://user:hunter2@redis:6379", "EDGE_ADMIN_TOKEN=s3cret\n"},
			want: []string{"redis.url", "invalid URL scheme", "admin_token: has leading or trailing whitespace"},
			not:  []string{"hunter2", "s3cret"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := loadT(t, tc.file, tc.env, tc.args...)
			if err == nil {
				t.Fatal("Load succeeded, want an error")
			}
			errorMentions(t, err, tc.want, tc.not)
		})
	}
}

func TestLoadHelp(t *testing.T) {
	if _, err := Load([]string{"--help"}, nil); !errors.Is(err, ErrHelp) {
		t.Errorf("Load(--help) = %v, want ErrHelp", err)
	}
	for _, flag := range []string{"--config", "--listen-public", "--listen-admin", "--listen-internal", "--redis-url", "--public-base-url", "--log-level", "--set"} {
		if !strings.Contains(Usage(), flag) {
			t.Errorf("Usage() lacks %s", flag)
		}
	}
}

func TestCheck(t *testing.T) {
	good := writeFile(t, "allocator:\n  lease_ttl: 30s\n  renew_interval: 10s\n")
	bad := writeFile(t, "allocator:\n  lease_ttl: 30s\n")
	if _, err := Load([]string{"--config", good}, nil); err != nil {
		t.Errorf("Load(good) = %v", err)
	}
	if _, err := Load([]string{"--config", bad}, nil); err == nil || !strings.Contains(err.Error(), "allocator.renew_interval") {
		t.Errorf("Load(bad) = %v, want renew_interval error", err)
	}
	if _, err := Load([]string{"--config", good}, []string{"EDGE_ALLOCATOR__RENEW_INTERVAL=20s"}); err == nil {
		t.Error("Check ignored the environment")
	}
}

func TestEnvKeys(t *testing.T) {
	var errs []error
	k := koanf.New(".")
	err := k.Load(envProvider([]string{
		"EDGE_REDIS__URL=redis://r:6379/0",
		"EDGE_PUBLIC_BASE_URL=wss://e",
		"EDGE_ALLOCATOR__LEASE_TTL=45s",
		"EDGE_HTTP__MAX_BODY_BYTES=1",
		"EDGE_TIERS={\"a\":1}",
		"EDGE_SERVICE_PORT=8080",
		"edge_redis__url=lower-case prefix is not ours",
		"EDGE_=empty",
		"NOEQUALS",
	}, &errs), nil)
	if err := errors.Join(append(errs, err)...); err != nil {
		t.Fatal(err)
	}
	got := k.All()
	want := map[string]any{
		"redis.url":           "redis://r:6379/0",
		"public_base_url":     "wss://e",
		"allocator.lease_ttl": "45s",
		"http.max_body_bytes": "1",
		"tiers":               `{"a":1}`,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("envKeys (-want +got):\n%s", diff)
	}
}
