package proxy

import (
	"context"
	"errors"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/edge-voice/edge/allocator"
)

// replica starts a second Proxy on e's Redis and allocator, with e's token
// secret, as another edge replica behind the same load balancer would be.
// addr overrides pod addresses (nil: e's agents). It returns the replica's
// ws:// base URL.
func (e *env) replica(addr map[string]string) string {
	e.t.Helper()
	lookup := func(pod string) (string, bool) {
		if a, ok := addr[pod]; ok {
			return a, true
		}
		ag, ok := e.agents[pod]
		if !ok {
			return "", false
		}
		return ag.Addr(), true
	}
	px := New(*e.px.cfg(), Deps{Lookup: lookup, Leases: allocator.MediaLeases{Alloc: e.alloc}, Signer: e.signer, Registerer: prometheus.NewRegistry()})
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- px.Run(ctx) }()
	srv := httptest.NewServer(px)
	e.t.Cleanup(func() {
		srv.Close()
		stop()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			e.t.Error("replica Run did not return")
		}
	})
	return "ws" + strings.TrimPrefix(srv.URL, "http")
}

// on moves a media URL of e's proxy to another replica's base URL.
func (e *env) on(base, url string) string {
	return base + strings.TrimPrefix(url, "ws"+strings.TrimPrefix(e.srv.URL, "http"))
}

// One media socket per call across replicas: the same URL opened on a
// second replica is refused before any pod dial, and when the first socket
// closes the call ends with it (nothing is left streaming on a released pod).
func TestSecondSocketOnAnotherReplicaIsRefused(t *testing.T) {
	eachRelay(t, func(t *testing.T, relay Relay) {
		e := newEnv(t, envOpt{relay: relay})
		other := e.replica(nil)
		pod, url := e.allocate("CA1", "")
		c := e.mustDial(url)
		echo(t, c, "first")

		if _, err := e.dial(e.on(other, url)); err == nil || !strings.Contains(err.Error(), "status 409") {
			t.Fatalf("same URL on a second replica: err = %v, want 409", err)
		}
		if n := len(e.agents[pod].Paths()); n != 1 {
			t.Fatalf("the pod saw %d sockets, want 1: the duplicate reached it", n)
		}
		echo(t, c, "first still flows")

		c.Close(4100, "caller hung up")
		e.waitSockets(0)
		if _, err := e.alloc.Call(context.Background(), "CA1"); !errors.Is(err, allocator.ErrCallNotFound) {
			t.Fatalf("call after the socket closed: %v, want released", err)
		}
		// The claim ended with the call: the URL now opens nowhere.
		if _, err := e.dial(e.on(other, url)); err == nil || !strings.Contains(err.Error(), "status 403") {
			t.Errorf("URL of the ended call on the second replica: err = %v, want 403", err)
		}
		// And the call stays ended: its webhook replayed gets no pod.
		if al, err := e.alloc.Allocate(context.Background(), allocator.Request{CallID: "CA1"}); !errors.Is(err, allocator.ErrCallEnded) {
			t.Errorf("replayed allocate after the socket closed = %+v, %v; want ErrCallEnded", al, err)
		}
	})
}

// A replica that cannot reach the call's pod moves the call to another pod
// of its chain: the socket, opened on the URL signed for the first pod,
// works, the other replica sees the pod ejected, and that URL is still
// admitted once (one socket per call): a replay is refused.
func TestSocketOnAReplicaThatCannotReachThePodFailsOver(t *testing.T) {
	e := newEnv(t, envOpt{cfg: failoverCfg})
	pod, url := e.allocate("CA1", "")
	broken := e.replica(map[string]string{pod: "127.0.0.1:1"}) // nothing listens on port 1
	c, err := e.dial(e.on(broken, url))
	if err != nil {
		t.Fatalf("dial through the replica that cannot reach %s: %v", pod, err)
	}
	defer c.CloseNow()
	echo(t, c, "moved")
	info, err := e.alloc.Call(context.Background(), "CA1")
	if err != nil || info.PodName == pod {
		t.Fatalf("call = %+v, %v; want it moved off %s", info, err, pod)
	}
	if pi, err := e.alloc.PodInfo(context.Background(), pod); err != nil || pi.Ejection == nil {
		t.Errorf("pod %s = %+v, %v; want ejected", pod, pi, err)
	}
	if _, err := e.dial(url); err == nil || !strings.Contains(err.Error(), "status 409") {
		t.Errorf("replay of the old URL on the first replica: %v, want 409", err)
	}
}

// Only the socket holding the call's claim keeps the call alive: a socket
// whose claim is gone (here dropped behind its back) loses its lease at the
// next renewal and closes.
func TestRenewalNeedsTheClaim(t *testing.T) {
	e := newEnv(t, envOpt{cfg: func(c *Config) { c.RenewInterval = time.Hour }})
	_, url := e.allocate("CA1", "")
	c := e.mustDial(url)
	echo(t, c, "hi")
	ctx := context.Background()
	info, err := e.alloc.Call(ctx, "CA1")
	if err != nil || info.MediaClaim == "" {
		t.Fatalf("call info = %+v, %v; want the socket's claim", info, err)
	}
	e.px.renewOnce(ctx)
	echo(t, c, "still held")
	if err := (allocator.MediaLeases{Alloc: e.alloc}).Unclaim(ctx, "CA1", info.MediaClaim); err != nil {
		t.Fatalf("drop the claim: %v", err)
	}
	if after, err := e.alloc.Call(ctx, "CA1"); err != nil || after.MediaClaim != "" {
		t.Fatalf("call info after the drop = %+v, %v; want the call live with no claim", after, err)
	}
	e.px.renewOnce(ctx)
	if got := readClose(t, c); got != closePolicy {
		t.Errorf("close status = %d, want %d", got, closePolicy)
	}
	e.waitSockets(0)
}
