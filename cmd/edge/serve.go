package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/redis/go-redis/v9"
	"golang.org/x/sync/errgroup"

	"github.com/edge-voice/edge/allocator"
	"github.com/edge-voice/edge/api"
	"github.com/edge-voice/edge/calls"
	"github.com/edge-voice/edge/config"
	"github.com/edge-voice/edge/poolmgr"
	"github.com/edge-voice/edge/proxy"
)

// component is anything that runs until its context ends.
type component interface {
	Run(ctx context.Context) error
}

// app holds what every part of edge is built from; the setup functions of
// this package (pools.go, media.go, providers.go) add their parts to it.
type app struct {
	log     *slog.Logger
	level   *slog.LevelVar
	reg     *prometheus.Registry
	watcher *config.Watcher
	rdb     redis.UniversalClient
	alloc   *allocator.Allocator
	calls   *calls.Service
	callers *api.Callers
	trust   trust
	signer  *proxy.Signer
	ready   *api.Readiness
	surface *api.Surface

	// embedded is set when edge runs its in-process Redis (dev mode), and
	// fakePods lists the built-in fake agents it then registers.
	embedded bool
	fakePods []poolmgr.StaticPod

	// quickStart are more ready-to-paste hints for the start-up output,
	// given the bound public URL.
	quickStart []func(public string) string

	// publicAddr and adminAddr are the bound listener addresses.
	publicAddr, adminAddr string

	// pods resolves pod names to addresses on every replica (media proxy).
	pods interface {
		Lookup(pod string) (addr string, ok bool)
	}

	// isLeader reports whether this replica runs the leader loops.
	isLeader func() bool

	components []component
	// onReload are called, in order, with every applied config change.
	onReload []func(old, cur *config.Config)
	// closers run after every component has stopped, in reverse order.
	closers []func()
}

// cfg is the configuration in effect (reloads swap it).
func (a *app) cfg() *config.Config { return a.watcher.Current() }

func (a *app) add(c component)  { a.components = append(a.components, c) }
func (a *app) onClose(f func()) { a.closers = append(a.closers, f) }

// reloaded subscribes f to applied config changes.
func (a *app) reloaded(f func(old, cur *config.Config)) { a.onReload = append(a.onReload, f) }

// staticPods is the static pod list of cfg plus the built-in fake agents.
func (a *app) staticPods(cfg *config.Config) []poolmgr.StaticPod {
	return append(append([]poolmgr.StaticPod(nil), cfg.Pods.Static...), a.fakePods...)
}

func (a *app) close() {
	for i := len(a.closers) - 1; i >= 0; i-- {
		a.closers[i]()
	}
}

// serve runs edge until ctx ends (SIGINT/SIGTERM).
func serve(ctx context.Context, args, environ []string, stderr io.Writer) error {
	cfg, err := config.Load(args, environ)
	if errors.Is(err, config.ErrHelp) {
		fmt.Fprintf(stderr, "usage: edge [flags]          serve\n       edge check-config [flags]  validate the configuration and exit\n       edge ws URL                open a media URL, send Twilio-like frames, print the echoes\n       edge admin COMMAND         read and write tier and merchant config (edge admin --help)\n       edge version\n\nflags:\n%s", config.Usage())
		return err
	}
	if err != nil {
		return fmt.Errorf("invalid configuration:\n%w", err)
	}
	a := &app{level: new(slog.LevelVar), reg: prometheus.NewRegistry(), ready: &api.Readiness{}, isLeader: func() bool { return false }}
	a.level.Set(cfg.Log.SlogLevel())
	a.log = newLogger(cfg.Log.Format, a.level, stderr)
	defer a.close()
	a.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))

	if err := a.openRedis(ctx, cfg); err != nil {
		return err
	}
	if a.embedded {
		if err := a.startFakeAgents(ctx, cfg); err != nil {
			return err
		}
	}
	a.watcher, err = config.NewWatcher(cfg, args, environ, a.log)
	if err != nil {
		return err
	}
	a.log.Info("starting edge", "version", version, "config", a.cfg())

	if err := a.buildAllocator(ctx); err != nil {
		return err
	}
	if err := a.trust.apply(a.cfg()); err != nil {
		return err
	}
	if a.callers, err = newCallers(a.cfg(), a.log); err != nil {
		return err
	}
	a.reloaded(func(_, cur *config.Config) {
		if err := a.trust.apply(cur); err != nil {
			a.log.Error("trusted_proxies not applied", "err", err)
		}
		tokens, err := cur.GenericAPI.CallerTokens()
		if err != nil {
			a.log.Error("generic_api.tokens not applied: the previous tokens stay", "err", err)
			return
		}
		a.callers.Apply(cur.OpenMode(), tokens)
		warnExposure(cur, a.log)
	})
	a.signer = newSigner(a.cfg(), a.log)
	a.calls = calls.NewService(a.alloc, a.signer, func() string { return a.cfg().PublicURL() }, a.log)
	a.surface = &api.Surface{
		Handlers: &api.Handlers{
			Calls: a.calls, Pools: a.alloc, Callers: a.callers, Log: a.log,
			MaxBody:  func() int64 { return a.cfg().HTTP.MaxBodyBytes },
			IsLeader: func() bool { return a.isLeader() },
		},
		Ready:          a.ready,
		Metrics:        promhttp.HandlerFor(a.reg, promhttp.HandlerOpts{Registry: a.reg}),
		AdminToken:     func() string { return a.cfg().AdminToken },
		RequestTimeout: func() time.Duration { return a.cfg().HTTP.RequestTimeout },
		BodyTimeout:    func() time.Duration { return a.cfg().HTTP.BodyTimeout },
		WriteTimeout:   func() time.Duration { return a.cfg().HTTP.WriteTimeout },
	}

	for _, setup := range []func(context.Context, *app) error{setupPools, setupMedia, setupProviders} {
		if err := setup(ctx, a); err != nil {
			return err
		}
	}
	if err := a.listen(); err != nil {
		return err
	}
	a.watchConfig()
	a.printQuickStart(stderr)

	g, gctx := errgroup.WithContext(ctx)
	for _, c := range a.components {
		g.Go(func() error { return c.Run(gctx) })
	}
	// Readiness turns false as soon as shutdown starts, before listeners
	// close, so load balancers stop sending new calls.
	g.Go(func() error {
		<-gctx.Done()
		a.ready.Stop()
		return nil
	})
	err = g.Wait()
	a.log.Info("edge stopped", "err", err)
	return err
}

