package proxy

import (
	"context"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"

	"github.com/edge-voice/edge/internal/mediacontract"
	"github.com/edge-voice/edge/proxy/internal/relay"
	"github.com/edge-voice/edge/proxy/internal/relay/loop"
	"github.com/edge-voice/edge/proxy/internal/relay/pump"
	"github.com/edge-voice/edge/proxy/mediaurl"
)

// Signer mints and verifies the per-call media tokens (see mediaurl).
type Signer = mediaurl.Signer

// Leases is what the proxy needs of the allocator. Its types and errors
// are package mediacontract's, shared with the allocator's adapter
// (allocator.MediaLeases); the errors below are mediacontract's.
type Leases interface {
	// Claim admits the socket holder for the call's media on pod, across
	// every replica, in one Redis round trip, and returns the pod the call
	// is on: pod, or the one the call moved to after a failed connect to
	// pod (MoveCall), so that the URL the provider holds stays valid.
	// ErrNoAllocation when the call is not live on pod, ErrClaimed when
	// another socket holds it. The claim ends with the call (Release).
	// The call's merchant, creator and earlier moves come with it, for the
	// socket's log lines.
	Claim(ctx context.Context, callID, pod, holder string) (mediacontract.Claimed, error)
	// ResumeCall is MoveCall for a call whose pod died while holder's
	// socket relayed it (reason "lost"); the call's record counts the
	// move as a resumption. blame false: the pod's failure is not recorded
	// (the instance that died is no longer the one the name stands for).
	ResumeCall(ctx context.Context, callID, pod, holder string, ej mediacontract.Ejection, blame bool) (newPod string, ejected bool, err error)
	// MoveCall moves the call off pod, which holder's socket could not
	// reach for reason, to another pod of its chain in one Redis script
	// (the pod's failure recorded and the pod ejected under ej, the
	// call's info, lease and owner moved, the claim kept) and returns the
	// new pod and whether pod was ejected. ErrNoOtherPod when the chain
	// has none (the failure is recorded all the same), ErrNoAllocation when
	// the call is not on pod, ErrClaimed when holder lost the claim.
	MoveCall(ctx context.Context, callID, pod, holder, reason string, ej mediacontract.Ejection) (newPod string, ejected bool, err error)
	// PodFailed records a failed dial, a pod lost mid-call or a failed
	// probe, ejecting the pod under ej; it reports whether the pod is
	// ejected.
	PodFailed(ctx context.Context, pod, reason string, ej mediacontract.Ejection) (bool, error)
	// Ejected lists the ejected pods with their next probe time.
	Ejected(ctx context.Context) ([]mediacontract.EjectedPod, error)
	// Reinstate takes a pod whose probe succeeded back into allocation; it
	// reports whether the pod was ejected.
	Reinstate(ctx context.Context, pod string) (bool, error)
	// Unclaim drops holder's claim on the call, for a socket that ends
	// before it is relayed while its call lives on (a failed pod dial), so
	// that the provider's retry is admitted on any replica. Another
	// holder's claim is left alone.
	Unclaim(ctx context.Context, callID, holder string) error
	// UnclaimFailed is Unclaim for a socket that reached no pod while its
	// call is kept for the provider's own retry of the handshake: the
	// failure is counted on the call (Claimed.FailedHandshakes, as every
	// replica's next claim sees it). ErrNoAllocation when holder held no
	// claim (the call ended, or another socket holds it).
	UnclaimFailed(ctx context.Context, callID, holder string) error
	// PodCall returns the call holding an exclusive pod (ErrNoAllocation
	// when none, or when the pod is shared and so ambiguous). Used only for
	// sockets without a token when proxy.require_token is false.
	PodCall(ctx context.Context, pod string) (callID string, err error)
	// Renew extends a batch of leases in one round trip, each only while
	// its Holder holds the call's claim: RenewalLost means leases[i]'s call
	// lost its pod or the socket its claim, RenewalPodGone that its pod
	// left the registry and the call is the socket's to move.
	Renew(ctx context.Context, leases []mediacontract.Lease) ([]mediacontract.Renewal, error)
	// MarkResumable tells every replica that holder's socket moves its
	// call to another pod when its pod dies or leaves the registry: the
	// pod's removal then leaves the call to the socket (RenewalPodGone)
	// instead of ending it. ErrNoAllocation when holder holds no claim.
	MarkResumable(ctx context.Context, callID, holder string) error
	// Release ends the call's allocation (fenced, idempotent) and returns an
	// outcome label for metrics ("released", "not_found", "stale"). end is
	// how the socket ended and what it carried, kept in the call's record
	// (written once, at the end: nothing per message).
	Release(ctx context.Context, callID string, end mediacontract.SocketEnd) (outcome string, err error)
	// ReleaseRefused ends, once Redis answers, a call whose socket this
	// replica refused because Redis did not answer its claim, unless a
	// socket (another replica's) holds the call by then. It does not
	// wait for Redis.
	ReleaseRefused(callID string)
}

