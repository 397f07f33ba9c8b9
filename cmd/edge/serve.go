package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"golang.org/x/sync/errgroup"

	"github.com/edge-voice/edge/allocator"
	"github.com/edge-voice/edge/api"
	"github.com/edge-voice/edge/calls"
	"github.com/edge-voice/edge/config"
	"github.com/edge-voice/edge/proxy"
)

// component is anything that runs until its context ends.
type component interface {
	Run(ctx context.Context) error
}

const usage = `usage: edge [flags]          serve
       edge check-config [flags]  validate the configuration and exit
       edge ws URL                open a media URL, send Twilio-like frames, print the echoes
       edge admin COMMAND         a running edge's pods, calls and config (edge admin --help)
       edge version

flags:
%s`

// serve runs edge until ctx ends (SIGINT/SIGTERM). It builds every part in
// dependency order as a local value, each handed what it needs when it is
// made, then runs them all in one errgroup. Settings that change at run
// time reach the parts in one place, the watcher's OnChange below; the
// parts that read a setting on use get current, the config in effect.
func serve(ctx context.Context, args, environ []string, stderr io.Writer) error {
	cfg, err := config.Load(args, environ)
	if errors.Is(err, config.ErrHelp) {
		fmt.Fprintf(stderr, usage, config.Usage())
		return err
	}
	if err != nil {
		return fmt.Errorf("invalid configuration:\n%w", err)
	}
	// Log lines leave in batches (logwriter.go); everything this
	// function writes to stderr goes the same way, in order.
	lw := newLogWriter(stderr)
	defer lw.Close()
	stderr = lw
	level := new(slog.LevelVar)
	level.Set(cfg.Log.SlogLevel())
	// Every line names this replica: a call's thread crosses replicas
	// (webhook on one, socket on another).
	log := newLogger(cfg.Log.Format, level, stderr).With("replica", replicaName(cfg))
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	watcher, err := newWatcher(cfg, args, environ, log, reg)
	if err != nil {
		return err
	}
	current := watcher.Current
	// Certificates are read first: a bad file refuses the start before
	// anything else starts.
	certs, err := newTLS(cfg, log, reg)
	if err != nil {
		return err
	}
	log.Info("starting edge", "version", version, "config", cfg)
	tr, err := newTracing(ctx, environ, log)
	if err != nil {
		return err
	}
	// Deferred before Redis's close, so run after it: the last spans go out.
	defer tr.flush(log)

	rdb, closeRedis, err := newRedis(cfg, log)
	if err != nil {
		return err
	}
	// Deferred first, so run last: Redis closes after every component has
	// returned, the media proxy's releases of its calls included.
	defer closeRedis()
	if err := tr.instrument(rdb); err != nil {
		return err
	}
	if err := certs.attachACME(cfg, rdb, log, reg); err != nil {
		return err
	}
	agents, fakePods, err := newFakeAgents(cfg, log)
	if err != nil {
		return err
	}
	alloc, err := newAllocator(ctx, rdb, cfg, reg, log)
	if err != nil {
		return err
	}
	alloc.TraceScripts(tr.scripts())
	// Deferred after Redis's close, so run before it, once every component
	// has returned (the media drain and its releases included): a graceful
	// stop leaves the replicas its peers watch instead of being found dead.
	defer leaveReplicas(alloc, instanceName(cfg), log)
	warnPredecessorCalls(ctx, alloc, cfg, log)
	acc, err := newAccess(cfg, log)
	if err != nil {
		return err
	}
	signer := newSigner(cfg, log)
	svc := calls.NewService(alloc, signer, func() string { return current().PublicURL() }, log)
	pools, err := newPools(ctx, cfg, current, alloc, fakePods, reg, log)
	if err != nil {
		return err
	}
	provs, err := newProviders(cfg, current, svc, alloc, acc.trusted, tr.provider(), reg, log)
	if err != nil {
		return err
	}
	// A provider that retries a failed media handshake (Exotel) keeps its
	// call through that failure, so the retry is admitted.
	px := newMedia(cfg, pools.registry.Lookup, alloc, signer, acc.headers, provs,
		tr.tracer("github.com/edge-voice/edge/proxy"), reg, log)

	// Redis is every replica's: a blip of it within http.readiness_redis_grace
	// leaves the replicas in the balancer (webhooks wait or get the
	// fallback answer) instead of taking them all out at once. The other
	// checks are this replica's own and fail it at once.
	ready := &api.Readiness{Log: log.With("component", "readiness")}
	ready.MustRegister(reg)
	ready.AddShared("redis", func() time.Duration { return current().HTTP.ReadinessRedisGrace },
		func(ctx context.Context) error { return rdb.Ping(ctx).Err() })
	if pools.synced != nil {
		ready.Add("pods", pools.synced)
	}
	ready.Add("media", mediaReady(px, current))
	for _, name := range provs.Names() {
		ready.Add("plugin "+name, provs.Check(name))
	}
	// One allowance of admin credential failures per source, spent on
	// every listener alike.
	authThrottle := api.NewAuthThrottle(func() api.AdminAuth { return current().AdminAuth })
	authThrottle.MustRegister(reg)
	surface := &api.Surface{
		Handlers: &api.Handlers{
			Calls: svc, Pools: alloc, Records: alloc, Callers: acc.callers, Log: log,
			MaxBody:  func() int64 { return current().HTTP.MaxBodyBytes },
			IsLeader: pools.manager.IsLeader,
			Tracer:   tr.provider(),
		},
		Ready:          ready,
		Metrics:        promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}),
		AdminToken:     func() string { return current().AdminToken },
		AuthThrottle:   authThrottle,
		RequestTimeout: func() time.Duration { return current().HTTP.RequestTimeout },
		BodyTimeout:    func() time.Duration { return current().HTTP.BodyTimeout },
		WriteTimeout:   func() time.Duration { return current().HTTP.WriteTimeout },
		Providers:      provs,
		Media:          px,
		LogLevel:       &api.LogLevel{Var: level, Log: log},
		RunningConfig:  func() json.Marshaler { return current().Effective() },
		Page: &api.StatusPage{Replica: replicaName(cfg), Relay: func() (string, string) {
			c, r := px.Relays()
			return string(c), string(r)
		}},
		Config: &api.ConfigAPI{Alloc: alloc, Log: log, OnTierChange: func(tc allocator.TierConfig) {
			// This replica applies at once; the others within pool.tier_config_refresh.
			alloc.ApplyTiers(tc)
		}, OnMerchantChange: pools.refresher.TakeMerchants},
	}
	pub, adm, err := newListeners(cfg, current, surface, certs, acc, reg, log)
	if err != nil {
		return err
	}

	// The one place run-time changes are applied, in this order. The
	// watcher calls it from its Run, so it is set before Run starts.
	watcher.OnChange = func(old, cur *config.Config) {
		level.Set(cur.Log.SlogLevel())
		// Tiers stay Redis's (the file only bootstrapped them): only the
		// TTLs come from the file.
		alloc.ApplyTTLs(cur.Allocator)
		acc.Apply(cur)
		pools.Apply(cur)
		px.Apply(cur.Proxy)
		signer.SetTTL(cur.Proxy.TokenTTL)
		provs.Apply(old, cur)
	}
	// "edge is ready" once readiness first passes (the plugins up), after
	// the quick start, which is printed only on the built-in fake agents,
	// where its curls work.
	announce := &readyAnnouncer{ready: ready, log: log, announce: func() {
		if len(agents) > 0 {
			twilio := slices.Contains(provs.Names(), "twilio") && cfg.Providers.Plugins["twilio"].AuthTokens == ""
			printQuickStart(stderr, pub.URL(), adm.URL(), cfg.OpenMode(), twilio, cfg.AdminToken != "")
		}
		log.Info("edge is ready", "public", pub.URL(), "admin", adm.URL())
	}}

	// The Waker wakes this replica's calls waiting for capacity
	// (admission.wait); without it no call waits.
	// ready checks Redis in the background: /readyz answers from what it
	// last heard, whatever Redis does.
	components := []component{ready, watcher, alloc.Waker(), pools.source, pools.manager, pools.refresher, pools.presence, px, provs, pub, adm, announce}
	internal, err := newInternalListener(cfg, current, surface, acc, reg, log)
	if err != nil {
		pub.Close()
		adm.Close()
		return err
	}
	if internal != nil {
		components = append(components, internal)
	}
	metrics, err := newMetricsListener(cfg, current, surface, acc, reg, log)
	if err != nil {
		pub.Close()
		adm.Close()
		if internal != nil {
			internal.Close()
		}
		return err
	}
	if metrics != nil {
		components = append(components, metrics)
	}
	components = append(components, certs.components()...)
	for _, ag := range agents {
		components = append(components, ag)
	}
	// The parts run until http.shutdown_delay after the signal (ctx);
	// readiness turns false at the signal, so load balancers stop sending
	// new calls while edge still takes the ones already on their way.
	runCtx, stopParts := context.WithCancel(context.WithoutCancel(ctx))
	defer stopParts()
	g, gctx := errgroup.WithContext(runCtx)
	for _, c := range components {
		g.Go(func() error { return c.Run(gctx) })
	}
	g.Go(func() error {
		select {
		case <-ctx.Done():
		case <-gctx.Done(): // a part failed: stop now
		}
		ready.Stop()
		if d := current().HTTP.ShutdownDelay; d > 0 && gctx.Err() == nil {
			log.Info("stopping: not ready, still serving for http.shutdown_delay while load balancers catch up", "shutdown_delay", d)
			t := time.NewTimer(d)
			defer t.Stop()
			select {
			case <-t.C:
			case <-gctx.Done():
			}
		}
		stopParts()
		return nil
	})
	err = g.Wait()
	log.Info("edge stopped", "err", err)
	return err
}

