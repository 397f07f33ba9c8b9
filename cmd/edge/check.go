package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/edge-voice/edge/config"
	"github.com/edge-voice/edge/plugins"
	"github.com/edge-voice/edge/providers"
)

// executable is edge's own binary, re-executed for the built-in providers;
// tests point it at a built edge (their own binary is not one).
var executable = os.Executable

// checkConfig validates the configuration (file, environment and flags, as
// serve would load them), then starts each configured provider plugin
// briefly to dry-run its settings: a setting only the plugin understands
// (exotel's allow_ips) is refused here, not at serve or on a reload. It
// prints the warnings serve would log at start.
func checkConfig(ctx context.Context, args, environ []string, stdout, _ io.Writer) error {
	cfg, err := config.Load(args, environ)
	if err != nil {
		return fmt.Errorf("invalid configuration:\n%w", err)
	}
	if _, err := newTLS(cfg, nil, nil); err != nil {
		return err
	}
	if err := checkPlugins(ctx, cfg, stdout); err != nil {
		return fmt.Errorf("invalid configuration:\n%w", err)
	}
	// What serve would WARN of at start: valid, but unsafe.
	for _, w := range config.ArgsWarnings(cfg, args) {
		fmt.Fprintf(stdout, "warning: %s\n", w)
	}
	fmt.Fprintf(stdout, "configuration is valid\n%s\n", cfg.String())
	return nil
}

// checkPlugins dry-runs every enabled provider's settings in its plugin
// and names the config key of each refused setting.
func checkPlugins(ctx context.Context, cfg *config.Config, stdout io.Writer) error {
	self, err := executable()
	if err != nil {
		return fmt.Errorf("providers: find edge's own binary for the built-in plugins: %w", err)
	}
	var errs []error
	for _, s := range providerSpecs(cfg, self) {
		base := "providers.plugins." + s.Name
		c, err := providers.ValidateSpec(ctx, s, nil, cfg.Providers.StartTimeout)
		switch {
		case errors.Is(err, plugins.ErrCannotValidate):
			fmt.Fprintf(stdout, "%s: settings not checked: the plugin cannot validate them (built against an older plugin contract); serve applies them as before\n", base)
		case errors.Is(err, plugins.ErrInvalidSettings):
			for _, bad := range plugins.InvalidSettings(err) {
				errs = append(errs, fmt.Errorf("%s: %s", cfg.Providers.Plugins[s.Name].SettingPath(base, bad.Key), bad.Reason))
			}
		case err != nil:
			errs = append(errs, fmt.Errorf("%s: %w", base, err))
		default:
			for _, w := range c.Warnings {
				fmt.Fprintf(stdout, "%s: warning: %s\n", base, w)
			}
		}
	}
	return errors.Join(errs...)
}
