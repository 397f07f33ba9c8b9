package proxy

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/edge-voice/edge/allocator"
	"github.com/edge-voice/edge/internal/fakeagent"
	"github.com/edge-voice/edge/internal/testwait"
)

// brokenPod starts a pod that fails the way kind says and returns its
// address: closed (nothing listens), hang (accepts and never answers),
// status500 (answers the upgrade with 500), reset (accepts and resets).
func brokenPod(t testing.TB, kind string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	switch kind {
	case "closed":
		ln.Close()
		return addr
	case "status500":
		srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, "agent crashed", http.StatusInternalServerError)
		})}
		go srv.Serve(ln)
		t.Cleanup(func() { srv.Close() })
		return addr
	}
	var held []net.Conn
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			if kind == "reset" {
				c.(*net.TCPConn).SetLinger(0)
				c.Close()
				continue
			}
			held = append(held, c) // hang: never read, never answer
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		<-done
		for _, c := range held {
			c.Close()
		}
	})
	return addr
}

// addPod registers pod in tier at addr, in Redis and in the proxy's pod
// registry.
func (e *env) addPod(pod, tier, addr string) {
	e.t.Helper()
	if _, err := e.alloc.RegisterPod(context.Background(), allocator.Pod{Name: pod, Tier: tier, Address: addr}); err != nil {
		e.t.Fatal(err)
	}
	e.addrMu.Lock()
	e.addrs[pod] = addr
	e.addrMu.Unlock()
}

// callOn allocates calls until one lands on pod (every gold pod taken) and
// returns its id and media URL.
func (e *env) callOn(pod string) (callID, url string) {
	e.t.Helper()
	for _, id := range []string{"CA1", "CA2", "CA3"} {
		if got, u := e.allocate(id, ""); got == pod {
			callID, url = id, u
		}
	}
	if callID == "" {
		e.t.Fatalf("no call landed on %s", pod)
	}
	return callID, url
}

func failoverCfg(c *Config) {
	c.DialTimeout = 300 * time.Millisecond
	c.ConnectAttempts = 2
	c.ConnectBudget = 2 * time.Second
	c.MaxEjectionPercent = 50
	c.EjectBackoff = time.Minute
}

// A call whose pod cannot be reached or refuses the upgrade moves to
// another pod of its chain, and the provider's one handshake, on the URL
// signed for the broken pod, opens a working socket there. The broken pod is ejected: free, but given to no call; a retried
// webhook answers the new pod.
func TestConnectFailover(t *testing.T) {
	for _, kind := range []string{"closed", "hang", "status500", "reset"} {
		t.Run(kind, func(t *testing.T) {
			e := newEnv(t, envOpt{cfg: failoverCfg})
			e.addPod("pod-x", "gold", brokenPod(t, kind))
			callID, url := e.callOn("pod-x")
			ctx := context.Background()

			start := time.Now()
			c := e.mustDial(url)
			echo(t, c, "through the failover")
			if d := time.Since(start); d > 2*time.Second {
				t.Errorf("handshake took %v, want within the connect budget", d)
			}
			info, err := e.alloc.Call(ctx, callID)
			if err != nil || info.PodName != "pod-s" {
				t.Fatalf("call after failover = %+v, %v; want on pod-s (gold is full)", info, err)
			}
			if n := e.agents["pod-s"].Sockets.Load(); n != 1 {
				t.Errorf("pod-s saw %d sockets, want 1", n)
			}
			pi, err := e.alloc.PodInfo(ctx, "pod-x")
			if err != nil {
				t.Fatal(err)
			}
			if pi.Ejection == nil || pi.Ejection.Reason != dialReasonOf(kind) || pi.CallID != "" || pi.Lease != "" {
				t.Errorf("broken pod = %+v (ejection %+v); want ejected for %s, free", pi, pi.Ejection, dialReasonOf(kind))
			}
			again, err := e.alloc.Allocate(ctx, allocator.Request{CallID: callID})
			if err != nil || again.PodName != "pod-s" || !again.WasExisting {
				t.Errorf("retried webhook = %+v, %v; want the call's new pod", again, err)
			}
			// The ejected pod is back in its pool but given to no call.
			if al, err := e.alloc.Allocate(ctx, allocator.Request{CallID: "CA9"}); err != nil || al.PodName == "pod-x" {
				t.Errorf("new call = %+v, %v; the ejected pod must not be given", al, err)
			}
			if got := value(e.px.metrics.failovers.WithLabelValues("moved")); got != 1 {
				t.Errorf("failovers{moved} = %v, want 1", got)
			}
			if got := value(e.px.metrics.dialFailures.WithLabelValues(dialReasonOf(kind))); got != 1 {
				t.Errorf("dial failures{%s} = %v, want 1", dialReasonOf(kind), got)
			}
			c.Close(1000, "")
			e.waitSockets(0)
			if _, err := e.alloc.Call(ctx, callID); !errors.Is(err, allocator.ErrCallNotFound) {
				t.Errorf("call not released after its socket closed: %v", err)
			}
		})
	}
}