// Deps is what a proxy works with, given to New and never changed after.
type Deps struct {
	// Lookup resolves a pod name to "ip:port"; the only source of upstream
	// addresses, so no request can choose where edge dials.
	Lookup func(pod string) (addr string, ok bool)
	Leases Leases
	Signer *Signer
	// Forwarded gives the X-Forwarded-* values for the pod; nil trusts no
	// client header (the peer's address, the connection's scheme).
	Forwarded ForwardedFunc
	// Tracer traces each socket's life and its pod dials and passes the
	// socket's trace context to the pod (tracing.go); nil: tracing off,
	// nothing traced and no traceparent written.
	Tracer trace.Tracer
	// HandshakeRetries says how many times provider (a call's creator
	// "provider:<name>") opens the media WebSocket again on its own after
	// a failed handshake (plugins.Description.MediaHandshakeRetries). A
	// socket that reaches no pod then leaves its call for the retry
	// instead of ending it, as long as fewer of the call's sockets failed.
	// nil: no provider retries; every such socket ends its call.
	HandshakeRetries func(provider string) int
	// Opening names the JSON events that open provider's media stream
	// (plugins.Description.ResumeReplay): what a pod that takes a call
	// over mid-call is given again (resume.go). nil, or none declared:
	// that provider's calls end when their pod dies, as without
	// proxy.resume.
	Opening func(provider string) []string
	// AfterMove says what provider is told when one of its calls moves,
	// and which of its messages answer a pod's by name
	// (plugins.Description.ResumeNotice, LegEvents; aftermove.go). nil,
	// and none declared: the provider is told nothing, and every message
	// reaches the pod of the moment.
	AfterMove func(provider string) AfterMove
	// Upgrade says what of a client's media upgrade provider's pods may
	// read (plugins.Description.MediaHeaders, MediaSubprotocols); see
	// podHeader. nil, and a call no provider created: no client header
	// and no subprotocol reaches a pod.
	Upgrade func(provider string) ClientUpgrade
	// Log is the proxy's logger (nil: discarded).
	Log *slog.Logger
	// Registerer takes the proxy's metrics (nil: registered nowhere).
	Registerer prometheus.Registerer
}

// Proxy serves media sockets. It is an http.Handler for /ws/pod/ and a
// component: Run renews leases and, when its context ends, drains.
type Proxy struct {
	// What New was given (Deps), fixed for the proxy's life.
	lookup           func(pod string) (addr string, ok bool)
	leases           Leases
	signer           *Signer
	forwarded        ForwardedFunc
	tracer           trace.Tracer
	handshakeRetries func(provider string) int
	opening          func(provider string) []string
	afterMove        func(provider string) AfterMove
	upgrade          func(provider string) ClientUpgrade
	log              *slog.Logger

	conf    atomic.Pointer[Config]
	metrics *metrics

	mu sync.Mutex
	// sockets are the open sockets, by what their relay knows of them.
	sockets map[*relay.Socket]*socket
	byCall  map[string]*socket // the open socket of each call
	closing bool               // shutdown started: admit nothing more
	// handlers counts admitted sockets until their release is done; Run
	// waits for it so that main closes Redis only after the releases.
	handlers sync.WaitGroup
	changed  chan struct{} // closed and replaced when sockets changes

	// relayEnv is what every relay is given: this proxy as its Host, the
	// limits and the per-direction counters.
	relayEnv relay.Env
	// redisRefusals paces the log lines of sockets refused for want of
	// Redis (redisrefusal.go).
	redisRefusals refusalLog
	// moves bounds each merchant's mid-call moves on this replica.
	moves *moveBudget
	// pump is the goroutine relay.
	pump *pump.Relay
	// loops are the epoll relay's event loops, running while Run does
	// (nil: none, every socket takes the goroutine relay).
	loops loop.Loops
}

