package main

import (
	"fmt"
	"log/slog"
	"maps"
	"os"
	"os/exec"
	"reflect"
	"slices"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"

	"github.com/edge-voice/edge/calls"
	"github.com/edge-voice/edge/config"
	"github.com/edge-voice/edge/forwarded"
	"github.com/edge-voice/edge/providers"
)

// providerHost runs the provider plugins and serves their webhook routes
// (/api/v1/{provider}/allocate, /providers/{name}/...); Apply is its reload
// hook.
type providerHost struct {
	*providers.Host
	// self is edge's own binary: the built-in providers are this very
	// binary, re-executed as `edge plugin <name>`, so they work with no
	// configuration, under `go run ./cmd/edge` too.
	self string
	log  *slog.Logger
}

// newProviders makes the host of the providers cfg runs; Run starts them.
// Webhook allocations go to svc, the providers' nonces to nonces (Redis,
// shared by every replica); trusted says whose X-Forwarded-* count.
func newProviders(cfg *config.Config, current func() *config.Config, svc *calls.Service, nonces providers.Nonces, trusted func() *forwarded.Trusted,
	tracer trace.TracerProvider, reg prometheus.Registerer, log *slog.Logger) (*providerHost, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("providers: find edge's own binary for the built-in plugins: %w", err)
	}
	specs := providerSpecs(cfg, self)
	host, err := providers.New(providers.Options{
		Calls: svc, Nonces: nonces, Log: log, Reg: reg,
		Config:  cfg.Providers,
		Current: func() providers.Config { return current().Providers },
		MaxBody: func() int64 { return current().HTTP.MaxBodyBytes },
		Trusted: trusted,
		Tracer:  tracer,
	}, specs)
	if err != nil {
		return nil, fmt.Errorf("providers: %w", err)
	}
	return &providerHost{Host: host, self: self, log: log}, nil
}

// Apply reconfigures each running provider whose spec changed from old to
// cur; adding or removing a provider takes a restart.
func (h *providerHost) Apply(old, cur *config.Config) {
	before := specsByName(providerSpecs(old, h.self))
	after := specsByName(providerSpecs(cur, h.self))
	for name, s := range after {
		prev, ok := before[name]
		if !ok {
			h.log.Warn("new provider in the config: restart edge to run it", "provider", name)
			continue
		}
		if prev.Path != s.Path || prev.SHA256 != s.SHA256 || prev.WebhookBaseURL != s.WebhookBaseURL ||
			!reflect.DeepEqual(prev.Settings, s.Settings) {
			h.Reconfigure(s)
		}
	}
	for name := range before {
		if _, ok := after[name]; !ok {
			h.log.Warn("provider removed from the config: restart edge to stop it", "provider", name)
		}
	}
}

// providerSpecs lists the providers cfg runs: the enabled built-ins first,
// then third-party binaries by name.
func providerSpecs(cfg *config.Config, self string) []providers.Spec {
	pc := cfg.Providers
	var specs []providers.Spec
	add := func(name string, pl providers.Plugin) {
		s := providers.Spec{Name: name, Path: pl.Path, SHA256: pl.SHA256, WebhookBaseURL: pl.WebhookBaseURL, Settings: pl.PluginSettings()}
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

func specsByName(specs []providers.Spec) map[string]providers.Spec {
	m := make(map[string]providers.Spec, len(specs))
	for _, s := range specs {
		m[s.Name] = s
	}
	return m
}
