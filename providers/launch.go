package providers

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"

	"github.com/edge-voice/edge/plugins"
)

// launch starts s's plugin process and checks that it serves s.Name. The
// caller owns the returned client (Kill); on an error nothing is left
// running.
func launch(ctx context.Context, s *Spec, log *slog.Logger, timeout time.Duration, dial ...grpc.DialOption) (*plugin.Client, plugins.Provider, plugins.Description, error) {
	var none plugins.Description
	client, err := plugins.NewClient(plugins.ClientOptions{Cmd: s.Command(), SHA256: s.SHA256, Log: log, StartTimeout: timeout, GRPCDialOptions: dial})
	if err != nil {
		return nil, nil, none, err
	}
	ok := false
	defer func() {
		if !ok {
			client.Kill()
		}
	}()
	rpc, err := client.Client()
	if err != nil {
		return nil, nil, none, fmt.Errorf("start %s: %w", s.Describe(), err)
	}
	prov, err := plugins.Dispense(rpc)
	if err != nil {
		return nil, nil, none, err
	}
	d, err := prov.Describe(ctx)
	if err != nil {
		return nil, nil, none, fmt.Errorf("describe: %w", err)
	}
	if d.Name != s.Name {
		return nil, nil, none, fmt.Errorf("the binary serves provider %q, configured as %q", d.Name, s.Name)
	}
	if _, err := compileMediaParams(d.MediaParams); err != nil {
		return nil, nil, none, fmt.Errorf("describe: %w", err)
	}
	if _, err := checkResumeReplay(d.ResumeReplay); err != nil {
		return nil, nil, none, fmt.Errorf("describe: %w", err)
	}
	if _, err := checkMediaUpgrade(d.MediaHeaders, d.MediaSubprotocols); err != nil {
		return nil, nil, none, fmt.Errorf("describe: %w", err)
	}
	if _, err := checkAfterMove(d.ResumeNotice, d.LegEvents, d.ResumeReplay); err != nil {
		return nil, nil, none, fmt.Errorf("describe: %w", err)
	}
	ok = true
	return client, prov, d, nil
}

// ValidateSpec starts s's plugin once, asks it to dry-run s.Settings
// (ValidateSettings) and stops it: `edge check-config` runs it for every
// configured provider. Refused settings come back as *plugins.InvalidSetting
// (errors.Is plugins.ErrInvalidSettings); a plugin built before the dry run
// existed gives plugins.ErrCannotValidate. timeout bounds the whole check
// (DefaultConfig's StartTimeout when 0); log receives the plugin's lines.
func ValidateSpec(ctx context.Context, s Spec, log *slog.Logger, timeout time.Duration) (plugins.Configured, error) {
	if timeout <= 0 {
		timeout = DefaultConfig().StartTimeout
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if s.Command == nil {
		return plugins.Configured{}, fmt.Errorf("provider %q: no command", s.Name)
	}
	if err := checkSocketDir(); err != nil {
		return plugins.Configured{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	client, prov, _, err := launch(ctx, &s, log.With("plugin", s.Name), timeout)
	if err != nil {
		return plugins.Configured{}, err
	}
	defer client.Kill()
	return dryRun(ctx, prov, s.Settings)
}

// dryRun asks prov to validate settings; every Provider the host holds is
// the gRPC client, which has the RPC, so ErrCannotValidate comes from the
// plugin's side.
func dryRun(ctx context.Context, prov plugins.Provider, s plugins.Settings) (plugins.Configured, error) {
	v, ok := prov.(plugins.SettingsValidator)
	if !ok {
		return plugins.Configured{}, fmt.Errorf("%w: %T has no ValidateSettings", plugins.ErrCannotValidate, prov)
	}
	return v.ValidateSettings(ctx, s)
}
