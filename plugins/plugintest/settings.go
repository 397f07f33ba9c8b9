package plugintest

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/edge-voice/edge/plugins"
)

// checkSettings checks the dry run: it reports what Configure reported for
// the suite's settings, refuses each BadSettings naming its key (as
// Configure does), and applies nothing. The last part is proven by the
// webhook subtests that run after it with the suite's settings in force:
// a dry run of empty settings here would have turned verification off.
func checkSettings(ctx context.Context, t *testing.T, p plugins.Provider, s Suite, configured plugins.Configured) {
	v, ok := p.(plugins.SettingsValidator)
	if !ok {
		t.Fatalf("the host-side client %T lacks ValidateSettings", p)
	}
	got, err := v.ValidateSettings(ctx, s.Settings)
	if errors.Is(err, plugins.ErrCannotValidate) {
		t.Fatalf("ValidateSettings: %v (implement plugins.SettingsValidator, e.g. with plugins.Parsed, so edge can check settings before a reload)", err)
	}
	if err != nil {
		t.Fatalf("ValidateSettings refuses the settings Configure accepted: %v", err)
	}
	if got.Verifies != configured.Verifies || !slices.Equal(got.Warnings, configured.Warnings) {
		t.Errorf("ValidateSettings reports %+v, Configure reported %+v", got, configured)
	}
	if _, err := v.ValidateSettings(ctx, plugins.Settings{}); err != nil {
		t.Errorf("ValidateSettings(empty settings): %v", err)
	}
	for _, bad := range s.BadSettings {
		t.Run(bad.Name, func(t *testing.T) {
			_, err := v.ValidateSettings(ctx, bad.Settings)
			if !errors.Is(err, plugins.ErrInvalidSettings) {
				t.Fatalf("ValidateSettings(%v) = %v, want a refusal", bad.Settings, err)
			}
			keys := []string{}
			for _, e := range plugins.InvalidSettings(err) {
				keys = append(keys, e.Key)
			}
			if !slices.Contains(keys, bad.Key) {
				t.Errorf("ValidateSettings refused keys %q, want %q (return a *plugins.InvalidSetting)", keys, bad.Key)
			}
			if _, err := p.Configure(ctx, bad.Settings); err == nil {
				t.Errorf("Configure accepted settings ValidateSettings refused: %v", bad.Settings)
			}
		})
	}
}
