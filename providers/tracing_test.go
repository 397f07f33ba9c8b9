package providers_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/redis/go-redis/extra/redisotel/v9"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/edge-voice/edge/allocator"
	"github.com/edge-voice/edge/api"
	"github.com/edge-voice/edge/calls"
	"github.com/edge-voice/edge/internal/testredis"
	"github.com/edge-voice/edge/providers"
	"github.com/edge-voice/edge/proxy"
	"github.com/edge-voice/edge/proxy/mediaurl"
	"github.com/edge-voice/edge/tracing"
)

// spanLog is an in-memory span processor a test can wait on.
type spanLog struct {
	mu    sync.Mutex
	spans []sdktrace.ReadOnlySpan
	added chan struct{}
}

func (l *spanLog) OnStart(context.Context, sdktrace.ReadWriteSpan) {}
func (l *spanLog) Shutdown(context.Context) error                  { return nil }
func (l *spanLog) ForceFlush(context.Context) error                { return nil }
func (l *spanLog) OnEnd(s sdktrace.ReadOnlySpan) {
	l.mu.Lock()
	l.spans = append(l.spans, s)
	l.mu.Unlock()
	select {
	case l.added <- struct{}{}:
	default:
	}
}

// waitFor returns the first ended span named name, waiting for it.
func (l *spanLog) waitFor(t *testing.T, name string) sdktrace.ReadOnlySpan {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		l.mu.Lock()
		for _, s := range l.spans {
			if s.Name() == name {
				l.mu.Unlock()
				return s
			}
		}
		l.mu.Unlock()
		select {
		case <-l.added:
		case <-deadline:
			t.Fatalf("no span %q ended; have %v", name, l.names())
		}
	}
}

func (l *spanLog) childrenOf(parent trace.SpanContext) []sdktrace.ReadOnlySpan {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []sdktrace.ReadOnlySpan
	for _, s := range l.spans {
		if s.Parent().SpanID() == parent.SpanID() && s.Parent().TraceID() == parent.TraceID() {
			out = append(out, s)
		}
	}
	return out
}

func (l *spanLog) all() []sdktrace.ReadOnlySpan {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]sdktrace.ReadOnlySpan(nil), l.spans...)
}

func (l *spanLog) names() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, s := range l.spans {
		out = append(out, s.Name())
	}
	return out
}

func attr(s sdktrace.ReadOnlySpan, key string) string {
	for _, a := range s.Attributes() {
		if string(a.Key) == key {
			return a.Value.Emit()
		}
	}
	return ""
}