// New returns a proxy serving cfg with what d gives it.
func New(cfg Config, d Deps) *Proxy {
	if d.Log == nil {
		d.Log = slog.New(slog.DiscardHandler)
	}
	p := &Proxy{
		lookup: d.Lookup, leases: d.Leases, signer: d.Signer, forwarded: d.Forwarded,
		tracer: d.Tracer, handshakeRetries: d.HandshakeRetries, opening: d.Opening, afterMove: d.AfterMove, upgrade: d.Upgrade, log: d.Log,
		metrics: newMetrics(d.Registerer),
		sockets: map[*relay.Socket]*socket{},
		byCall:  map[string]*socket{},
		changed: make(chan struct{}),
		moves:   newMoveBudget(time.Now),
	}
	p.metrics.relayInfo.relays = p.Relays
	p.relayEnv = relay.Env{
		Host: (*relayHost)(p),
		Limits: func() relay.Limits {
			c := p.cfg()
			return relay.Limits{MaxMessageBytes: c.MaxMessageBytes, IdleTimeout: c.IdleTimeout, PodWriteTimeout: c.PodWriteTimeout,
				PodPingInterval: c.PodPingInterval, PodSilence: c.PodSilence}
		},
		Dirs: p.metrics.dirs,
		Log:  d.Log,
	}
	p.pump = pump.New(p.relayEnv)
	p.Apply(cfg)
	return p
}

// Relays returns the relay proxy.relay asks for and the one new sockets
// take (they differ where edge fell back, and until Run started the
// loops).
func (p *Proxy) Relays() (configured, running Relay) {
	configured = p.cfg().Relay
	if configured == "" {
		configured = relayEpoll
	}
	return configured, p.runningRelay()
}

// Apply swaps the configuration; open sockets keep flowing.
func (p *Proxy) Apply(cfg Config) {
	if cfg.RenewInterval <= 0 {
		cfg.RenewInterval = minRenewInterval
	}
	def := DefaultConfig()
	if cfg.DialTimeout <= 0 {
		cfg.DialTimeout = def.DialTimeout
	}
	// The pod health keys are optional for callers outside edge's
	// validated config (tests, benchmarks); MaxEjectionPercent 0 stays:
	// nothing is ejected.
	if cfg.ConnectAttempts <= 0 {
		cfg.ConnectAttempts = def.ConnectAttempts
	}
	if cfg.ConnectBudget <= 0 {
		cfg.ConnectBudget = time.Duration(cfg.ConnectAttempts)*cfg.DialTimeout + time.Second
	}
	if cfg.EjectBackoff <= 0 {
		cfg.EjectBackoff = def.EjectBackoff
	}
	cfg.EjectMaxBackoff = max(cfg.EjectMaxBackoff, cfg.EjectBackoff)
	if cfg.HealthPath == "" {
		cfg.HealthPath = def.HealthPath
	}
	if cfg.PodWriteTimeout <= 0 {
		cfg.PodWriteTimeout = def.PodWriteTimeout
	}
	// Pings stay off where a caller outside edge's validated config (a
	// test, a benchmark) leaves the interval 0, as edge's config says 0.
	if cfg.PodPingInterval > 0 && cfg.PodSilence <= cfg.PodPingInterval {
		cfg.PodSilence = max(def.PodSilence, 3*cfg.PodPingInterval)
	}
	if cfg.ProbeInterval <= 0 {
		cfg.ProbeInterval = def.ProbeInterval
	}
	if cfg.Relay == "" {
		cfg.Relay = relayEpoll
	}
	if cfg.Resume.MaxPerCall <= 0 {
		cfg.Resume.MaxPerCall = def.Resume.MaxPerCall
	}
	if cfg.Resume.Budget <= 0 {
		cfg.Resume.Budget = def.Resume.Budget
	}
	if cfg.Resume.PoisonWindow <= 0 {
		cfg.Resume.PoisonWindow = def.Resume.PoisonWindow
	}
	if cfg.Resume.MaxPerMerchantPerMinute <= 0 {
		cfg.Resume.MaxPerMerchantPerMinute = def.Resume.MaxPerMerchantPerMinute
	}
	p.conf.Store(&cfg)
	p.metrics.maxSockets.Set(float64(max(cfg.MaxSockets, 0)))
}

