package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/edge-voice/edge/internal/edgetest"
	"github.com/edge-voice/edge/internal/fakeagent"
	"github.com/edge-voice/edge/internal/testwait"
)

// Redis restarted empty under a running edge (kill redis-server, start an
// empty one on the same port): without restarting edge, the leader's new
// term re-registers the pods from the pod source, and the replica writes
// back the call whose socket it relays before any pod is offered: the live
// call keeps its pod and its media, a new call gets only the free pod, and
// the tier and merchant config come back from the replica's copy. Judged
// as the pods and the caller see it: which pod each socket reached, and the
// live socket's echoes.
func TestRedisRestartedEmpty(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs an edge process")
	}
	f := newE2E(t)
	rs := f.redis
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	agents := map[string]*fakeagent.Agent{}
	var pods []string
	for _, name := range []string{"pod-a", "pod-b"} {
		ag := mediaAgent(t)
		agents[name] = ag
		pods = append(pods, name, ag.Addr())
	}
	cfg := f.config("edge.yaml", `
allocator: {lease_ttl: 1s, renew_interval: 300ms, call_info_ttl: 1h}
tiers: {gold: {type: exclusive, target: 2}}
default_chain: [gold]
proxy: {idle_timeout: 1m}
pool: {zombie_sweep_interval: 300ms, tier_config_refresh: 1m}
leader: {lease_duration: 1500ms, renew_deadline: 1s, retry_period: 200ms}
`+podsYAML("gold", pods...))
	// Merchant config and a merchant pool target live only in Redis; the
	// replica reads its copy at start (the next refresh is a minute away,
	// so what comes back after the restart can only be that copy, written
	// back on the data loss, not a periodic refresh).
	before := rs.Client()
	before.HSet(ctx, "voice:merchant:config", "acme", `{"fallback":["gold"],"max_calls":5}`)
	before.HSet(ctx, "voice:merchant:targets", "acme-pool", 0) // a target of 0 moves no pod
	e := f.start("edge", cfg)
	testwait.Until(t, 10*time.Second, "pods registered", func() bool {
		return edgetest.Pod(t, e.admin, "pod-a").Status == "available" && edgetest.Pod(t, e.admin, "pod-b").Status == "available"
	})
	testwait.Until(t, 10*time.Second, "the tier refresh at start", func() bool { return refreshPasses(t, e) > 0 })

	livePod, url, status := allocateOn(t, e, "CA-empty-1")
	if status != http.StatusOK {
		t.Fatalf("allocate before the restart: %d", status)
	}
	c := mediaDial(t, url)
	mediaStream(t, c, "CA-empty-1", 5)

	rs.Restart()
	restarted := time.Now()
	client := rs.Client()

	// The replica writes its live call back (its heartbeat, about a second).
	testwait.Until(t, 10*time.Second, "the live call written back", func() bool {
		return seccompMetric(t, e.admin, `edge_calls_reasserted_total{result="reasserted"}`) == 1
	})
	t.Logf("live call written back %s after the restart", time.Since(restarted).Round(time.Millisecond))
	// Merchant policy is back before the hold ends, ahead of any allocation.
	if got := client.HGet(ctx, "voice:merchant:config", "acme").Val(); got != `{"fallback":["gold"],"max_calls":5}` {
		t.Errorf("merchant config after the write-back: %q", got)
	}
	if client.Exists(ctx, "voice:tier:config").Val() != 1 {
		t.Error("tier config missing after the write-back")
	}

	// New calls: the free pod (its caller streams on it), then none
	// (after the admission wait); never the live call's pod.
	freePod := map[string]string{"pod-a": "pod-b", "pod-b": "pod-a"}[livePod]
	var got []string
	for i := range 2 {
		asked := time.Now()
		pod, url, status := allocateOn(t, e, fmt.Sprintf("CA-empty-after-%d", i))
		got = append(got, fmt.Sprintf("%s/%d", pod, status))
		t.Logf("new call %d: %s/%d in %s, %s after the restart", i, pod, status, time.Since(asked).Round(time.Millisecond), time.Since(restarted).Round(time.Millisecond))
		if status == http.StatusOK && pod != freePod {
			t.Fatalf("new call %d got %s while the live call holds it (want %s)", i, pod, freePod)
		}
		if status == http.StatusOK {
			nc := mediaDial(t, url)
			mediaStream(t, nc, fmt.Sprintf("CA-empty-after-%d", i), 2)
			defer nc.Close(websocket.StatusNormalClosure, "")
		}
	}
	if got[0] != freePod+"/200" || strings.HasPrefix(got[1], "pod-") {
		t.Fatalf("new calls after the restart: %v, want the free pod %s then none", got, freePod)
	}

	// The live socket still relays, to its own pod, which never saw a
	// second caller.
	mediaStream(t, c, "CA-empty-1", 5)
	if n := agents[livePod].Sockets.Load(); n != 1 {
		t.Fatalf("%s accepted %d sockets, want only the live call's", livePod, n)
	}
	c.Close(websocket.StatusNormalClosure, "")
	testwait.Until(t, 10*time.Second, "the live call's pod free again", func() bool {
		return edgetest.Pod(t, e.admin, livePod).Status == "available"
	})
	testwait.Until(t, 5*time.Second, "a log line saying the calls were written back", func() bool {
		return strings.Contains(e.Log(), "redis lost its data")
	})
}

// refreshPasses is how many tier refreshes replica r has finished, from its
// metrics.
func refreshPasses(t *testing.T, r *mediaReplica) int {
	resp, err := http.Get(r.admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	n := 0
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "edge_tier_config_refresh_total{"); ok {
			_, count, _ := strings.Cut(v, "} ")
			c, _ := strconv.Atoi(count)
			n += c
		}
	}
	return n
}

// A merchant's config and pool target written through the admin API come
// back after Redis restarts empty, even when the restart comes before the
// next tier refresh: the replica that stored them holds them in its copy
// at once (the outside suite's merchant policy was lost this way: written
// after the replicas' first refresh, gone with the restart).
func TestMerchantConfigFromTheAdminAPISurvivesAnEmptyRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs an edge process")
	}
	f := newE2E(t)
	rs := f.redis
	ctx := context.Background()
	cfg := f.config("edge.yaml", `
tiers: {gold: {type: exclusive, target: 1}}
default_chain: [gold]
pool: {tier_config_refresh: 1h}
`+podsYAML("gold", "pod-a", mediaAgent(t).Addr()))
	e := f.start("edge", cfg)
	testwait.Until(t, 10*time.Second, "the tier refresh at start", func() bool { return refreshPasses(t, e) > 0 })
	put := func(path, body string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPut, e.admin+path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("PUT %s: %d", path, resp.StatusCode)
		}
	}
	put("/api/v1/config/merchants/acme", `{"fallback":["gold"],"max_calls":1}`)
	put("/api/v1/config/merchant-pools/acme-pool", `{"target":1}`)

	rs.Restart()
	client := rs.Client()
	testwait.Until(t, 10*time.Second, "the merchant config written back", func() bool {
		return client.HGet(ctx, "voice:merchant:config", "acme").Val() == `{"fallback":["gold"],"max_calls":1}`
	})
	if !client.HExists(ctx, "voice:merchant:targets", "acme-pool").Val() {
		t.Error("the merchant pool target was not written back")
	}
}
