package providers

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-plugin"

	"github.com/edge-voice/edge/plugins"
)

// proc supervises one provider plugin: it starts the process, keeps it
// configured, checks it answers, and restarts it with backoff.
type proc struct {
	name string
	h    *Host
	log  *slog.Logger

	spec atomic.Pointer[Spec] // the spec to run: configured, or a reload's
	live atomic.Pointer[live] // nil while down
	// good is the last spec a process accepted with Configure: what a
	// refused reload falls back to.
	good atomic.Pointer[Spec]

	// mediaRetries is the provider's last declared
	// Description.MediaHandshakeRetries, kept while the plugin restarts:
	// the provider retries whether or not its plugin is up.
	mediaRetries atomic.Int32
	// resumeReplay is the provider's last declared
	// Description.ResumeReplay (nil: none, or not started yet), kept
	// while the plugin restarts: calls in progress move to another pod
	// whether or not their plugin is up. The slice it points to is never
	// changed: a new declaration stores a new one.
	resumeReplay atomic.Pointer[[]string]
	// mediaUpgrade is the provider's last declared media headers and
	// subprotocols, kept while the plugin restarts, as resumeReplay is.
	mediaUpgrade atomic.Pointer[MediaUpgrade]
	// afterMove is what the provider declared of a move (notices, leg
	// events), kept while the plugin restarts, as resumeReplay is.
	afterMove atomic.Pointer[AfterMove]

	kick chan struct{} // an RPC failed: check now
	// applying serializes apply, so that the last one hands over the
	// latest spec, not one a concurrent reload replaced.
	applying sync.Mutex

	mu      sync.Mutex
	changed chan struct{} // closed and replaced on every up/down change
	err     error         // why it is down
	gen     int           // starts that came up
}

// exitPoll is how often a running plugin's process is checked for exit.
const exitPoll = 50 * time.Millisecond

// live is one running plugin process.
type live struct {
	client *plugin.Client
	prov   plugins.Provider
	routes []plugins.Route
	// rendersFallback: the plugin answers Failure.Fallback itself (one
	// built before the field did not say so, and edge answers for it).
	rendersFallback bool
	// params are the media URL parameters the plugin declared.
	params mediaParams
	gen    int
	spec   *Spec // what the process was started and configured with
}

func newProc(h *Host, s Spec) *proc {
	p := &proc{name: s.Name, h: h, log: h.log.With("plugin", s.Name), kick: make(chan struct{}, 1), changed: make(chan struct{})}
	p.spec.Store(&s)
	p.err = errors.New("not started yet")
	return p
}

// run keeps the plugin running until ctx ends.
func (p *proc) run(ctx context.Context) {
	backoff := time.Duration(0)
	for ctx.Err() == nil {
		started := time.Now()
		l, err := p.start(ctx)
		if err != nil {
			p.setDown(err)
			p.log.Error("provider plugin failed to start", "err", err, "retry_in", backoff)
		} else {
			p.setUp(l)
			if s := p.spec.Load(); s != l.spec {
				// reconfigure ran during the start and found no process
				// to dry-run the settings: this one does it now.
				if p.validate(l, s) != nil {
					p.spec.CompareAndSwap(s, l.spec)
				} else {
					p.apply(l)
				}
			}
			err = p.watch(ctx, l)
			l.client.Kill()
			if ctx.Err() != nil {
				p.setDown(errors.New("stopped"))
				return
			}
			p.setDown(err)
			p.log.Error("provider plugin down; restarting", "err", err, "retry_in", backoff)
		}
		p.h.m.restarts.WithLabelValues(p.name).Inc()
		// A plugin that ran a while gets a fresh backoff; one that crashes
		// at once backs off up to the maximum.
		if time.Since(started) > p.h.opts.Config.RestartBackoffMax {
			backoff = 0
		}
		if backoff > 0 {
			t := time.NewTimer(backoff)
			select {
			case <-ctx.Done():
				t.Stop()
			case <-t.C:
			}
		}
		backoff = min(max(2*backoff, p.h.opts.BackoffMin), p.h.opts.Config.RestartBackoffMax)
	}
}

// start launches the process, checks its name and configures it. Settings
// that changed while no process could dry-run them (a reload during a
// restart, a new binary) may be refused here: the process then gets the
// last good settings instead of crash-looping on the new ones.
func (p *proc) start(ctx context.Context) (*live, error) {
	s := p.spec.Load()
	sctx, cancel := context.WithTimeout(ctx, p.h.opts.Config.StartTimeout)
	defer cancel()
	client, prov, desc, err := launch(sctx, s, p.log, p.h.opts.Config.StartTimeout, p.h.dialOptions()...)
	if err != nil {
		return nil, err
	}
	if err := p.configure(sctx, prov, s); err != nil {
		good := p.good.Load()
		if good == nil || sameSettings(good, s) {
			client.Kill()
			return nil, err
		}
		s = p.fallBack(s, good, err)
		if err := p.configure(sctx, prov, s); err != nil {
			client.Kill()
			return nil, fmt.Errorf("last good settings: %w", err)
		}
	}
	p.good.Store(s)
	p.mediaRetries.Store(int32(min(max(desc.MediaHandshakeRetries, 0), maxMediaHandshakeRetries)))
	params, _ := compileMediaParams(desc.MediaParams) // launch checked it
	replay, _ := checkResumeReplay(desc.ResumeReplay) // launch checked it
	p.resumeReplay.Store(&replay)
	upgrade, _ := checkMediaUpgrade(desc.MediaHeaders, desc.MediaSubprotocols) // launch checked it
	p.mediaUpgrade.Store(&upgrade)
	after, _ := checkAfterMove(desc.ResumeNotice, desc.LegEvents, desc.ResumeReplay) // launch checked it
	p.afterMove.Store(&after)
	return &live{client: client, prov: prov, routes: desc.Routes, rendersFallback: desc.RendersFallback, params: params, spec: s}, nil
}

