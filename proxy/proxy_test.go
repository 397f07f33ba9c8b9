package proxy

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/edge-voice/edge/allocator"
	"github.com/edge-voice/edge/proxy/mediaurl"
)

func TestRelayEchoesAndReleasesOnClose(t *testing.T) {
	eachRelay(t, func(t *testing.T, relay Relay) {
		e := newEnv(t, envOpt{relay: relay, upgrade: func(provider string) ClientUpgrade {
			if provider != "twilio" {
				return ClientUpgrade{}
			}
			return ClientUpgrade{Subprotocols: []string{"audio.v1"}}
		}})
		pod, url := e.allocateFor("CA1", "", "provider:twilio")
		ctx := context.Background()
		// Forwarding headers from a client no trusted proxy vouches for.
		spoofed := http.Header{"X-Forwarded-For": {"6.6.6.6"}, "X-Forwarded-Proto": {"https"}, "X-Real-Ip": {"6.6.6.6"}, "Forwarded": {"for=6.6.6.6"}}
		c, _, err := websocket.Dial(ctx, url, &websocket.DialOptions{Subprotocols: []string{"audio.v1"}, HTTPHeader: spoofed})
		if err != nil {
			t.Fatal(err)
		}
		defer c.CloseNow()
		c.SetReadLimit(1 << 20)
		if c.Subprotocol() != "audio.v1" {
			t.Errorf("subprotocol = %q, want the pod's choice audio.v1", c.Subprotocol())
		}
		for i := range 20 {
			echo(t, c, fmt.Sprintf(`{"event":"media","sequenceNumber":"%d","media":{"payload":"AAAA"}}`, i))
		}
		// A big message crosses many reads and buffers.
		echo(t, c, strings.Repeat("x", 50<<10))

		ag := e.agents[pod]
		if got, want := ag.Paths(), []string{"/agent/voice/breeze-buddy/twilio/callback/order-confirmation/v2"}; len(got) != 1 || got[0] != want[0] {
			t.Errorf("pod saw paths %q, want %q (prefix and token stripped)", got, want)
		}
		h := ag.Headers()[0]
		if h.Get("X-Forwarded-For") != "127.0.0.1" || h.Get("X-Forwarded-Proto") != "http" || h.Get("X-Forwarded-Host") == "" ||
			h.Get("X-Real-Ip") != "" || h.Get("Forwarded") != "" {
			t.Errorf("forwarding headers = %v", h)
		}

		c.Close(4100, "caller hung up")
		e.waitSockets(0)
		if _, err := e.alloc.Call(ctx, "CA1"); !errors.Is(err, allocator.ErrCallNotFound) {
			t.Errorf("call after close: %v, want released", err)
		}
		if owner := e.podOwner(pod); owner != "" {
			t.Errorf("pod %s still leased to %q", pod, owner)
		}
		m := e.px.metrics
		if got := value(m.closes.WithLabelValues("client", "4100")); got != 1 {
			t.Errorf("closes{client,4100} = %v, want 1", got)
		}
		if got := value(m.releases.WithLabelValues("released")); got != 1 {
			t.Errorf("releases{released} = %v, want 1", got)
		}
		if got := value(m.dirs[0].Messages); got < 21 {
			t.Errorf("messages client_to_pod = %v, want >= 21", got)
		}
		if got := value(m.active); got != 0 {
			t.Errorf("active = %v after close", got)
		}
	})
}

