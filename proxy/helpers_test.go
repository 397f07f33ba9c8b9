package proxy

import (
	"context"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/trace"

	"github.com/edge-voice/edge/allocator"
	"github.com/edge-voice/edge/internal/fakeagent"
	"github.com/edge-voice/edge/internal/testredis"
	"github.com/edge-voice/edge/proxy/internal/iouring"
	"github.com/edge-voice/edge/proxy/internal/wsproto"
	"github.com/edge-voice/edge/proxy/mediaurl"
)

// frame builds one WebSocket frame.
var frame = wsproto.Frame

// env is one proxy in front of real fake-agent pods, on a real Redis.
type env struct {
	t      testing.TB
	rdb    *redis.Client
	trips  *testredis.RoundTrips
	alloc  *allocator.Allocator
	signer *Signer
	px     *Proxy
	reg    *prometheus.Registry
	srv    *httptest.Server
	agents map[string]*fakeagent.Agent
	// addrs is the pod registry the proxy looks pods up in.
	addrMu sync.Mutex
	addrs  map[string]string
	cancel context.CancelFunc // ends px.Run (shutdown)
	runErr chan error
}

type envOpt struct {
	relay    Relay // "": the default
	leaseTTL time.Duration
	cfg      func(*Config)
	log      *slog.Logger // nil: discarded
	// leases wraps the allocator's adapter (nil: as it is).
	leases func(Leases) Leases
	tracer trace.Tracer // nil: tracing off
	// retries is Deps.HandshakeRetries (nil: no provider retries).
	retries func(provider string) int
	// opening is Deps.Opening (nil: no provider names its opening).
	opening func(provider string) []string
	// upgrade is Deps.Upgrade (nil: no client header reaches a pod).
	upgrade func(provider string) ClientUpgrade
	// afterMove is Deps.AfterMove (nil: no provider declares any).
	afterMove func(provider string) AfterMove
}

