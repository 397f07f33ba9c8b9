package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/edge-voice/edge/allocator"
	"github.com/edge-voice/edge/internal/edgetest"
	"github.com/edge-voice/edge/internal/fakeagent"
	"github.com/edge-voice/edge/internal/testwait"
)

// TestBrokenPodsEndToEnd runs broken pods against two real edge
// replicas on one redis-server: a closed port, a listener that accepts and
// never answers, one that answers the upgrade with HTTP 500, one that
// resets, and a pod killed mid-call. Calls are allocated on replica A and
// their sockets opened on B. Each socket on a broken pod succeeds through
// failover, the broken pod is ejected as both replicas see it, the healed
// one returns, and at the end no call, lease or per-call lease is left and
// every pod is in its pool.
func TestBrokenPodsEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs edge processes")
	}
	f := newE2E(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	healthy := mediaAgent(t)
	killed := mediaAgent(t)
	healable := &e2eHealable{}
	// Its handler serves behind the 500 switch; its own listener runs,
	// unused, until the test ends.
	healable.agent = mediaAgent(t)
	pods := map[string]string{
		"pod-ok":     healthy.Addr(),
		"pod-killed": killed.Addr(),
		"x-closed":   e2eBroken(t, "closed", nil),
		"x-hang":     e2eBroken(t, "hang", nil),
		"x-status":   e2eBroken(t, "status", healable),
		"x-reset":    e2eBroken(t, "reset", nil),
	}
	var static []string
	for name, addr := range pods {
		static = append(static, name, addr)
	}
	// Five of six pods fail here: max_ejection_percent 100 lets each be
	// ejected (the bound itself is tested in allocator and proxy). Every
	// call is allocated first and its socket opened subtests later: the
	// lease must outlive that wait on a loaded machine (1s did not: a call
	// was swept before its socket came).
	cfg := f.config("edge.yaml", `
allocator: {lease_ttl: 15s, renew_interval: 5s, call_info_ttl: 1h}
tiers: {gold: {type: exclusive, target: 6}}
default_chain: [gold]
proxy: {idle_timeout: 5s, dial_timeout: 300ms, connect_budget: 2s, eject_backoff: 300ms, eject_max_backoff: 1s, probe_interval: 100ms, max_ejection_percent: 100, health_path: /health}
pool: {zombie_sweep_interval: 300ms}
leader: {lease_duration: 1500ms, renew_deadline: 1s, retry_period: 200ms}
`+podsYAML("gold", static...))
	a := f.start("edge-a", cfg)
	b := f.start("edge-b", cfg)
	testwait.Until(t, 10*time.Second, "all six pods registered", func() bool {
		for pod := range pods {
			if edgetest.Pod(t, a.admin, pod).Status == "" {
				return false
			}
		}
		return true
	})

	// Every pod takes one call; then pod-ok is freed, the one pod the
	// broken pods' calls can move to.
	callOn, urlOf := map[string]string{}, map[string]string{}
	for i := range len(pods) {
		id := fmt.Sprintf("CA-f-%d", i)
		pod, url, status := allocateOn(t, a, id)
		if status != http.StatusOK {
			t.Fatalf("allocate %s: %d", id, status)
		}
		callOn[pod], urlOf[id] = id, mediaOn(b, url)
	}
	mediaPost(t, a.admin+"/api/v1/release", fmt.Sprintf(`{"call_sid":%q}`, callOn["pod-ok"]), nil)

	for pod, reason := range map[string]string{"x-closed": "refused", "x-hang": "timeout", "x-status": "status", "x-reset": "reset"} {
		t.Run(pod, func(t *testing.T) {
			id := callOn[pod]
			c := mediaDial(t, urlOf[id]) // signed for the broken pod
			mediaStream(t, c, id, 5)
			if p := edgetest.Pod(t, a.admin, "pod-ok"); p.Lease != id {
				t.Errorf("pod-ok leased to %q, want %s (the moved call)", p.Lease, id)
			}
			for _, r := range []*mediaReplica{a, b} {
				if ej := e2eEjection(t, r.admin, pod); ej == nil || ej.Reason != reason {
					t.Errorf("%s on %s: ejection %+v, want reason %s", pod, r.name, ej, reason)
				}
			}
			c.Close(websocket.StatusNormalClosure, "")
			testwait.Until(t, 5*time.Second, "pod-ok free", func() bool { return edgetest.Pod(t, a.admin, "pod-ok").Lease == "" })
		})
	}

	t.Run("killed mid-call", func(t *testing.T) {
		id := callOn["pod-killed"]
		c := mediaDial(t, urlOf[id])
		mediaStream(t, c, id, 5)
		// The agent's process dies: its TCP connection ends without a
		// close frame (a hijacked socket outlives http.Server.Close, so
		// the fake agent is told to crash).
		rctx, rcancel := context.WithTimeout(ctx, 5*time.Second)
		defer rcancel()
		if err := c.Write(rctx, websocket.MessageText, []byte(fakeagent.CloseMessage+"0")); err != nil {
			t.Fatal(err)
		}
		if _, _, err := c.Read(rctx); websocket.CloseStatus(err) != 1014 {
			t.Errorf("provider read %v, want close 1014", err)
		}
		testwait.Until(t, 5*time.Second, "pod-killed released", func() bool { return edgetest.Pod(t, b.admin, "pod-killed").Lease == "" })
		if ej := e2eEjection(t, a.admin, "pod-killed"); ej == nil || ej.Reason != "lost" {
			t.Errorf("pod-killed ejection %+v, want lost", ej)
		}
	})

	t.Run("the healed pod returns on both replicas", func(t *testing.T) {
		healable.healed.Store(true)
		for _, r := range []*mediaReplica{a, b} {
			testwait.Until(t, 10*time.Second, "x-status back on "+r.name, func() bool { return e2eEjection(t, r.admin, "x-status") == nil })
		}
		if e2eEjection(t, a.admin, "x-closed") == nil {
			t.Error("x-closed came back while still broken")
		}
	})

	t.Run("invariants", func(t *testing.T) {
		rdb := f.redis.Client()
		k := allocator.NewKeys("")
		for _, pattern := range []string{k.Call("*"), k.Lease("*"), k.PodCalls("*")} {
			if keys := rdb.Keys(ctx, pattern).Val(); len(keys) > 0 {
				t.Errorf("left after every call ended: %v", keys)
			}
		}
		for pod := range pods {
			if !rdb.SIsMember(ctx, k.PoolAvailable("gold"), pod).Val() {
				t.Errorf("%s not back in its pool", pod)
			}
		}
	})
}

