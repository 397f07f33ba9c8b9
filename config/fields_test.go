package config

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/edge-voice/edge/api"
	"github.com/edge-voice/edge/poolmgr"
)

func TestRestartChanges(t *testing.T) {
	tests := map[string]struct {
		edit func(c *Config)
		want []string
	}{
		"nothing":                {edit: func(*Config) {}},
		"listen.public":          {edit: func(c *Config) { c.Listen.Public = ":1" }, want: []string{"listen.public"}},
		"whole restart sections": {edit: func(c *Config) { c.Redis.PoolSize, c.Leader.RetryPeriod, c.Reload.Interval = 3, 1, 1 }, want: []string{"redis.pool_size", "leader.retry_period", "reload.interval"}},
		"runtime fields": {edit: func(c *Config) {
			c.Log.Level, c.Allocator.LeaseTTL, c.PublicBaseURL, c.AdminToken = "debug", time.Second, "ws://x", "t"
			c.Pods.Static = []poolmgr.StaticPod{{Name: "a"}}
			c.Allocator.Tiers.DefaultChain = []string{"basic"}
			c.HTTP.RequestTimeout, c.Pool.ReconcileInterval = time.Second, time.Second
		}},
		"restart fields inside runtime sections": {
			edit: func(c *Config) {
				c.Log.Format, c.Pods.Namespace, c.Pods.Source, c.HTTP.ReadHeaderTimeout = "json", "x", "kubernetes", time.Second
			},
			want: []string{"http.read_header_timeout", "log.format", "pods.source", "pods.namespace"}, // field order: http is part of api.Config, first
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			old, next := Default(), Default()
			tc.edit(next)
			if diff := cmp.Diff(tc.want, RestartChanges(old, next)); diff != "" {
				t.Errorf("RestartChanges (-want +got):\n%s", diff)
			}
			keepRestartFields(old, next)
			if got := RestartChanges(old, next); len(got) != 0 {
				t.Errorf("after keepRestartFields, still changed: %v", got)
			}
		})
	}
}

func TestSecretsHidden(t *testing.T) {
	c := Default()
	c.AdminToken = "tok-s3cret"
	c.Redis.URL = "redis://default:hunter2@redis:6379/0"
	c.Pods.Static = []poolmgr.StaticPod{{Name: "a", Address: "127.0.0.1:9000"}}
	c.GenericAPI.Tokens = []api.CallerToken{{Name: "crm", Token: "gen-s3cret-0123456789", Merchants: []string{"*"}}}

	var logged bytes.Buffer
	slog.New(slog.NewJSONHandler(&logged, nil)).Info("start", "config", c)
	var text bytes.Buffer
	slog.New(slog.NewTextHandler(&text, nil)).Info("start", "config", c)
	outputs := map[string]string{
		"String":    c.String(),
		"fmt %v":    fmt.Sprint(c),
		"slog JSON": logged.String(),
		"slog text": text.String(),
	}
	for name, out := range outputs {
		t.Run(name, func(t *testing.T) {
			for _, secret := range []string{"tok-s3cret", "hunter2", "gen-s3cret"} {
				if strings.Contains(out, secret) {
					t.Errorf("shows %q:\n%s", secret, out)
				}
			}
			if !strings.Contains(out, "redis:6379/0") {
				t.Errorf("hides the non-secret part of redis.url:\n%s", out)
			}
		})
	}
	if c.AdminToken != "tok-s3cret" || c.Redis.URL != "redis://default:hunter2@redis:6379/0" {
		t.Error("Redacted changed the original")
	}

	var line struct {
		Config map[string]any `json:"config"`
	}
	if err := json.Unmarshal(logged.Bytes(), &line); err != nil {
		t.Fatal(err)
	}
	for key, want := range map[string]any{
		"admin_token": "[redacted]", "allocator.lease_ttl": "1m0s", "pods.pod_port": float64(8000),
		"pods.static[0].address": "127.0.0.1:9000", "listen.public": ":8080",
	} {
		if got := line.Config[key]; got != want {
			t.Errorf("logged %s = %#v, want %#v", key, got, want)
		}
	}
}

func TestChangedKeys(t *testing.T) {
	a, b := Default(), Default()
	b.AdminToken = "new"
	b.Allocator.LeaseTTL = time.Minute * 2
	b.Pods.Static = []poolmgr.StaticPod{{Name: "x"}}
	b.Allocator.Tiers.DefaultChain = []string{"basic", "standard"}
	want := []string{"admin_token", "allocator.lease_ttl", "pods.static[0].name", "pods.static[0].address", "pods.static[0].tier", "tiers", "pods.static"}
	if diff := cmp.Diff(want, changedKeys(a, b)); diff != "" {
		t.Errorf("changedKeys (-want +got):\n%s", diff)
	}
}

// An unset generic_api.open is shown as the mode that applies, which depends
// on the Redis: check-config printed "" and left the reader to guess.
func TestOpenModeShownAsItApplies(t *testing.T) {
	for redisURL, want := range map[string]string{"": "loopback", "redis://redis:6379/0": "off"} {
		c := Default()
		c.Redis.URL = redisURL
		if !strings.Contains(c.String(), "generic_api.open: \""+want+"\"\n") {
			t.Errorf("redis.url %q: String() does not show generic_api.open %q:\n%s", redisURL, want, c.String())
		}
	}
	c := Default()
	c.GenericAPI.Open = "anyone"
	if !strings.Contains(c.String(), "generic_api.open: \"anyone\"\n") {
		t.Errorf("a set mode is not shown as set:\n%s", c.String())
	}
}
