package providers

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os/exec"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"

	"github.com/edge-voice/edge/allocator"
	"github.com/edge-voice/edge/calls"
	"github.com/edge-voice/edge/forwarded"
	"github.com/edge-voice/edge/plugins"
)

// Spec is one provider plugin to run.
type Spec struct {
	// Name is the provider's name in routes and config; the binary must
	// serve a provider of that name.
	Name string
	// Path is the binary, for logs and change detection ("" for built-ins).
	Path string
	// Command returns a fresh command that starts the plugin.
	Command func() *exec.Cmd
	// SHA256 (hex), when set, must match the binary before it runs.
	SHA256 string
	// Settings are handed over with Configure.
	Settings plugins.Settings
	// WebhookBaseURL overrides Config.WebhookBaseURL for this provider.
	WebhookBaseURL string
}

// Describe names the binary for errors.
func (s *Spec) Describe() string {
	if s.Path == "" {
		return "built-in provider " + s.Name
	}
	return s.Path
}

// Calls is what the host needs of the call lifecycle (calls.Service).
type Calls interface {
	Allocate(ctx context.Context, req calls.Request) (calls.Call, error)
	// EndByProvider ends a call provider's status callback says has
	// ended; allocator.ErrCallNotFound when it holds no live call of that
	// provider's, allocator.ErrOtherAccount when the call is another
	// account's than the callback's.
	EndByProvider(ctx context.Context, callID, provider, account, event string) (allocator.ProviderEnd, error)
}

// Nonces remembers the nonces providers send once per request
// (allocator.Allocator.FirstUse: a SET NX in Redis, shared by every
// replica).
type Nonces interface {
	FirstUse(ctx context.Context, scope, nonce string, ttl time.Duration) (bool, error)
}

// Options configure a Host.
type Options struct {
	Calls Calls
	// Nonces checks the nonces plugins report (WebhookResult.Nonce); nil:
	// nonces are not checked (tests of other things).
	Nonces Nonces
	Log    *slog.Logger
	Reg    prometheus.Registerer

	// Config is the providers section. Its restart-only settings (the
	// timeouts) are read once, here; zero durations mean DefaultConfig's.
	Config Config
	// Current returns the section in effect; it is read on every request so
	// that webhook_base_url reloads apply at once. nil:
	// Config.
	Current func() Config
	// BackoffMin is the first restart backoff, doubling up to
	// Config.RestartBackoffMax. Default 100ms.
	BackoffMin time.Duration
	// MaxBody returns the webhook body limit (nil:
	// calls.DefaultMaxBodyBytes).
	MaxBody func() int64
	// Trusted returns the trusted-proxy list: whose X-Forwarded-For/-Proto/
	// -Host are believed (URL reconstruction, the client IP of allow-lists).
	// nil: nobody's.
	Trusted func() *forwarded.Trusted
	// Tracer, when set, traces each webhook and its plugin RPCs (package
	// tracing); nil: tracing off, no span and no per-RPC handler.
	Tracer trace.TracerProvider
}

// Host runs provider plugins and serves their routes.
type Host struct {
	opts  Options
	log   *slog.Logger
	m     *metrics
	procs map[string]*proc
	order []string
}

// New returns a host for specs; Run starts the plugins. It fails when
// the plugins would have nowhere to put their sockets (checkSocketDir).
func New(opts Options, specs []Spec) (*Host, error) {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	dc := DefaultConfig()
	def(&opts.Config.RPCTimeout, dc.RPCTimeout)
	def(&opts.Config.StartTimeout, dc.StartTimeout)
	def(&opts.Config.HealthInterval, dc.HealthInterval)
	def(&opts.Config.RestartBackoffMax, dc.RestartBackoffMax)
	def(&opts.BackoffMin, 100*time.Millisecond)
	if opts.Current == nil {
		static := opts.Config
		opts.Current = func() Config { return static }
	}
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	if opts.Reg == nil {
		opts.Reg = prometheus.NewRegistry()
	}
	if len(specs) > 0 {
		if err := checkSocketDir(); err != nil {
			return nil, err
		}
	}
	h := &Host{opts: opts, log: opts.Log, m: newMetrics(opts.Reg), procs: map[string]*proc{}}
	for _, s := range specs {
		if _, dup := h.procs[s.Name]; dup {
			return nil, fmt.Errorf("provider %q configured twice", s.Name)
		}
		if s.Command == nil {
			return nil, fmt.Errorf("provider %q: no command", s.Name)
		}
		h.procs[s.Name] = newProc(h, s)
		h.order = append(h.order, s.Name)
		h.m.zero(s.Name)
	}
	return h, nil
}