type e2eEjectionInfo struct {
	Reason   string `json:"reason"`
	Failures int    `json:"failures"`
}

// e2eEjection reads a pod's ejection from a replica's admin API (nil: none).
func e2eEjection(t *testing.T, admin, pod string) *e2eEjectionInfo {
	t.Helper()
	resp, err := http.Get(admin + "/api/v1/pod/" + pod)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct {
		Pod struct {
			Ejection *e2eEjectionInfo `json:"ejection"`
		} `json:"pod"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		t.Fatal(err)
	}
	return body.Pod.Ejection
}

// e2eHealable answers 500 until healed, then serves media as a fake agent.
type e2eHealable struct {
	healed atomic.Bool
	agent  *fakeagent.Agent
}

func (h *e2eHealable) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !h.healed.Load() {
		http.Error(w, "agent crashed", http.StatusInternalServerError)
		return
	}
	h.agent.ServeHTTP(w, r)
}

// e2eBroken starts a broken pod: closed (nothing listens), hang (accepts,
// never answers), status (h answers), reset (accepts and resets).
func e2eBroken(t *testing.T, kind string, h http.Handler) string {
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
	case "status":
		srv := &http.Server{Handler: h}
		go srv.Serve(ln)
		t.Cleanup(func() { srv.Close() })
		return addr
	}
	go func() {
		var held []net.Conn
		defer func() {
			for _, c := range held {
				c.Close()
			}
		}()
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
			held = append(held, c)
		}
	}()
	t.Cleanup(func() { ln.Close() })
	return addr
}