// TestTraceOfAWholeCall follows one call through real parts (a plugin
// process, Redis, the media proxy, a pod) and asserts its span tree: the
// webhook with the plugin RPCs and the Redis allocate as children; the
// media socket in its own trace, linked to the webhook, with its dial as a
// child; and the pod handed the socket's traceparent, never the client's.
func TestTraceOfAWholeCall(t *testing.T) {
	spans := &spanLog{added: make(chan struct{}, 1)}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	t.Cleanup(func() { tp.Shutdown(context.Background()) })

	rdb := testredis.Start(t).Client()
	if err := redisotel.InstrumentTracing(rdb, redisotel.WithTracerProvider(tracing.ChildrenOnly(tp)), redisotel.WithDBStatement(false)); err != nil {
		t.Fatal(err)
	}
	alloc, err := allocator.New(rdb, allocator.Config{Tiers: allocator.TierConfig{
		Tiers: map[string]allocator.Tier{"gold": {Type: allocator.Exclusive, Target: 1}}, DefaultChain: []string{"gold"},
	}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	// As edge does at start: one EVALSHA per script from the first call.
	if err := alloc.Preload(context.Background()); err != nil {
		t.Fatal(err)
	}

	// The pod: a WebSocket echo that keeps the traceparent it was given.
	podSaw := make(chan http.Header, 1)
	pod := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		podSaw <- r.Header.Clone()
		c, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		defer c.CloseNow()
		for {
			typ, b, err := c.Read(r.Context())
			if err != nil {
				return
			}
			c.Write(r.Context(), typ, b)
		}
	}))
	t.Cleanup(pod.Close)
	podAddr := strings.TrimPrefix(pod.URL, "http://")
	if _, err := alloc.RegisterPod(context.Background(), allocator.Pod{Name: "p1", Tier: "gold", Address: podAddr}); err != nil {
		t.Fatal(err)
	}

	signer := mediaurl.NewSigner([]byte(strings.Repeat("k", 32)), time.Minute)
	px := proxy.New(proxy.Config{RequireToken: true, IdleTimeout: 10 * time.Second, DialTimeout: 2 * time.Second,
		RenewInterval: time.Second, DrainTimeout: time.Second, MaxSockets: 10, MaxMessageBytes: 64 << 10},
		proxy.Deps{Lookup: func(string) (string, bool) { return podAddr, true }, Leases: allocator.MediaLeases{Alloc: alloc},
			Signer: signer, Tracer: tp.Tracer("proxy")})
	var base string
	svc := calls.NewService(alloc, signer, func() string { return base }, nil)
	host, err := providers.New(providers.Options{
		Calls: svc, Config: providers.Config{RPCTimeout: 5 * time.Second}, Tracer: tp,
	}, []providers.Spec{spec("testprov", nil)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); host.Run(ctx) }()
	go func() { defer wg.Done(); px.Run(ctx) }()
	t.Cleanup(func() { cancel(); wg.Wait() })
	srv := httptest.NewServer((&api.Surface{
		Handlers: &api.Handlers{Calls: svc, Pools: alloc, Log: slog.New(slog.DiscardHandler)},
		Ready:    &api.Readiness{}, Providers: host, Media: px,
	}).Public())
	t.Cleanup(srv.Close)
	base = "ws" + strings.TrimPrefix(srv.URL, "http")
	wctx, wcancel := context.WithTimeout(ctx, 30*time.Second)
	defer wcancel()
	if _, _, err := host.WaitUp(wctx, "testprov", 0); err != nil {
		t.Fatal(err)
	}

	resp, err := http.Post(srv.URL+"/api/v1/testprov/allocate", "text/plain", strings.NewReader("call=CA1"))
	if err != nil {
		t.Fatal(err)
	}
	var ans struct{ WS, Pod string }
	json.NewDecoder(resp.Body).Decode(&ans)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || ans.WS == "" {
		t.Fatalf("webhook answered %d %+v", resp.StatusCode, ans)
	}

	// The webhook's trace: the root, its two plugin RPCs and the allocate.
	webhook := spans.waitFor(t, "webhook testprov")
	if webhook.Parent().IsValid() {
		t.Errorf("webhook span has a parent %v; it must start the call's trace", webhook.Parent())
	}
	if got := attr(webhook, "call_sid"); got != "CA1" {
		t.Errorf("webhook span call_sid = %q", got)
	}
	if got := attr(webhook, "edge.outcome"); got != "allocated" {
		t.Errorf("webhook span outcome = %q", got)
	}
	var rpcs, scripts []string
	for _, c := range spans.childrenOf(webhook.SpanContext()) {
		switch {
		case c.SpanKind() == trace.SpanKindClient && strings.Contains(c.Name(), "/"):
			rpcs = append(rpcs, c.Name()[strings.LastIndex(c.Name(), "/")+1:])
		case strings.HasPrefix(c.Name(), "eval"):
			scripts = append(scripts, c.Name())
		}
	}
	if strings.Join(rpcs, ",") != "Webhook,Answer" {
		t.Errorf("plugin RPC spans under the webhook: %v, want Webhook,Answer (all: %v)", rpcs, spans.names())
	}
	// The supervisor's own RPCs (Describe, Configure, health checks) run
	// outside any webhook and must not start traces of their own.
	for _, s := range spans.all() {
		if !s.Parent().IsValid() && s.Name() != "webhook testprov" && s.Name() != "media socket" {
			t.Errorf("span %q started a trace of its own", s.Name())
		}
	}
	if len(scripts) != 1 {
		t.Errorf("Redis script spans under the webhook: %v, want the one allocate", scripts)
	}

	// The media socket: a client-sent traceparent must not reach the pod.
	forged := "00-0123456789abcdef0123456789abcdef-0123456789abcdef-01"
	c, _, err := websocket.Dial(wctx, ans.WS, &websocket.DialOptions{HTTPHeader: http.Header{"Traceparent": {forged}, "Baggage": {"user=evil"}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Write(wctx, websocket.MessageText, []byte("hello")); err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.Read(wctx); err != nil {
		t.Fatal(err)
	}
	c.Close(websocket.StatusNormalClosure, "bye")
	saw := <-podSaw

	socket := spans.waitFor(t, "media socket")
	sc := socket.SpanContext()
	if sc.TraceID() == webhook.SpanContext().TraceID() || socket.Parent().IsValid() {
		t.Errorf("media socket span should start its own trace, linked to the webhook's")
	}
	if links := socket.Links(); len(links) != 1 || links[0].SpanContext.TraceID() != webhook.SpanContext().TraceID() ||
		links[0].SpanContext.SpanID() != webhook.SpanContext().SpanID() {
		t.Errorf("media socket links %v, want the webhook span %v", links, webhook.SpanContext())
	}
	for k, want := range map[string]string{"call_sid": "CA1", "pod": "p1", "close_code": "1000", "closed_by": "client"} {
		if got := attr(socket, k); got != want {
			t.Errorf("media socket %s = %q, want %q", k, got, want)
		}
	}
	dials := spans.childrenOf(sc)
	if len(dials) != 1 || dials[0].Name() != "dial pod" || attr(dials[0], "outcome") != "connected" || attr(dials[0], "attempt") != "1" {
		t.Errorf("children of the media socket: %v, want one connected dial pod", spans.names())
	}
	want := "00-" + sc.TraceID().String() + "-" + sc.SpanID().String() + "-01"
	if got := saw.Get("Traceparent"); got != want {
		t.Errorf("pod saw traceparent %q, want the socket span's %q", got, want)
	}
	if saw.Get("Baggage") != "" || saw.Get("Tracestate") != "" {
		t.Errorf("pod saw the client's baggage %q", saw.Get("Baggage"))
	}
}
