package main

import (
	"context"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"reflect"
	"slices"

	"github.com/edge-voice/edge/config"
	"github.com/edge-voice/edge/plugins"
	"github.com/edge-voice/edge/providers"
)

// setupProviders runs the provider plugins and serves their webhook routes
// (/api/v1/{provider}/allocate, /providers/{name}/...). The built-in
// providers are this very binary, re-executed as `edge plugin <name>`, so
// they work with no configuration, under `go run ./cmd/edge` too.
func setupProviders(_ context.Context, a *app) error {
	cfg := a.cfg()
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("providers: find edge's own binary for the built-in plugins: %w", err)
	}
	specs := providerSpecs(cfg, self)
	host, err := providers.New(providers.Options{
		Calls: a.calls, Log: a.log, Reg: a.reg,
		Config:  cfg.Providers,
		Current: func() providers.Config { return a.cfg().Providers },
		MaxBody: func() int64 { return a.cfg().HTTP.MaxBodyBytes },
		Trusted: a.trust.current,
	}, specs)
	if err != nil {
		return fmt.Errorf("providers: %w", err)
	}
	a.surface.Providers = host
	a.add(host)
	for _, name := range host.Names() {
		a.ready.Add("plugin "+name, host.Check(name))
	}
	a.reloaded(func(old, cur *config.Config) {
		before := specsByName(providerSpecs(old, self))
		after := specsByName(providerSpecs(cur, self))
		for name, s := range after {
			prev, ok := before[name]
			if !ok {
				a.log.Warn("new provider in the config: restart edge to run it", "provider", name)
				continue
			}
			if prev.Path != s.Path || prev.SHA256 != s.SHA256 || prev.WebhookBaseURL != s.WebhookBaseURL ||
				!reflect.DeepEqual(prev.Settings, s.Settings) {
				host.Reconfigure(s)
			}
		}
		for name := range before {
			if _, ok := after[name]; !ok {
				a.log.Warn("provider removed from the config: restart edge to stop it", "provider", name)
			}
		}
	})
	if slices.Contains(host.Names(), "twilio") {
		a.quickStart = append(a.quickStart, func(public string) string {
			return "twilio webhook:  curl -s -X POST '" + public + "/api/v1/twilio/allocate?merchant_id=demo' -d CallSid=CA00000000000000000000000000de0002"
		})
	}
	return nil
}

// providerSpecs lists the providers cfg runs: the enabled built-ins first,
// then third-party binaries by name.
func providerSpecs(cfg *config.Config, self string) []providers.Spec {
	pc := cfg.Providers
	var specs []providers.Spec
	add := func(name string, pl providers.Plugin) {
		s := providers.Spec{Name: name, Path: pl.Path, SHA256: pl.SHA256, WebhookBaseURL: pl.WebhookBaseURL, Settings: pluginSettings(pl)}
		if pl.Path == "" {
			s.Command = func() *exec.Cmd { return exec.Command(self, "plugin", name) }
		} else {
			path := pl.Path
			s.Command = func() *exec.Cmd { return exec.Command(path) }
		}
		specs = append(specs, s)
	}
	for _, name := range providers.BuiltinNames {
		pl := pc.Plugins[name]
		if pl.Disabled || (!pc.Builtin && pl.Path == "") {
			continue
		}
		add(name, pl)
	}
	for _, name := range slices.Sorted(maps.Keys(pc.Plugins)) {
		pl := pc.Plugins[name]
		if pl.Disabled || slices.Contains(providers.BuiltinNames, name) {
			continue
		}
		add(name, pl)
	}
	return specs
}

// pluginSettings is what the plugin gets with Configure: its settings, its
// secrets and auth_tokens, in one map.
func pluginSettings(pl providers.Plugin) plugins.Settings {
	s := plugins.Settings{}
	maps.Copy(s, pl.Settings)
	for k, v := range pl.Secrets {
		s[k] = string(v)
	}
	if pl.AuthTokens != "" {
		s["auth_tokens"] = string(pl.AuthTokens)
	}
	return s
}

func specsByName(specs []providers.Spec) map[string]providers.Spec {
	m := make(map[string]providers.Spec, len(specs))
	for _, s := range specs {
		m[s.Name] = s
	}
	return m
}