// Names lists the providers in configuration order.
func (h *Host) Names() []string { return append([]string(nil), h.order...) }

// Run runs every plugin until ctx ends, then stops them. Plugins failing
// never make Run return: edge does not go down with a provider.
func (h *Host) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	for _, p := range h.procs {
		wg.Go(func() { p.run(ctx) })
	}
	wg.Wait()
	return nil
}

// Check is the readiness check of one provider: nil while its plugin runs.
func (h *Host) Check(name string) func(context.Context) error {
	return func(context.Context) error {
		p, ok := h.procs[name]
		if !ok {
			return errors.New("unknown provider")
		}
		if _, err, _ := p.state(); err != nil {
			return fmt.Errorf("plugin down: %w", err)
		}
		return nil
	}
}

// maxMediaHandshakeRetries bounds what a plugin may declare: each retry
// keeps a call whose pod could not be reached for up to a lease.
const maxMediaHandshakeRetries = 3

// MediaHandshakeRetries is how many times provider name opens a media
// WebSocket again after a failed handshake, as its plugin last declared it
// (plugins.Description.MediaHandshakeRetries, at most 3); 0 for an unknown
// provider or one whose plugin has not started yet. The media proxy asks
// it for a call's provider (proxy.Deps.HandshakeRetries).
func (h *Host) MediaHandshakeRetries(name string) int {
	p, ok := h.procs[name]
	if !ok {
		return 0
	}
	return int(p.mediaRetries.Load())
}

// ResumeReplay is the JSON "event" of each text message that opens
// provider name's media stream, in order, as its plugin last declared it
// (plugins.Description.ResumeReplay): the messages edge keeps from a
// call's stream and replays to a pod that takes the call over. nil for an
// unknown provider, one whose plugin has not started yet, or one that
// declared none: its calls cannot move to another pod. The slice is the
// caller's own copy.
func (h *Host) ResumeReplay(name string) []string {
	p, ok := h.procs[name]
	if !ok {
		return nil
	}
	if r := p.resumeReplay.Load(); r != nil {
		return slices.Clone(*r)
	}
	return nil
}

// AfterMove is what edge does for provider name when one of its calls
// moves to another pod, as its plugin last declared it
// (plugins.Description.ResumeNotice and LegEvents): zero for an unknown
// provider, one whose plugin has not started yet, or one that declared
// nothing. The slices are the caller's own copies.
func (h *Host) AfterMove(name string) AfterMove {
	p, ok := h.procs[name]
	if !ok {
		return AfterMove{}
	}
	a := p.afterMove.Load()
	if a == nil {
		return AfterMove{}
	}
	return AfterMove{Notices: slices.Clone(a.Notices), Legs: slices.Clone(a.Legs)}
}

// Reconfigure applies a changed spec (settings: Configure on the running
// process; binary: restart). The running process dry-runs new settings
// first (ValidateSettings): an error means the plugin refused them, the
// host logged and counted it, and the plugin keeps its last good settings.
// Unknown names are an error (adding a provider needs a restart of edge).
func (h *Host) Reconfigure(s Spec) error {
	p, ok := h.procs[s.Name]
	if !ok {
		return fmt.Errorf("unknown provider %q", s.Name)
	}
	return p.reconfigure(s)
}

// WaitUp blocks until provider name runs a process started after the one
// numbered after (0: any), and returns that start's number and its pid.
// Tests and the start-up log use it; nothing on the request path waits.
func (h *Host) WaitUp(ctx context.Context, name string, after int) (gen, pid int, err error) {
	p, ok := h.procs[name]
	if !ok {
		return 0, 0, fmt.Errorf("unknown provider %q", name)
	}
	for {
		l, _, changed := p.state()
		if l != nil && l.gen > after {
			return l.gen, pidOf(l), nil
		}
		select {
		case <-ctx.Done():
			_, err, _ := p.state()
			return 0, 0, fmt.Errorf("provider %s not up: %w (last error: %v)", name, ctx.Err(), err)
		case <-changed:
		}
	}
}

func pidOf(l *live) int { return pid(l.client) }