// newListeners binds both listeners now, so that a port in use fails the
// start; each terminates TLS when its certificate store is set.
func newListeners(cfg *config.Config, current func() *config.Config, s *api.Surface, certs tlsStores, acc *access, reg prometheus.Registerer, log *slog.Logger) (pub, adm *api.Listener, err error) {
	lc := listenerConfig(cfg, current, acc)
	lc.TLS = serverConfig(certs.public, certs.acme)
	// Media sockets arrive on the public listener: its TLS records can go
	// to the proxy's epoll relay (proxy/internal/tls13/handoff.go).
	lc.TLSListener = proxy.TLSListener
	pub, err = api.NewListener("public", cfg.Listen.Public, s.Public(), lc, log, reg)
	if err != nil {
		return nil, nil, fmt.Errorf("listen.public: %w", err)
	}
	lc.TLS, lc.TLSListener = serverConfig(certs.admin, nil), nil
	adm, err = api.NewListener("admin", cfg.Listen.Admin, s.Admin(), lc, log, reg)
	if err != nil {
		pub.Close()
		return nil, nil, fmt.Errorf("listen.admin: %w", err)
	}
	return pub, adm, nil
}

// listenerConfig is what every listener shares: the HTTP limits, the
// access log (read per request) and the client address as the trusted
// proxies name it.
func listenerConfig(cfg *config.Config, current func() *config.Config, acc *access) api.ListenerConfig {
	return api.ListenerConfig{
		ReadHeaderTimeout: cfg.HTTP.ReadHeaderTimeout, IdleTimeout: cfg.HTTP.IdleTimeout,
		MaxConns:  cfg.HTTP.MaxConnections,
		Grace:     func() time.Duration { return current().HTTP.ShutdownTimeout },
		AccessLog: func() api.AccessLog { return current().HTTP.AccessLogConfig() },
		ClientIP:  func(r *http.Request) netip.Addr { return acc.trusted().ClientIP(r) },
	}
}

