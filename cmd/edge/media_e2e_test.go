package main

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/edge-voice/edge/internal/edgetest"
	"github.com/edge-voice/edge/internal/fakeagent"
	"github.com/edge-voice/edge/internal/testwait"
)

const mediaLeaseTTL = time.Second

// TestMediaPathEndToEnd runs the media path with real processes: one
// redis-server, two edge replicas sharing it and a token secret, two fake
// voice agents as static pods. Calls are allocated on replica A and their
// media sockets opened on replica B, as behind a load balancer.
func TestMediaPathEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs edge processes")
	}
	f := newE2E(t)
	agents := map[string]*fakeagent.Agent{}
	var pods []string
	for _, name := range []string{"pod-a", "pod-b"} {
		ag := mediaAgent(t)
		agents[name] = ag
		pods = append(pods, name, ag.Addr())
	}
	cfg := f.config("edge.yaml", fmt.Sprintf(`
allocator: {lease_ttl: %s, renew_interval: 300ms, call_info_ttl: 1h}
tiers: {gold: {type: exclusive, target: 2}}
default_chain: [gold]
proxy: {idle_timeout: 5s}
pool: {zombie_sweep_interval: 300ms}
leader: {lease_duration: 1500ms, renew_deadline: 1s, retry_period: 200ms}
`, mediaLeaseTTL)+podsYAML("gold", pods...))
	// B, which holds the sockets, relays them through io_uring.
	a := f.start("edge-a", cfg)
	b := f.start("edge-b", cfg, "EDGE_PROXY__RELAY=uring", "EDGE_PROXY__URING_BATCH=200us")

	// allocate on A; the media URL is rewritten to reach B.
	allocate := func(t *testing.T, callID string) (pod, wsURL string, status int) {
		pod, wsURL, status = allocateOn(t, a, callID)
		return pod, mediaOn(b, wsURL), status
	}

	t.Run("socket on the other replica echoes and its close frees the pod", func(t *testing.T) {
		pod, url, status := allocate(t, "CA-e2e-1")
		if status != http.StatusOK || !strings.Contains(url, "/c.") {
			t.Fatalf("allocate: %d %q", status, url)
		}
		c := mediaDial(t, url)
		mediaStream(t, c, "CA-e2e-1", 50) // one second at 50 frames/s
		c.Close(websocket.StatusNormalClosure, "stop")
		testwait.Until(t, 5*time.Second, pod+" back in its pool", func() bool {
			p := edgetest.Pod(t, a.admin, pod)
			return p.Status == "available" && p.Lease == ""
		})
		if got := agents[pod].Paths(); len(got) != 1 || got[0] != "/agent/voice/breeze-buddy/twilio/callback/order-confirmation/v2" {
			t.Errorf("pod saw %q", got)
		}
	})

	t.Run("the replica set to relay through io_uring did", func(t *testing.T) {
		relay := "uring"
		if strings.Contains(b.Log(), "uring relay unavailable") {
			relay = "epoll" // io_uring refused here: the log says why
		}
		want := fmt.Sprintf(`edge_proxy_relayed_sockets_total{client="tcp",relay=%q} 1`, relay)
		if m := provBody(t, b.admin+"/metrics"); !strings.Contains(m, want) {
			t.Errorf("replica B's metrics lack %s", want)
		}
	})

	t.Run("a call three lease TTLs long keeps its pod", func(t *testing.T) {
		pod, url, _ := allocate(t, "CA-e2e-long")
		c := mediaDial(t, url)
		end := time.Now().Add(3*mediaLeaseTTL + 500*time.Millisecond)
		for i := 0; time.Now().Before(end); i++ {
			mediaStream(t, c, "CA-e2e-long", 10)
			// Someone else calls meanwhile: never this pod.
			other := fmt.Sprintf("CA-e2e-other-%d", i)
			if got, _, status := allocate(t, other); status == http.StatusOK {
				if got == pod {
					t.Fatalf("%s got %s, held by a live call", other, pod)
				}
				mediaPost(t, a.admin+"/api/v1/release", fmt.Sprintf(`{"call_sid":%q}`, other), nil)
			}
			if p := edgetest.Pod(t, a.admin, pod); p.Lease != "CA-e2e-long" {
				t.Fatalf("after %d rounds the lease of %s is %q, want CA-e2e-long", i, pod, p.Lease)
			}
		}
		c.Close(websocket.StatusNormalClosure, "")
		testwait.Until(t, 5*time.Second, pod+" released", func() bool { return edgetest.Pod(t, a.admin, pod).Status == "available" })
	})

	t.Run("kill -9 of the replica holding the socket: the pod comes back after lease expiry and a sweep", func(t *testing.T) {
		// Nothing renews the lease of a socket whose replica died; the
		// leader's zombie sweep (pool.zombie_sweep_interval, 300ms here)
		// then returns the pod. B may have been the leader: A takes over
		// within leader.lease_duration.
		pod, url, _ := allocate(t, "CA-e2e-kill")
		c := mediaDial(t, url)
		mediaStream(t, c, "CA-e2e-kill", 5)
		b.Kill()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if _, _, err := c.Read(ctx); err == nil {
			t.Fatal("socket still open after its replica died")
		}
		killed := time.Now()
		if p := edgetest.Pod(t, a.admin, pod); p.Status == "available" {
			t.Fatalf("%s available at once after the kill (%+v): the lease should hold it until it expires", pod, p)
		}
		testwait.Until(t, 3*mediaLeaseTTL, "lease of "+pod+" expired", func() bool { return edgetest.Pod(t, a.admin, pod).Lease == "" })
		expired := time.Since(killed)
		testwait.Until(t, 10*time.Second, pod+" back in its pool", func() bool {
			p := edgetest.Pod(t, a.admin, pod)
			return p.Status == "available" && p.CallID == ""
		})
		t.Logf("lease expired %v after the kill, pod available after %v", expired.Round(10*time.Millisecond), time.Since(killed).Round(10*time.Millisecond))
		// Both pods serve calls again (on A, the surviving replica).
		var got []string
		var conns []*websocket.Conn
		for _, id := range []string{"CA-e2e-after-kill-1", "CA-e2e-after-kill-2"} {
			p, url, status := allocateOn(t, a, id)
			if status != http.StatusOK {
				t.Fatalf("allocate %s after the sweep: %d", id, status)
			}
			got = append(got, p)
			c := mediaDial(t, url)
			mediaStream(t, c, id, 5)
			conns = append(conns, c)
		}
		if !slices.Contains(got, pod) {
			t.Errorf("after the sweep two calls got %v, not %s", got, pod)
		}
		for i, c := range conns {
			c.Close(websocket.StatusNormalClosure, "")
			testwait.Until(t, 5*time.Second, got[i]+" released", func() bool { return edgetest.Pod(t, a.admin, got[i]).Status == "available" })
		}
	})

	t.Run("SIGTERM drains: open sockets keep flowing, new ones are refused", func(t *testing.T) {
		_, url, _ := allocate(t, "CA-e2e-drain")
		url = mediaOn(a, url)
		c := mediaDial(t, url)
		a.Signal(syscall.SIGTERM)
		testwait.Until(t, 5*time.Second, "readiness false after SIGTERM", func() bool {
			resp, err := http.Get(a.admin + "/readyz")
			if err != nil {
				return true // the admin listener closed: shutdown is under way
			}
			resp.Body.Close()
			return resp.StatusCode == http.StatusServiceUnavailable
		})
		dctx, dcancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer dcancel()
		if c2, _, err := websocket.Dial(dctx, url, nil); err == nil {
			c2.CloseNow()
			t.Fatal("a new media socket was accepted after SIGTERM")
		}
		// The socket outlives the SIGTERM and its lease is renewed.
		end := time.Now().Add(2 * mediaLeaseTTL)
		for time.Now().Before(end) {
			mediaStream(t, c, "CA-e2e-drain", 10)
		}
		select {
		case <-a.Done():
			t.Fatal("edge exited with a media socket open")
		default:
		}
		c.Close(websocket.StatusNormalClosure, "")
		select {
		case <-a.Done():
		case <-time.After(10 * time.Second):
			t.Fatal("edge did not exit after its last socket closed")
		}
		if !strings.Contains(a.Log(), "draining media sockets") {
			t.Error("no drain in the log")
		}
	})
}