func dialReasonOf(kind string) string {
	return map[string]string{"closed": "refused", "hang": "timeout", "status500": "status", "reset": "reset"}[kind]
}

// When every attempt fails the call ends at once: its pod
// back, its tombstone written, the provider's 502 the last word; not left
// to its lease and the sweep.
func TestConnectFailureEndsTheCall(t *testing.T) {
	e := newEnv(t, envOpt{cfg: func(c *Config) {
		failoverCfg(c)
		c.ConnectAttempts = 1
	}})
	e.addPod("pod-x", "gold", brokenPod(t, "closed"))
	callID, url := e.callOn("pod-x")
	if _, err := e.dial(url); err == nil || !strings.Contains(err.Error(), "status 502") {
		t.Fatalf("dial = %v, want 502", err)
	}
	ctx := context.Background()
	if _, err := e.alloc.Allocate(ctx, allocator.Request{CallID: callID}); !errors.Is(err, allocator.ErrCallEnded) {
		t.Errorf("retried webhook after the call ended: %v, want ErrCallEnded", err)
	}
	pi, err := e.alloc.PodInfo(ctx, "pod-x")
	if err != nil || pi.Ejection == nil || pi.CallID != "" || pi.Lease != "" {
		t.Errorf("broken pod = %+v, %v; want ejected and free", pi, err)
	}
	if got := value(e.px.metrics.failovers.WithLabelValues("exhausted")); got != 1 {
		t.Errorf("failovers{exhausted} = %v, want 1", got)
	}
	// The call's record says failover ended it.
	if tl, err := e.alloc.Timeline(ctx, callID); err != nil || tl.SocketEnd != "failover" || tl.ReleasedBy != "socket" {
		t.Errorf("timeline = %+v, %v; want ended by failover", tl, err)
	}
}

// healable is a pod that answers 500 until healed, then accepts media
// sockets as a fake agent.
type healable struct {
	healed atomic.Bool
	agent  *fakeagent.Agent
}

func (h *healable) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !h.healed.Load() {
		http.Error(w, "starting", http.StatusInternalServerError)
		return
	}
	h.agent.ServeHTTP(w, r)
}

// An ejected pod stays out while its probes fail, the backoff growing, and
// comes back, on every replica, once a probe's WebSocket upgrade succeeds.
func TestEjectedPodReturnsAfterItHeals(t *testing.T) {
	e := newEnv(t, envOpt{cfg: func(c *Config) {
		failoverCfg(c)
		c.EjectBackoff = 100 * time.Millisecond
		c.EjectMaxBackoff = 400 * time.Millisecond
		c.ProbeInterval = 20 * time.Millisecond
		c.HealthPath = "/health"
	}})
	ag, err := fakeagent.Listen("127.0.0.1:0", nil)
	if err != nil {
		t.Fatal(err)
	}
	h := &healable{agent: ag}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	e.addPod("pod-x", "gold", strings.TrimPrefix(srv.URL, "http://"))
	_, url := e.callOn("pod-x")
	echo(t, e.mustDial(url), "moved")
	ctx := context.Background()
	testwait.Until(t, 10*time.Second, "two failed probes", func() bool {
		pi, _ := e.alloc.PodInfo(ctx, "pod-x")
		return pi.Ejection != nil && pi.Ejection.Failures >= 3
	})
	h.healed.Store(true)
	testwait.Until(t, 10*time.Second, "the pod back", func() bool {
		pi, _ := e.alloc.PodInfo(ctx, "pod-x")
		return pi.Ejection == nil
	})
	if paths := ag.Paths(); len(paths) == 0 || paths[0] != "/health" {
		t.Errorf("probe paths = %v, want /health", paths)
	}
	if al, err := e.alloc.Allocate(ctx, allocator.Request{CallID: "CA9"}); err != nil || al.PodName != "pod-x" {
		t.Errorf("new call = %+v, %v; want the healed pod (the only free gold pod)", al, err)
	}
}