// newEnv starts Redis, two fake agents as exclusive pods "pod-a" and
// "pod-b" of tier gold, a shared pod "pod-s" in tier basic, and the proxy
// (running) behind an httptest server.
func newEnv(t testing.TB, o envOpt) *env {
	t.Helper()
	if o.leaseTTL == 0 {
		o.leaseTTL = time.Minute
	}
	rs := testredis.Start(t)
	e := &env{t: t, rdb: rs.Client(), trips: &testredis.RoundTrips{}, agents: map[string]*fakeagent.Agent{}, reg: prometheus.NewRegistry()}
	e.rdb.AddHook(e.trips)
	tiers := allocator.TierConfig{
		Tiers: map[string]allocator.Tier{
			"gold":  {Type: allocator.Exclusive, Target: 2},
			"basic": {Type: allocator.Shared, Target: 1, MaxConcurrent: 3},
		},
		DefaultChain: []string{"gold", "basic"},
	}
	var err error
	// The allocator's metrics on the proxy's registry, as edge registers
	// them: tests read what the allocator did where an operator would.
	e.alloc, err = allocator.New(e.rdb, allocator.Config{LeaseTTL: o.leaseTTL, CallInfoTTL: time.Hour, Tiers: tiers}, e.reg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	// Scripts loaded up front, so round trips count EVALSHA only.
	if err := e.alloc.Preload(ctx); err != nil {
		t.Fatal(err)
	}
	addrs := map[string]string{}
	e.addrs = addrs
	for pod, tier := range map[string]string{"pod-a": "gold", "pod-b": "gold", "pod-s": "basic"} {
		ag, err := fakeagent.Listen("127.0.0.1:0", nil)
		if err != nil {
			t.Fatal(err)
		}
		go ag.Run(ctx)
		e.agents[pod], addrs[pod] = ag, ag.Addr()
		if _, err := e.alloc.RegisterPod(ctx, allocator.Pod{Name: pod, Tier: tier, Address: ag.Addr()}); err != nil {
			t.Fatal(err)
		}
	}
	cfg := Config{RequireToken: true, IdleTimeout: 10 * time.Second, DialTimeout: 2 * time.Second,
		RenewInterval: o.leaseTTL / 4, DrainTimeout: time.Minute, MaxSockets: 100, MaxMessageBytes: 64 << 10}
	cfg.Relay = o.relay
	if o.cfg != nil {
		o.cfg(&cfg)
	}
	e.signer = mediaurl.NewSigner([]byte(strings.Repeat("k", 32)), time.Minute)
	lookup := func(pod string) (string, bool) {
		e.addrMu.Lock()
		defer e.addrMu.Unlock()
		a, ok := e.addrs[pod]
		return a, ok
	}
	var leases Leases = allocator.MediaLeases{Alloc: e.alloc, Replica: "replica-t"}
	if o.leases != nil {
		leases = o.leases(leases)
	}
	e.px = New(cfg, Deps{Lookup: lookup, Leases: leases, Signer: e.signer, Tracer: o.tracer, HandshakeRetries: o.retries,
		Opening: o.opening, AfterMove: o.afterMove, Upgrade: o.upgrade, Log: o.log, Registerer: e.reg})
	runCtx, stop := context.WithCancel(context.Background())
	e.cancel = stop
	e.runErr = make(chan error, 1)
	go func() { e.runErr <- e.px.Run(runCtx) }()
	if cfg.Relay != relayGoroutines && runtime.GOOS == "linux" {
		// A socket admitted before Run started the loops takes the
		// goroutine relay; tests of a relay wait for its loops (the uring
		// ones start first). Run offers no event for it: poll.
		for deadline := time.Now().Add(5 * time.Second); !e.px.loops.Running() && time.Now().Before(deadline); {
			time.Sleep(time.Millisecond)
		}
	}
	e.srv = httptest.NewServer(e.px)
	t.Cleanup(func() {
		e.srv.Close()
		stop()
		select {
		case <-e.runErr:
		case <-time.After(10 * time.Second):
			t.Error("proxy Run did not return")
		}
	})
	return e
}

// eachRelay runs f once per relay mechanism: each must keep the proxy's
// contract.
func eachRelay(t *testing.T, f func(t *testing.T, relay Relay)) {
	for _, r := range []Relay{relayEpoll, relayGoroutines, relayUring} {
		t.Run(string(r), func(t *testing.T) {
			if r == relayUring {
				// The uring relay needs io_uring (a container's seccomp
				// profile or kernel.io_uring_disabled may refuse it).
				if err := iouring.Probe(); err != nil {
					t.Skipf("io_uring unavailable: %v", err)
				}
			}
			f(t, r)
		})
	}
}

// eachLoop runs f on each event-loop relay, the ones that carry TLS
// clients' records themselves: epoll, and uring where io_uring runs.
func eachLoop(t *testing.T, f func(t *testing.T, relay Relay)) {
	eachRelay(t, func(t *testing.T, relay Relay) {
		if relay == relayGoroutines {
			t.Skip("crypto/tls carries the goroutine relay's TLS clients")
		}
		f(t, relay)
	})
}

// allocate gives callID a pod of its chain (or of tier basic when shared)
// and returns the pod and the media URL path with its token.
func (e *env) allocate(callID, merchant string) (pod, url string) {
	e.t.Helper()
	al, err := e.alloc.Allocate(context.Background(), allocator.Request{CallID: callID, MerchantID: merchant})
	if err != nil {
		e.t.Fatalf("allocate %s: %v", callID, err)
	}
	return al.PodName, e.url(al.PodName, e.signer.Mint(callID, al.PodName, agentPath))
}

// allocateFor is allocate for a call creator asked for ("provider:<name>"
// for a provider's webhook).
func (e *env) allocateFor(callID, merchant, creator string) (pod, url string) {
	e.t.Helper()
	al, err := e.alloc.Allocate(context.Background(), allocator.Request{CallID: callID, MerchantID: merchant, Creator: creator})
	if err != nil {
		e.t.Fatalf("allocate %s: %v", callID, err)
	}
	return al.PodName, e.url(al.PodName, e.signer.Mint(callID, al.PodName, agentPath))
}

// base is the proxy's ws:// base URL.
func (e *env) base() string { return "ws" + strings.TrimPrefix(e.srv.URL, "http") }

// url is the media URL for pod with a segment ("" for none).
func (e *env) url(pod, segment string) string {
	u := "ws" + strings.TrimPrefix(e.srv.URL, "http") + "/ws/pod/" + pod
	if segment != "" {
		u += "/" + segment
	}
	return u + agentPath
}

// agentPath is the path the tests' tokens are minted for.
const agentPath = "/agent/voice/breeze-buddy/twilio/callback/order-confirmation/v2"

func (e *env) dial(url string) (*websocket.Conn, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, resp, err := websocket.Dial(ctx, url, nil)
	if err != nil {
		if resp != nil {
			return nil, fmt.Errorf("%w (status %d)", err, resp.StatusCode)
		}
		return nil, err
	}
	return c, nil
}

// mustDial opens url and fails the test unless the socket opens.
func (e *env) mustDial(url string) *websocket.Conn {
	e.t.Helper()
	c, err := e.dial(url)
	if err != nil {
		e.t.Fatalf("dial %s: %v", url, err)
	}
	e.t.Cleanup(func() { c.CloseNow() })
	return c
}

// echo sends msg and expects it back.
func echo(t *testing.T, c *websocket.Conn, msg string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := c.Write(ctx, websocket.MessageText, []byte(msg)); err != nil {
		t.Fatalf("write: %v", err)
	}
	_, got, err := c.Read(ctx)
	if err != nil {
		t.Fatalf("read: %v", err)
	}
	if string(got) != msg {
		t.Fatalf("echo = %q, want %q", got, msg)
	}
}

// waitSockets waits until the proxy has n open sockets (released calls
// included: a socket leaves the registry after its release).
func (e *env) waitSockets(n int) {
	e.t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		open, changed := e.px.snapshot()
		if len(open) == n {
			return
		}
		select {
		case <-changed:
		case <-timeout:
			e.t.Fatalf("open sockets = %d, want %d", len(open), n)
		}
	}
}