// configure hands the settings over and warns when nothing is verified.
func (p *proc) configure(ctx context.Context, prov plugins.Provider, s *Spec) error {
	c, err := prov.Configure(ctx, s.Settings)
	if err != nil {
		return fmt.Errorf("configure: %w", err)
	}
	for _, w := range c.Warnings {
		p.log.Warn("provider plugin setting", "warning", w)
	}
	if !c.Verifies {
		p.log.Warn("PROVIDER WEBHOOKS ARE NOT AUTHENTICATED: anyone who can reach edge can allocate pods through this provider; set providers.plugins." + s.Name + ".auth_tokens")
	}
	return nil
}

// watch returns when the process exits or stops answering. go-plugin
// offers no exit channel, so Exited (a field read) is polled often; the
// health RPC runs every HealthInterval, or at once after a failed RPC.
func (p *proc) watch(ctx context.Context, l *live) error {
	health := time.NewTicker(p.h.opts.Config.HealthInterval)
	defer health.Stop()
	exited := time.NewTicker(exitPoll)
	defer exited.Stop()
	misses := 0
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-exited.C:
			if l.client.Exited() {
				return errors.New("plugin process exited")
			}
			continue
		case <-health.C:
		case <-p.kick:
		}
		if l.client.Exited() {
			return errors.New("plugin process exited")
		}
		if err := p.ping(ctx, l); err != nil {
			// Two misses in a row: one slow answer on a busy machine is not a hang.
			if misses++; misses >= 2 {
				return fmt.Errorf("plugin stopped answering: %w", err)
			}
			continue
		}
		misses = 0
	}
}

// ping goes through the plugin's own code (Describe), not only its gRPC
// server, so a deadlocked provider counts as down.
func (p *proc) ping(ctx context.Context, l *live) error {
	ctx, cancel := context.WithTimeout(ctx, p.h.opts.Config.RPCTimeout)
	defer cancel()
	_, err := l.prov.Describe(ctx)
	return err
}

// reconfigure applies changed settings to the running process, or
// restarts it when the binary changed. The running process dry-runs new
// settings first: refused ones are not applied (nor the rest of s), and it
// keeps serving with its last good settings.
func (p *proc) reconfigure(s Spec) error {
	if l := p.live.Load(); l != nil && sameBinary(l.spec, &s) {
		if err := p.validate(l, &s); err != nil {
			return err
		}
	}
	p.spec.Store(&s)
	l := p.live.Load()
	if l == nil {
		return nil // the next start uses s, or run applies it to the one starting
	}
	return p.apply(l)
}

// apply brings the running process l to the current spec.
func (p *proc) apply(l *live) error {
	p.applying.Lock()
	defer p.applying.Unlock()
	s := p.spec.Load()
	if !sameBinary(l.spec, s) {
		p.log.Info("provider plugin binary changed; restarting")
		l.client.Kill()
		p.poke()
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), p.h.opts.Config.StartTimeout)
	defer cancel()
	err := p.configure(ctx, l.prov, s)
	if err == nil {
		p.good.Store(s)
		return nil
	}
	// Refused by a plugin that could not dry-run (built before
	// ValidateSettings), or the process is failing: keep the last good
	// settings. Configure them again in case the refusal left anything
	// half-applied; a process that cannot take them either is restarted.
	good := p.fallBack(s, p.good.Load(), err)
	if err2 := p.configure(ctx, l.prov, good); err2 != nil {
		p.log.Error("provider plugin refused its last good settings too; restarting it", "err", err2)
		l.client.Kill()
		p.poke()
	}
	return fmt.Errorf("provider %s: %w", p.name, err)
}

// poke makes the watcher check now.
func (p *proc) poke() {
	select {
	case p.kick <- struct{}{}:
	default:
	}
}

func (p *proc) setUp(l *live) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.gen++
	l.gen = p.gen
	p.live.Store(l)
	p.err = nil
	p.h.m.up.WithLabelValues(p.name).Set(1)
	close(p.changed)
	p.changed = make(chan struct{})
	p.log.Info("provider plugin running", "pid", pid(l.client), "routes", l.routes, "start", p.gen)
}

func (p *proc) setDown(err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.live.Store(nil)
	p.err = err
	p.h.m.up.WithLabelValues(p.name).Set(0)
	close(p.changed)
	p.changed = make(chan struct{})
}

// state returns the current process (nil while down), why it is down, and
// a channel closed at the next change.
func (p *proc) state() (*live, error, <-chan struct{}) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.live.Load(), p.err, p.changed
}

func pid(c *plugin.Client) int {
	if rc := c.ReattachConfig(); rc != nil {
		return rc.Pid
	}
	return 0
}