// newWatcher returns the watcher that applies file edits at run time (see
// config.Watcher) and counts them. It logs rejections and restart-only
// changes itself.
func newWatcher(cfg *config.Config, args, environ []string, log *slog.Logger, reg prometheus.Registerer) (*config.Watcher, error) {
	w, err := config.NewWatcher(cfg, args, environ, log)
	if err != nil {
		return nil, err
	}
	reg.MustRegister(
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "edge_config_reloads_total", Help: "Configuration file changes applied at run time.",
		}, func() float64 { return float64(w.Reloads()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "edge_config_rejects_total", Help: "Configuration file changes rejected (unreadable or invalid); the last good configuration stayed.",
		}, func() float64 { return float64(w.Rejects()) }),
	)
	return w, nil
}

func newLogger(format string, level *slog.LevelVar, w io.Writer) *slog.Logger {
	opts := &slog.HandlerOptions{Level: level}
	if format == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

// leaveReplicas takes this replica out of the replicas its peers watch
// for deaths (allocator.Leave), unless calls of it are pending: those stay
// for the peers' dead-replica check to end, as after a crash.
func leaveReplicas(alloc *allocator.Allocator, name string, log *slog.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	pending, err := alloc.Leave(ctx, name)
	switch {
	case err != nil:
		log.Warn("could not leave the replicas: peers will find this one stopped and end what it held", "err", err)
	case pending > 0:
		log.Info("stopped with calls pending (a socket held, an answer whose socket has not come): peers end them", "calls", pending)
	default:
		log.Info("left the replicas")
	}
}

// replicaName is this replica's identity in logs and leader election:
// leader.identity, else the host name (in Kubernetes, the pod name).
func replicaName(cfg *config.Config) string {
	if cfg.Leader.Identity != "" {
		return cfg.Leader.Identity
	}
	name, _ := os.Hostname()
	return name
}

// processID tells this process apart from an earlier one of the same
// replica (a pod restarted under the same name): the calls it relays and
// answers are recorded under instanceName, so that the calls of a process
// killed with -9 are found dead even when its successor, under the same
// replica name, is already beating.
var processID = func() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}()

// instanceName is this process as Redis knows it: its connections' client
// name, its heartbeat, and the socket_replica and answered_by of its calls.
func instanceName(cfg *config.Config) string {
	return replicaName(cfg) + "/" + processID
}

// redactURL hides a password in a Redis URL for the log.
func redactURL(s string) string {
	if s == "" {
		return "(embedded)"
	}
	u, err := url.Parse(s)
	if err != nil {
		return "(unparsable url)"
	}
	return u.Redacted()
}