func TestRefusedBeforeRedisAndDial(t *testing.T) {
	e := newEnv(t, envOpt{})
	pod, _ := e.allocate("CA1", "")
	other := map[string]string{"pod-a": "pod-b", "pod-b": "pod-a"}[pod]
	expired := mediaurl.NewSigner([]byte(strings.Repeat("k", 32)), -time.Minute).Mint("CA1", pod, agentPath)
	foreign := mediaurl.NewSigner([]byte(strings.Repeat("z", 32)), time.Minute).Mint("CA1", pod, agentPath)
	good := e.signer.Mint("CA1", pod, agentPath)
	tampered := good[:len(good)-2] + map[bool]string{true: "AA", false: "BB"}[!strings.HasSuffix(good, "AA")]

	cases := map[string]struct {
		url        string
		status     int
		redisTrips bool // may the refusal read Redis?
	}{
		"unknown pod":            {e.url("pod-x", e.signer.Mint("CA1", "pod-x", agentPath)), http.StatusNotFound, false},
		"bad pod name":           {e.url("pod:a", good), http.StatusNotFound, false},
		"no token":               {e.url(pod, ""), http.StatusForbidden, false},
		"tampered token":         {e.url(pod, tampered), http.StatusForbidden, false},
		"other secret":           {e.url(pod, foreign), http.StatusForbidden, false},
		"expired token":          {e.url(pod, expired), http.StatusForbidden, false},
		"token of another pod":   {e.url(other, good), http.StatusForbidden, false},
		"garbage token":          {e.url(pod, "c.!!!"), http.StatusForbidden, false},
		"call not allocated":     {e.url(pod, e.signer.Mint("CA-never", pod, agentPath)), http.StatusForbidden, true},
		"call on another pod":    {e.url(other, e.signer.Mint("CA1", other, agentPath)), http.StatusForbidden, true},
		"token of another path":  {e.url(pod, e.signer.Mint("CA1", pod, "/admin")), http.StatusForbidden, false},
		"path other than signed": {e.base() + "/ws/pod/" + pod + "/" + good + "/agent/other", http.StatusForbidden, false},
		"encoded traversal":      {e.base() + "/ws/pod/" + pod + "/" + good + "/agent/%2e%2e/admin", http.StatusBadRequest, false},
		"dot segment":            {e.base() + "/ws/pod/" + pod + "/" + good + "/agent/./x", http.StatusBadRequest, false},
		"empty segment":          {e.base() + "/ws/pod/" + pod + "/" + good + "/agent//x", http.StatusBadRequest, false},
		"encoded CR LF in path":  {e.base() + "/ws/pod/" + pod + "/" + good + "/agent%0d%0aX-Evil:%201", http.StatusBadRequest, false},
		"encoded NUL in path":    {e.base() + "/ws/pod/" + pod + "/" + good + "/a%00b", http.StatusBadRequest, false},
		"encoded CR LF in query": {e.url(pod, good) + "&h=%0D%0AX-Evil:%201", http.StatusBadRequest, false},
		"encoded NUL in query":   {e.url(pod, good) + "&n=%00", http.StatusBadRequest, false},
		"bad escape in query":    {e.url(pod, good) + "?n=%zz", http.StatusBadRequest, false},
		"dot-dot pod":            {e.base() + "/ws/pod/%2e%2e/" + good + agentPath, http.StatusNotFound, false},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			before := e.trips.Load()
			_, err := e.dial(tc.url)
			if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("status %d", tc.status)) {
				t.Fatalf("dial: %v, want status %d", err, tc.status)
			}
			if trips := e.trips.Load() - before; !tc.redisTrips && trips != 0 {
				t.Errorf("%d Redis round trips before refusing, want 0", trips)
			} else if tc.redisTrips && trips != 1 {
				t.Errorf("%d Redis round trips, want 1", trips)
			}
		})
	}
	for name, ag := range e.agents {
		if n := ag.Sockets.Load(); n != 0 {
			t.Errorf("pod %s got %d sockets from refused requests", name, n)
		}
	}
	// Plain HTTP on a valid URL is not a socket.
	resp, err := http.Get(e.srv.URL + "/ws/pod/" + pod + "/" + good + "/agent")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Errorf("plain GET: %d, want 400", resp.StatusCode)
	}
	// The same for a pod that does not exist: pod names cannot be
	// enumerated by their answers.
	resp, err = http.Get(e.srv.URL + "/ws/pod/pod-x/" + good + "/agent")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Errorf("plain GET of an unknown pod: %d, want 400 like a known one", resp.StatusCode)
	}
	// The refused attempts did not disturb the call.
	echo(t, e.mustDial(e.url(pod, good)), "still mine")
}