// openRedis connects to the configured Redis, or starts the embedded one.
func (a *app) openRedis(ctx context.Context, cfg *config.Config) error {
	var opts *redis.Options
	if cfg.Redis.URL == "" {
		addr, stop, err := startEmbeddedRedis()
		if err != nil {
			return fmt.Errorf("start embedded redis: %w", err)
		}
		a.onClose(stop)
		a.embedded = true
		opts = &redis.Options{Addr: addr}
		a.log.Warn("no redis.url configured: running an embedded in-process Redis (development only: state is lost on exit and not shared between replicas)")
	} else {
		var err error
		if opts, err = redis.ParseURL(cfg.Redis.URL); err != nil {
			return fmt.Errorf("redis.url: %w", err)
		}
	}
	opts.PoolSize = cfg.Redis.PoolSize
	opts.DialTimeout = cfg.Redis.DialTimeout
	opts.ReadTimeout = cfg.Redis.ReadTimeout
	opts.WriteTimeout = cfg.Redis.WriteTimeout
	// A context deadline bounds each call too (request_timeout).
	opts.ContextTimeoutEnabled = true
	rdb := redis.NewClient(opts)
	a.rdb = rdb
	a.onClose(func() { rdb.Close() })
	a.ready.Add("redis", func(ctx context.Context) error { return rdb.Ping(ctx).Err() })
	return nil
}

// buildAllocator makes the allocator and bootstraps voice:tier:config from
// the config file (SETNX): after the first start, Redis holds the truth.
func (a *app) buildAllocator(ctx context.Context) error {
	cfg := a.cfg()
	var err error
	a.alloc, err = allocator.New(a.rdb, cfg.Allocator, a.reg)
	if err != nil {
		return err
	}
	a.reg.MustRegister(allocator.NewPoolCollector(a.alloc))
	bctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	tiers, created, err := a.alloc.BootstrapTierConfig(bctx, cfg.Allocator.Tiers)
	if err != nil {
		return fmt.Errorf("redis at %s: %w", redactURL(cfg.Redis.URL), err)
	}
	a.log.Info("tier config", "source", map[bool]string{true: "bootstrapped from config", false: "read from redis"}[created], "chain", tiers.DefaultChain)
	a.alloc.ApplyTiers(tiers)
	if err := a.alloc.Preload(bctx); err != nil {
		return err
	}
	// Tiers stay Redis's: the file's only bootstrapped them.
	a.reloaded(func(_, cur *config.Config) { a.alloc.ApplyTTLs(cur.Allocator) })
	return nil
}

// listen binds both listeners now, so that a port in use fails the start.
func (a *app) listen() error {
	cfg := a.cfg()
	grace := func() time.Duration { return a.cfg().HTTP.ShutdownTimeout }
	lc := api.ListenerConfig{
		ReadHeaderTimeout: cfg.HTTP.ReadHeaderTimeout, IdleTimeout: cfg.HTTP.IdleTimeout,
		MaxConns: cfg.HTTP.MaxConnections, Grace: grace,
	}
	pub, err := api.NewListener("public", cfg.Listen.Public, a.surface.Public(), lc, a.log, a.reg)
	if err != nil {
		return fmt.Errorf("listen.public: %w", err)
	}
	adm, err := api.NewListener("admin", cfg.Listen.Admin, a.surface.Admin(), lc, a.log, a.reg)
	if err != nil {
		pub.Close()
		return fmt.Errorf("listen.admin: %w", err)
	}
	a.publicAddr, a.adminAddr = pub.Addr(), adm.Addr()
	a.add(pub)
	a.add(adm)
	return nil
}

// watchConfig applies file edits at run time (see config.Watcher).
func (a *app) watchConfig() {
	w := a.watcher
	w.OnChange = func(old, cur *config.Config) {
		a.level.Set(cur.Log.SlogLevel())
		for _, f := range a.onReload {
			f(old, cur)
		}
	}
	// The watcher logs rejections and restart-only changes itself.
	a.reg.MustRegister(
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "edge_config_reloads_total", Help: "Configuration file changes applied at run time.",
		}, func() float64 { return float64(w.Reloads()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "edge_config_rejects_total", Help: "Configuration file changes rejected (unreadable or invalid); the last good configuration stayed.",
		}, func() float64 { return float64(w.Rejects()) }),
	)
	a.add(w)
}

func newLogger(format string, level *slog.LevelVar, w io.Writer) *slog.Logger {
	opts := &slog.HandlerOptions{Level: level}
	if format == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

// localURL turns a bound address into a URL a user on this host can paste.
func localURL(scheme, addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return scheme + "://" + addr
	}
	if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
		host = "127.0.0.1"
	}
	return scheme + "://" + net.JoinHostPort(host, port)
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