// allocateOn allocates a call on replica r and returns its pod and media
// URL (on r).
func allocateOn(t *testing.T, r *mediaReplica, callID string) (pod, wsURL string, status int) {
	t.Helper()
	var ans struct {
		PodName string `json:"pod_name"`
		WSURL   string `json:"ws_url"`
	}
	status = mediaPost(t, r.public+"/api/v1/allocate", fmt.Sprintf(`{"call_sid":%q}`, callID), &ans)
	return ans.PodName, mediaOn(r, ans.WSURL), status
}

// mediaOn points a media URL at replica r, as a load balancer would send
// it anywhere.
func mediaOn(r *mediaReplica, wsURL string) string {
	return edgetest.MediaOn(r.public, wsURL)
}

func mediaDial(t *testing.T, url string) *websocket.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, resp, err := websocket.Dial(ctx, url, nil)
	if err != nil {
		status := 0
		if resp != nil {
			status = resp.StatusCode
		}
		t.Fatalf("open %s: %v (status %d)", url, err, status)
	}
	t.Cleanup(func() { c.CloseNow() })
	return c
}

// mediaStream sends n Twilio-like media frames at 50 per second and checks
// every echo, in order, while the next frames are on their way.
func mediaStream(t *testing.T, c *websocket.Conn, callID string, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	payload := base64.StdEncoding.EncodeToString(make([]byte, 160))
	frame := func(i int) string {
		return fmt.Sprintf(`{"event":"media","streamSid":"MZ%s","sequenceNumber":"%d","media":{"track":"inbound","payload":"%s"}}`, callID, i, payload)
	}
	errc := make(chan error, 1)
	go func() {
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for i := range n {
			if err := c.Write(ctx, websocket.MessageText, []byte(frame(i))); err != nil {
				errc <- err
				return
			}
			<-tick.C
		}
		errc <- nil
	}()
	for i := range n {
		_, got, err := c.Read(ctx)
		if err != nil {
			t.Fatalf("read echo %d: %v", i, err)
		}
		if string(got) != frame(i) {
			t.Fatalf("echo %d = %.80s, want %.80s", i, got, frame(i))
		}
	}
	if err := <-errc; err != nil {
		t.Fatalf("write: %v", err)
	}
}