// Without failover (one attempt) a pod that is down answers 502, counted
// with its reason.
func TestPodDownIsBadGateway(t *testing.T) {
	e := newEnv(t, envOpt{cfg: func(c *Config) { c.ConnectAttempts = 1 }})
	pod, url := e.allocate("CA1", "")
	e.agents[pod].Close()
	if _, err := e.dial(url); err == nil || !strings.Contains(err.Error(), "status 502") {
		t.Fatalf("dial: %v, want 502", err)
	}
	if got := value(e.px.metrics.dialFailures.WithLabelValues("refused")); got != 1 {
		t.Errorf("dial failures{refused} = %v, want 1", got)
	}
}

func TestTokenlessWhenNotRequired(t *testing.T) {
	eachRelay(t, func(t *testing.T, relay Relay) {
		e := newEnv(t, envOpt{relay: relay, cfg: func(c *Config) { c.RequireToken = false }})
		podA, _ := e.allocate("CA1", "")
		e.allocate("CA2", "")
		shared, _ := e.allocate("CA3", "")
		if shared != "pod-s" {
			t.Fatalf("third call on %s, want the shared pod-s", shared)
		}
		c := e.mustDial(e.url(podA, ""))
		echo(t, c, "hello")
		if _, err := e.dial(e.url("pod-s", "")); err == nil || !strings.Contains(err.Error(), "status 403") {
			t.Errorf("token-less socket on a shared pod: %v, want 403 (which call is it?)", err)
		}
		if _, err := e.dial(e.url(podA, "c.bogus")); err == nil || !strings.Contains(err.Error(), "status 403") {
			t.Errorf("bad token with require_token false: %v, want 403", err)
		}
		c.Close(websocket.StatusNormalClosure, "")
		e.waitSockets(0)
		if _, err := e.alloc.Call(context.Background(), "CA1"); !errors.Is(err, allocator.ErrCallNotFound) {
			t.Errorf("token-less socket closed but call not released: %v", err)
		}
	})
}

// A call three times longer than its lease keeps its pod while the socket
// lives, and nobody else gets the pod.
func TestLeaseRenewedWhileSocketLives(t *testing.T) {
	eachRelay(t, func(t *testing.T, relay Relay) {
		const ttl = 600 * time.Millisecond
		e := newEnv(t, envOpt{relay: relay, leaseTTL: ttl})
		pod, url := e.allocate("CA1", "")
		other, _ := e.allocate("CA2", "") // the other exclusive pod, never opened
		c := e.mustDial(url)
		end := time.Now().Add(3 * ttl)
		for i := 0; time.Now().Before(end); i++ {
			echo(t, c, fmt.Sprint("frame ", i))
			time.Sleep(20 * time.Millisecond) // the media rate, not a synchronisation
		}
		if owner := e.podOwner(pod); owner != "CA1" {
			t.Fatalf("after 3 lease TTLs pod %s leased to %q, want CA1", pod, owner)
		}
		if owner := e.podOwner(other); owner != "" {
			t.Errorf("pod %s of a call without a socket still leased to %q after 3 TTLs", other, owner)
		}
		echo(t, c, "still flowing")
		if got := value(e.px.metrics.renewals.WithLabelValues("held")); got < 2 {
			t.Errorf("renewals held = %v, want >= 2", got)
		}
	})
}

