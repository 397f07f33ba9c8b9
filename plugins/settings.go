package plugins

import (
	"context"
	"errors"
	"sync/atomic"
)

// SettingsValidator is the dry run of Configure: a provider that
// implements it lets edge check settings before they reach the running
// process (config reloads) and in `edge check-config`. It is a separate
// interface, not a method of Provider, so that providers written before it
// still compile; Parsed implements both halves from one parse function.
type SettingsValidator interface {
	// ValidateSettings checks s exactly as Configure would and reports
	// what Configure would, without applying anything. A refused setting
	// is an *InvalidSetting (several joined with errors.Join).
	ValidateSettings(ctx context.Context, s Settings) (Configured, error)
}

// ErrCannotValidate is returned (wrapped) by the host's ValidateSettings
// when the plugin does not implement it, e.g. one built against the
// contract before the RPC existed. edge then applies settings with
// Configure as before.
var ErrCannotValidate = errors.New("plugin cannot validate settings")

// ErrInvalidSettings matches every *InvalidSetting with errors.Is.
var ErrInvalidSettings = errors.New("invalid settings")

// InvalidSetting is a setting a provider refuses, from Configure or
// ValidateSettings. edge names the config key it came from
// (providers.plugins.<name>.settings.<Key>).
type InvalidSetting struct {
	Key    string // the setting's key; "" when no one key is at fault
	Reason string // what is wrong; never a secret's value
}

func (e *InvalidSetting) Error() string {
	if e.Key == "" {
		return e.Reason
	}
	return e.Key + ": " + e.Reason
}

// Is makes errors.Is(err, ErrInvalidSettings) true.
func (e *InvalidSetting) Is(target error) bool { return target == ErrInvalidSettings }

// InvalidSettings lists the *InvalidSetting in err's tree (errors.Join
// and %w wrapping are followed), in order.
func InvalidSettings(err error) []*InvalidSetting {
	var out []*InvalidSetting
	var walk func(error)
	walk = func(err error) {
		switch e := err.(type) {
		case nil:
		case *InvalidSetting:
			out = append(out, e)
		case interface{ Unwrap() []error }:
			for _, inner := range e.Unwrap() {
				walk(inner)
			}
		case interface{ Unwrap() error }:
			walk(e.Unwrap())
		}
	}
	walk(err)
	return out
}

// Parsed holds a provider's parsed settings and implements Configure and
// ValidateSettings with one parse function, so the dry run checks exactly
// what Configure does. Embed it:
//
//	type Provider struct{ *plugins.Parsed[settings] }
//
//	func New() *Provider { return &Provider{plugins.NewParsed(&settings{}, parse)} }
//	// in Webhook: s := p.Current()
type Parsed[T any] struct {
	parse func(Settings) (*T, Configured, error)
	cur   atomic.Pointer[T]
}

// NewParsed returns settings that start as initial (before any Configure)
// and are parsed with parse, which must not keep s or change state.
func NewParsed[T any](initial *T, parse func(Settings) (*T, Configured, error)) *Parsed[T] {
	p := &Parsed[T]{parse: parse}
	p.cur.Store(initial)
	return p
}

// Current is the settings in force. Concurrent webhooks may read it while
// Configure replaces it: it is swapped whole, never changed in place.
func (p *Parsed[T]) Current() *T { return p.cur.Load() }

// Configure implements Provider: parse, then replace the settings at once.
// Refused settings change nothing.
func (p *Parsed[T]) Configure(_ context.Context, s Settings) (Configured, error) {
	next, c, err := p.parse(s)
	if err != nil {
		return Configured{}, err
	}
	p.cur.Store(next)
	return c, nil
}

// ValidateSettings implements SettingsValidator: parse only.
func (p *Parsed[T]) ValidateSettings(_ context.Context, s Settings) (Configured, error) {
	_, c, err := p.parse(s)
	if err != nil {
		return Configured{}, err
	}
	return c, nil
}
