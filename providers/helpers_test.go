package providers_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/edge-voice/edge/allocator"
	"github.com/edge-voice/edge/api"
	"github.com/edge-voice/edge/calls"
	"github.com/edge-voice/edge/forwarded"
	"github.com/edge-voice/edge/internal/testredis"
	"github.com/edge-voice/edge/plugins"
	"github.com/edge-voice/edge/providers"
	"github.com/edge-voice/edge/proxy/mediaurl"
)

// env is a host with real plugin processes, a real Redis and edge's own
// public routes.
type env struct {
	redis *testredis.Server // stop it to take Redis away
	rdb   *redis.Client
	alloc *allocator.Allocator
	host  *providers.Host
	reg   *prometheus.Registry
	srv   *httptest.Server
	logs  *logSink
	// trusted is the trusted-proxy list the host reads (nil: nobody).
	trusted atomic.Pointer[forwarded.Trusted]
	// cfg is the providers section the host reads per request (reloads).
	cfg atomic.Pointer[providers.Config]
}

// spec runs this test binary as the plugin name.
func spec(name string, settings plugins.Settings) providers.Spec {
	return providers.Spec{Name: name, Settings: settings, Command: func() *exec.Cmd {
		exe, _ := os.Executable()
		cmd := exec.Command(exe)
		cmd.Env = []string{pluginEnv + "=" + name}
		return cmd
	}}
}

func newEnv(t testing.TB, specs ...providers.Spec) *env {
	t.Helper()
	e := newEnvNoWait(t, specs...)
	for _, s := range specs {
		e.waitUp(t, s.Name, 0)
	}
	return e
}

// newEnvNoWait is newEnv without waiting for the plugins to come up.
func newEnvNoWait(t testing.TB, specs ...providers.Spec) *env {
	t.Helper()
	return newEnvOn(t, testredis.Start(t), specs...)
}

// replica is another edge replica beside e: its own host, plugin
// processes and routes, on e's Redis.
func (e *env) replica(t testing.TB, specs ...providers.Spec) *env {
	t.Helper()
	r := newEnvOn(t, e.redis, specs...)
	for _, s := range specs {
		r.waitUp(t, s.Name, 0)
	}
	return r
}

