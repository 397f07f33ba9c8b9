package providers

import (
	"context"
	"errors"
	"fmt"
	"maps"

	"github.com/edge-voice/edge/plugins"
)

// validate dry-runs s's settings on the running process l. Only a refusal
// is an error (logged and counted here); a plugin that cannot dry-run
// (built before ValidateSettings) or does not answer gets the settings
// with Configure, whose refusal apply handles.
func (p *proc) validate(l *live, s *Spec) error {
	ctx, cancel := context.WithTimeout(context.Background(), p.h.opts.Config.StartTimeout)
	defer cancel()
	_, err := dryRun(ctx, l.prov, s.Settings)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, plugins.ErrInvalidSettings):
		p.h.m.settingsRejects.WithLabelValues(p.name).Inc()
		p.log.Error("provider plugin refused new settings; it keeps its last good settings", "err", err)
		return fmt.Errorf("provider %s: %w", p.name, err)
	case errors.Is(err, plugins.ErrCannotValidate):
		p.log.Warn("provider plugin cannot validate settings (built against an older plugin contract); applying them with Configure", "err", err)
	default:
		p.log.Warn("provider plugin settings not validated; applying them with Configure", "err", err)
	}
	return nil
}

// fallBack replaces the refused spec s with s carrying good's settings,
// unless a newer reload already replaced s, and returns the spec now
// wanted. It logs and counts the refusal.
func (p *proc) fallBack(s, good *Spec, err error) *Spec {
	p.h.m.settingsRejects.WithLabelValues(p.name).Inc()
	if good == nil { // no process ever accepted settings: nothing to keep
		p.log.Error("provider plugin refused its settings", "err", err)
		return s
	}
	p.log.Error("provider plugin refused new settings; configuring its last good settings", "err", err)
	fb := *s
	fb.Settings = maps.Clone(good.Settings)
	if p.spec.CompareAndSwap(s, &fb) {
		return &fb
	}
	return p.spec.Load()
}

func sameBinary(a, b *Spec) bool { return a.Path == b.Path && a.SHA256 == b.SHA256 }

func sameSettings(a, b *Spec) bool { return maps.Equal(a.Settings, b.Settings) }