// readClose reads until the socket ends and returns its close status.
func readClose(t *testing.T, c *websocket.Conn) websocket.StatusCode {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for {
		if _, _, err := c.Read(ctx); err != nil {
			return websocket.CloseStatus(err)
		}
	}
}

// podOwner is the call holding pod's lease ("" when none).
func (e *env) podOwner(pod string) string {
	e.t.Helper()
	info, err := e.alloc.PodInfo(context.Background(), pod)
	if err != nil {
		e.t.Fatal(err)
	}
	return info.Lease
}

// relayedSockets reads edge_proxy_relayed_sockets_total: the sockets relay
// took whose client's transport is client ("tcp", "tls"; "": either).
// relay "" sums the event loops' (epoll and uring).
func (e *env) relayedSockets(relay Relay, client string) int64 {
	var n float64
	for _, r := range []Relay{relayEpoll, relayUring} {
		if relay != "" {
			r = relay
		}
		for _, c := range []string{"tcp", "tls"} {
			if client == "" || c == client {
				n += value(e.px.metrics.relayed.WithLabelValues(string(r), c))
			}
		}
		if relay != "" {
			break
		}
	}
	return int64(n)
}

// value reads a counter or gauge (prometheus/testutil would pull a module
// edge does not otherwise need).
func value(m prometheus.Metric) float64 {
	var d dto.Metric
	if err := m.Write(&d); err != nil {
		panic(err)
	}
	switch {
	case d.Counter != nil:
		return d.Counter.GetValue()
	case d.Gauge != nil:
		return d.Gauge.GetValue()
	}
	return -1
}

// wantCarriedBy fails the test unless the sockets so far rode relay, and
// none another.
func (e *env) wantCarriedBy(relay Relay) {
	e.t.Helper()
	for _, r := range []Relay{relayEpoll, relayUring, relayGoroutines} {
		n := value(e.px.metrics.relayed.WithLabelValues(string(r), "tcp")) +
			value(e.px.metrics.relayed.WithLabelValues(string(r), "tls"))
		if (r == relay) != (n > 0) {
			e.t.Errorf("relay %q carried %v sockets; want relay %q to carry them all", r, n, relay)
		}
	}
}