// newEnvOn builds an env on a running Redis.
func newEnvOn(t testing.TB, rs *testredis.Server, specs ...providers.Spec) *env {
	t.Helper()
	e := &env{redis: rs, reg: prometheus.NewRegistry(), logs: &logSink{}}
	e.rdb = e.redis.Client()
	var err error
	e.alloc, err = allocator.New(e.rdb, allocator.Config{Tiers: allocator.TierConfig{
		Tiers:        map[string]allocator.Tier{"gold": {Type: allocator.Exclusive, Target: 1}, "basic": {Type: allocator.Shared, Target: 1, MaxConcurrent: 100000}},
		DefaultChain: []string{"gold", "basic"},
	}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	svc := calls.NewService(e.alloc, mediaurl.NewSigner([]byte("test-secret"), time.Minute), func() string { return "wss://edge.example.com" }, slog.New(e.logs))
	cfg := providers.Config{
		RPCTimeout: 500 * time.Millisecond, HealthInterval: 200 * time.Millisecond,
		RestartBackoffMax: time.Second, WebhookBaseURL: "https://edge.example.com",
	}
	e.cfg.Store(&cfg)
	e.host, err = providers.New(providers.Options{
		Calls: svc, Nonces: e.alloc, Log: slog.New(e.logs), Reg: e.reg,
		Config:     cfg,
		Current:    func() providers.Config { return *e.cfg.Load() },
		BackoffMin: 10 * time.Millisecond,
		Trusted:    e.trusted.Load,
	}, specs)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { e.host.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	surface := &api.Surface{
		// The generic API open to loopback, as in development: the
		// webhook benchmark compares the plugin path with it.
		Handlers: &api.Handlers{Calls: svc, Pools: e.alloc, Log: slog.New(slog.DiscardHandler),
			Callers: api.NewCallers(api.OpenLoopback, nil)},
		Ready:     &api.Readiness{},
		Providers: e.host,
	}
	e.srv = httptest.NewServer(surface.Public())
	t.Cleanup(e.srv.Close)
	return e
}

// waitUp waits for a start of name later than after; returns it and the pid.
func (e *env) waitUp(t testing.TB, name string, after int) (int, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	gen, pid, err := e.host.WaitUp(ctx, name, after)
	if err != nil {
		t.Fatal(err)
	}
	return gen, pid
}

func (e *env) register(t testing.TB, tier string, pods ...string) {
	t.Helper()
	for _, p := range pods {
		if _, err := e.alloc.RegisterPod(context.Background(), allocator.Pod{Name: p, Tier: tier}); err != nil {
			t.Fatal(err)
		}
	}
}

// snapshot is every key and value of Redis, to show that a rejected
// webhook changed nothing.
func (e *env) snapshot(t testing.TB) map[string]string {
	t.Helper()
	ctx := context.Background()
	keys, err := e.rdb.Keys(ctx, "*").Result()
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(keys)
	out := map[string]string{}
	for _, k := range keys {
		v, err := e.rdb.Dump(ctx, k).Result()
		if err != nil {
			t.Fatal(err)
		}
		out[k] = v
	}
	return out
}

type answer struct {
	status int
	ctype  string
	body   string
}

func (e *env) do(t testing.TB, method, path, body string, header ...string) answer {
	t.Helper()
	req, err := http.NewRequest(method, e.srv.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return answer{resp.StatusCode, resp.Header.Get("Content-Type"), string(b)}
}

// logSink records log lines and lets a test wait for one.
type logSink struct {
	mu    sync.Mutex
	lines []string
	wait  []chan struct{}
}

func (l *logSink) Enabled(context.Context, slog.Level) bool { return true }
func (l *logSink) WithAttrs(attrs []slog.Attr) slog.Handler {
	return &attrSink{l, attrs}
}
func (l *logSink) WithGroup(string) slog.Handler                 { return l }
func (l *logSink) Handle(_ context.Context, r slog.Record) error { return l.add(r, nil) }

func (l *logSink) add(r slog.Record, extra []slog.Attr) error {
	var b strings.Builder
	b.WriteString(r.Level.String() + " " + r.Message)
	for _, a := range extra {
		b.WriteString(" " + a.String())
	}
	r.Attrs(func(a slog.Attr) bool { b.WriteString(" " + a.String()); return true })
	l.mu.Lock()
	l.lines = append(l.lines, b.String())
	for _, c := range l.wait {
		close(c)
	}
	l.wait = nil
	l.mu.Unlock()
	return nil
}

type attrSink struct {
	l     *logSink
	attrs []slog.Attr
}

func (a *attrSink) Enabled(context.Context, slog.Level) bool { return true }
func (a *attrSink) WithAttrs(attrs []slog.Attr) slog.Handler {
	return &attrSink{a.l, append(slices.Clone(a.attrs), attrs...)}
}
func (a *attrSink) WithGroup(string) slog.Handler                 { return a }
func (a *attrSink) Handle(_ context.Context, r slog.Record) error { return a.l.add(r, a.attrs) }

// waitFor blocks until a logged line contains every part.
func (l *logSink) waitFor(t testing.TB, parts ...string) string {
	t.Helper()
	return l.waitFrom(t, 0, parts...)
}

// waitForNew is waitFor for lines logged from now on.
func (l *logSink) waitForNew(t testing.TB, parts ...string) string {
	t.Helper()
	l.mu.Lock()
	from := len(l.lines)
	l.mu.Unlock()
	return l.waitFrom(t, from, parts...)
}

func (l *logSink) waitFrom(t testing.TB, from int, parts ...string) string {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		l.mu.Lock()
		for _, line := range l.lines[from:] {
			ok := true
			for _, p := range parts {
				ok = ok && strings.Contains(line, p)
			}
			if ok {
				l.mu.Unlock()
				return line
			}
		}
		c := make(chan struct{})
		l.wait = append(l.wait, c)
		l.mu.Unlock()
		select {
		case <-c:
		case <-deadline:
			t.Fatalf("no log line with %q", parts)
		}
	}
}