func (p *Proxy) cfg() *Config { return p.conf.Load() }

// clientUpgrade is what of a client's upgrade the pods of provider (""
// for a call no provider created) may read.
func (p *Proxy) clientUpgrade(provider string) ClientUpgrade {
	if provider == "" || p.upgrade == nil {
		return ClientUpgrade{}
	}
	return p.upgrade(provider)
}

// Active is the number of open sockets.
func (p *Proxy) Active() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.sockets)
}

// admit registers s unless the proxy is draining or full.
func (p *Proxy) admit(s *socket) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case p.closing:
		return errShuttingDown
	case p.cfg().MaxSockets > 0 && len(p.sockets) >= p.cfg().MaxSockets:
		return errOverloaded
	case p.byCall[s.CallID] != nil:
		return errDuplicate
	}
	p.sockets[&s.Socket] = s
	p.byCall[s.CallID] = s
	p.handlers.Add(1)
	p.notifyLocked()
	return nil
}

func (p *Proxy) forget(s *socket) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.sockets, &s.Socket)
	if p.byCall[s.CallID] == s {
		delete(p.byCall, s.CallID)
	}
	p.notifyLocked()
}

func (p *Proxy) notifyLocked() {
	close(p.changed)
	p.changed = make(chan struct{})
}

// snapshot returns the open sockets and a channel closed at the next change.
func (p *Proxy) snapshot() ([]*socket, <-chan struct{}) {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]*socket, 0, len(p.sockets))
	for _, s := range p.sockets {
		out = append(out, s)
	}
	return out, p.changed
}

// Run renews the leases of every open socket until ctx ends, then stops
// admitting sockets, keeps renewing while the open ones finish, closes those
// left after DrainTimeout with 1001, and returns once every socket's call is
// released. http.Server.Shutdown does not see hijacked sockets: this does.
func (p *Proxy) Run(ctx context.Context) error {
	if err := p.loops.Start(loop.Options{
		Env: p.relayEnv, Uring: p.cfg().Relay == relayUring, UringBatch: p.cfg().UringBatch,
		Carried: func(uring, tls bool) {
			if uring {
				p.countRelayed(relayUring, tls)
			} else {
				p.countRelayed(relayEpoll, tls)
			}
		},
		UringOwnBufs: p.metrics.uringOwnBufs,
	}); err != nil {
		p.log.Warn("event loops unavailable: media sockets use the goroutine relay", "err", err)
	}
	renewCtx, stopRenew := context.WithCancel(context.WithoutCancel(ctx))
	renewDone := make(chan struct{})
	go func() {
		defer close(renewDone)
		p.renewLoop(renewCtx)
	}()
	probeDone := make(chan struct{})
	go func() {
		defer close(probeDone)
		p.probeLoop(ctx)
	}()
	<-ctx.Done()
	<-probeDone

	p.mu.Lock()
	p.closing = true
	p.mu.Unlock()
	deadline := time.NewTimer(p.cfg().DrainTimeout)
	defer deadline.Stop()
	if n := p.Active(); n > 0 {
		p.log.Info("draining media sockets", "open", n, "deadline", p.cfg().DrainTimeout)
	}
	for {
		open, changed := p.snapshot()
		if len(open) == 0 {
			break
		}
		select {
		case <-changed:
			continue
		case <-deadline.C:
			p.log.Warn("drain deadline passed: closing media sockets", "open", len(open))
			for _, s := range open {
				s.Stop(closeGoingAway, reasonShuttingDown)
			}
		}
		p.handlers.Wait()
	}
	p.handlers.Wait()
	// Every socket has ended: nothing is left on the loops.
	p.loops.Stop()
	stopRenew()
	<-renewDone
	return nil
}

// ServeHTTP is the /ws/pod/ route; see admit.go.
func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) { p.serve(w, r) }