func TestRenewIsOneRoundTripPerBatch(t *testing.T) {
	e := newEnv(t, envOpt{cfg: func(c *Config) { c.RenewInterval = time.Hour }})
	var conns []*websocket.Conn
	for _, id := range []string{"CA1", "CA2", "CA3"} {
		_, url := e.allocate(id, "")
		conns = append(conns, e.mustDial(url))
	}
	e.waitSockets(3)
	before := e.trips.Load()
	e.px.renewOnce(context.Background())
	if trips := e.trips.Load() - before; trips != 1 {
		t.Errorf("renewing 3 sockets took %d round trips, want 1", trips)
	}
	if got := value(e.px.metrics.renewals.WithLabelValues("held")); got != 3 {
		t.Errorf("renewals held = %v, want 3", got)
	}
	_ = conns
}

func TestLostLeaseClosesSocket(t *testing.T) {
	eachRelay(t, func(t *testing.T, relay Relay) {
		e := newEnv(t, envOpt{relay: relay, cfg: func(c *Config) { c.RenewInterval = time.Hour }})
		_, url := e.allocate("CA1", "")
		c := e.mustDial(url)
		echo(t, c, "hi")
		// The voice agent releases the call itself (its /api/v1/release).
		if _, err := e.alloc.Release(context.Background(), "CA1"); err != nil {
			t.Fatal(err)
		}
		e.px.renewOnce(context.Background())
		if got := readClose(t, c); got != closePolicy {
			t.Errorf("close status = %d, want %d", got, closePolicy)
		}
		e.waitSockets(0)
		if got := value(e.px.metrics.releases.WithLabelValues("not_found")); got != 1 {
			t.Errorf("releases{not_found} = %v, want 1", got)
		}
	})
}

func TestIdleClientIsClosedAndReleased(t *testing.T) {
	eachRelay(t, func(t *testing.T, relay Relay) {
		e := newEnv(t, envOpt{relay: relay, cfg: func(c *Config) { c.IdleTimeout = 300 * time.Millisecond }})
		pod, url := e.allocate("CA1", "")
		c := e.mustDial(url)
		echo(t, c, "one")
		start := time.Now()
		if got := readClose(t, c); got != closeIdleTimeout {
			t.Errorf("close status = %d, want %d", got, closeIdleTimeout)
		}
		if d := time.Since(start); d < 250*time.Millisecond || d > 5*time.Second {
			t.Errorf("idle socket closed after %v, want about 300ms", d)
		}
		e.waitSockets(0)
		if owner := e.podOwner(pod); owner != "" {
			t.Errorf("idle call still holds %s", pod)
		}
	})
}

func TestOversizedFrameClosesSocket(t *testing.T) {
	eachRelay(t, func(t *testing.T, relay Relay) {
		e := newEnv(t, envOpt{relay: relay, cfg: func(c *Config) { c.MaxMessageBytes = 1024 }})
		_, url := e.allocate("CA1", "")
		c := e.mustDial(url)
		echo(t, c, strings.Repeat("a", 1000))
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		c.Write(ctx, websocket.MessageText, []byte(strings.Repeat("b", 4096)))
		readClose(t, c)
		e.waitSockets(0)
		if got := value(e.px.metrics.closes.WithLabelValues("edge", "1009")); got != 1 {
			t.Errorf("closes{edge,1009} = %v, want 1", got)
		}
	})
}

// A call has one media socket: a replay of its URL is refused (409) before
// any pod dial, and the first socket is untouched.
func TestSecondSocketForACallIsRefused(t *testing.T) {
	eachRelay(t, func(t *testing.T, relay Relay) {
		e := newEnv(t, envOpt{relay: relay})
		pod, url := e.allocate("CA1", "")
		c := e.mustDial(url)
		echo(t, c, "first")
		_, err := e.dial(url)
		if err == nil || !strings.Contains(err.Error(), "status 409") {
			t.Fatalf("second socket: err = %v, want 409", err)
		}
		if n := len(e.agents[pod].Paths()); n != 1 {
			t.Fatalf("the pod saw %d sockets, want 1: the duplicate reached it", n)
		}
		echo(t, c, "first still flows")
	})
}
