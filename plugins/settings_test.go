package plugins_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/edge-voice/edge/plugins"
	"github.com/edge-voice/edge/plugins/plugintest"
)

// oldProvider is a provider written before ValidateSettings: it has no dry
// run, as a plugin built against the older contract.
type oldProvider struct{}

func (*oldProvider) Describe(context.Context) (plugins.Description, error) {
	return plugins.Description{Name: "old"}, nil
}
func (*oldProvider) Configure(context.Context, plugins.Settings) (plugins.Configured, error) {
	return plugins.Configured{}, nil
}
func (*oldProvider) Webhook(context.Context, *plugins.Request) (*plugins.WebhookResult, error) {
	return nil, errors.New("unused")
}
func (*oldProvider) Answer(context.Context, *plugins.AnswerRequest) (*plugins.Response, error) {
	return nil, errors.New("unused")
}

// parsedProvider refuses "a" and "b" unless they are "ok" (plain: any "a"
// but "ok", with an error that names no key).
type parsedProvider struct {
	oldProvider
	*plugins.Parsed[plugins.Settings]
}

func newParsed(plain bool) *parsedProvider {
	return &parsedProvider{Parsed: plugins.NewParsed(&plugins.Settings{}, func(s plugins.Settings) (*plugins.Settings, plugins.Configured, error) {
		if plain && s["a"] != "ok" {
			return nil, plugins.Configured{}, errors.New("a plain error")
		}
		var errs []error
		for _, k := range []string{"a", "b"} {
			if v, ok := s[k]; ok && v != "ok" {
				errs = append(errs, &plugins.InvalidSetting{Key: k, Reason: fmt.Sprintf("%q is not ok", v)})
			}
		}
		if err := errors.Join(errs...); err != nil {
			return nil, plugins.Configured{}, fmt.Errorf("parse: %w", err)
		}
		return &s, plugins.Configured{Verifies: true, Warnings: []string{"w"}}, nil
	})}
}

func (p *parsedProvider) Configure(ctx context.Context, s plugins.Settings) (plugins.Configured, error) {
	return p.Parsed.Configure(ctx, s)
}

func validate(t *testing.T, impl plugins.Provider, s plugins.Settings) (plugins.Configured, error) {
	t.Helper()
	v, ok := plugintest.Connect(t, impl).(plugins.SettingsValidator)
	if !ok {
		t.Fatal("the host-side client has no ValidateSettings")
	}
	return v.ValidateSettings(context.Background(), s)
}

func TestValidateSettingsThroughGRPC(t *testing.T) {
	// A provider without the dry run answers Unimplemented, which the host
	// reads as "cannot validate", never as refused settings.
	_, err := validate(t, &oldProvider{}, plugins.Settings{"a": "x"})
	if !errors.Is(err, plugins.ErrCannotValidate) || errors.Is(err, plugins.ErrInvalidSettings) {
		t.Errorf("old provider: %v, want ErrCannotValidate", err)
	}

	p := newParsed(false)
	c, err := validate(t, p, plugins.Settings{"a": "ok"})
	if err != nil || !c.Verifies || len(c.Warnings) != 1 {
		t.Errorf("valid settings: %+v, %v", c, err)
	}
	_, err = validate(t, p, plugins.Settings{"a": "x", "b": "y"})
	got := plugins.InvalidSettings(err)
	if !errors.Is(err, plugins.ErrInvalidSettings) || len(got) != 2 || got[0].Key != "a" || got[1].Key != "b" || got[0].Reason != `"x" is not ok` {
		t.Errorf("two bad keys: %v (%+v)", err, got)
	}
	if cur := *p.Current(); len(cur) != 0 {
		t.Errorf("a dry run applied settings: %v", cur)
	}

	// A plain error from a parser still refuses, with no key.
	_, err = validate(t, newParsed(true), plugins.Settings{"a": "x"})
	if got := plugins.InvalidSettings(err); len(got) != 1 || got[0].Key != "" || got[0].Reason != "a plain error" {
		t.Errorf("plain error: %v", err)
	}
}

func TestParsedConfigureRefusesWithoutApplying(t *testing.T) {
	p := newParsed(false)
	ctx := context.Background()
	if _, err := p.Configure(ctx, plugins.Settings{"a": "ok"}); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Configure(ctx, plugins.Settings{"a": "bad"}); !errors.Is(err, plugins.ErrInvalidSettings) {
		t.Fatalf("Configure(bad) = %v", err)
	}
	if cur := *p.Current(); cur["a"] != "ok" {
		t.Errorf("refused settings applied: %v", cur)
	}
}

// oldProvider says nothing of Failure.Fallback, as a plugin built before
// the field: the host reads false and answers such failures itself. A
// provider that says it renders them is read as saying so.
func TestDescribeRendersFallback(t *testing.T) {
	for _, tc := range []struct {
		impl plugins.Provider
		want bool
	}{{&oldProvider{}, false}, {&fallbackProvider{}, true}} {
		d, err := plugintest.Connect(t, tc.impl).Describe(context.Background())
		if err != nil || d.RendersFallback != tc.want {
			t.Errorf("%T: Describe = %+v, %v; want RendersFallback %v", tc.impl, d, err, tc.want)
		}
	}
}

type fallbackProvider struct{ oldProvider }

func (*fallbackProvider) Describe(context.Context) (plugins.Description, error) {
	return plugins.Description{Name: "new", RendersFallback: true}, nil
}

// A plugin built before Description.MediaHandshakeRetries reads as "no
// retry"; a declared count crosses gRPC as it is, a negative one as 0.
func TestDescribeMediaHandshakeRetries(t *testing.T) {
	for _, tc := range []struct {
		impl plugins.Provider
		want int
	}{{&oldProvider{}, 0}, {&retryingProvider{retries: 1}, 1}, {&retryingProvider{retries: -2}, 0}} {
		d, err := plugintest.Connect(t, tc.impl).Describe(context.Background())
		if err != nil || d.MediaHandshakeRetries != tc.want {
			t.Errorf("%T: Describe = %+v, %v; want MediaHandshakeRetries %d", tc.impl, d, err, tc.want)
		}
	}
}

type retryingProvider struct {
	oldProvider
	retries int
}

func (p *retryingProvider) Describe(context.Context) (plugins.Description, error) {
	return plugins.Description{Name: "retrying", MediaHandshakeRetries: p.retries}, nil
}

// The stream-opening events cross gRPC in the plugin's order; a plugin
// built before Description.ResumeReplay declares none (its calls cannot
// move to another pod).
func TestDescribeResumeReplay(t *testing.T) {
	for _, tc := range []struct {
		impl plugins.Provider
		want []string
	}{{&oldProvider{}, nil}, {&replayingProvider{events: []string{"start", "connected"}}, []string{"start", "connected"}}} {
		d, err := plugintest.Connect(t, tc.impl).Describe(context.Background())
		if err != nil || !slices.Equal(d.ResumeReplay, tc.want) {
			t.Errorf("%T: Describe = %+v, %v; want ResumeReplay %q", tc.impl, d, err, tc.want)
		}
	}
}

type replayingProvider struct {
	oldProvider
	events []string
}

func (p *replayingProvider) Describe(context.Context) (plugins.Description, error) {
	return plugins.Description{Name: "replaying", ResumeReplay: p.events}, nil
}
