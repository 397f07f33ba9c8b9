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

	"github.com/edge-voice/edge/internal/testredis"
)

// Redis restarted empty under a running edge (kill redis-server, start an
// empty one on the same port): without restarting edge, the leader's new
// term re-registers the pods from the pod source, the tier config comes
// back from the replica's copy, and allocation works again. A live media
// socket's call is not re-recorded: its next renewal finds no call, and edge
// ends the socket cleanly with a close frame (1008) rather than relaying a
// call that no longer owns its pod.
func TestRedisRestartedEmpty(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs an edge process")
	}
	bin := mediaBuildEdge(t)
	rs := testredis.Start(t, testredis.TCP())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var pods strings.Builder
	for _, name := range []string{"pod-a", "pod-b"} {
		ag := mediaAgent(t)
		fmt.Fprintf(&pods, "    - {name: %s, address: %q, tier: gold}\n", name, ag.Addr())
	}
	cfg := mediaWriteFile(t, "edge.yaml", fmt.Sprintf(`
listen: {public: "127.0.0.1:0", admin: "127.0.0.1:0", internal: "127.0.0.1:0"}
log: {format: json, level: debug}
redis: {url: %q}
allocator: {lease_ttl: 1s, renew_interval: 300ms, call_info_ttl: 1h}
tiers: {gold: {type: exclusive, target: 2}}
default_chain: [gold]
pods:
  static:
%s
proxy: {token_secret: %q, idle_timeout: 5s}
pool: {zombie_sweep_interval: 300ms, tier_config_refresh: 300ms}
leader: {lease_duration: 1500ms, renew_deadline: 1s, retry_period: 200ms}
`+apiTokenYAML, rs.URL(), pods.String(), strings.Repeat("s", 32)))
	e := mediaStartReplica(t, bin, "edge", cfg)
	mediaEventually(t, 10*time.Second, "pods registered", func() bool {
		return mediaPod(t, e.admin, "pod-a").Status == "available" && mediaPod(t, e.admin, "pod-b").Status == "available"
	})

	// Merchant config and a merchant pool target (only in Redis), seen by
	// the replica's tier refresher: two passes after the write, so one
	// started after it.
	before := rs.Client()
	before.HSet(ctx, "voice:merchant:config", "acme", `{"tier":"gold"}`)
	before.HSet(ctx, "voice:merchant:targets", "acme-pool", 0) // a target of 0 moves no pod
	passes := refreshPasses(t, e)
	mediaEventually(t, 10*time.Second, "two tier refreshes after the merchant write", func() bool { return refreshPasses(t, e) >= passes+2 })

	_, url, status := allocateOn(t, e, "CA-empty-1")
	if status != http.StatusOK {
		t.Fatalf("allocate before the restart: %d", status)
	}
	c := mediaDial(t, url)
	mediaStream(t, c, "CA-empty-1", 5)

	rs.Restart()
	restarted := time.Now()
	client := rs.Client()

	// The live socket ends with a close frame, not a reset or a hang.
	rctx, rcancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer rcancel()
	for {
		if _, _, err := c.Read(rctx); err != nil {
			if got := websocket.CloseStatus(err); got != websocket.StatusPolicyViolation {
				t.Fatalf("socket of the lost call ended with %v (status %d), want a 1008 close frame", err, got)
			}
			break
		}
	}
	t.Logf("live socket closed with 1008 %s after the restart", time.Since(restarted).Round(time.Millisecond))

	// Pods re-registered and allocatable again, without restarting edge.
	var allocated time.Duration
	for i := 0; ; i++ {
		_, _, status := allocateOn(t, e, fmt.Sprintf("CA-empty-after-%d", i))
		if status == http.StatusOK {
			allocated = time.Since(restarted)
			break
		}
		if time.Since(restarted) > 20*time.Second {
			t.Fatalf("no allocation 20s after Redis restarted empty (last status %d)", status)
		}
		time.Sleep(100 * time.Millisecond)
	}
	mediaEventually(t, 10*time.Second, "tier config restored", func() bool {
		return client.Exists(context.Background(), "voice:tier:config").Val() == 1
	})
	t.Logf("allocatable again %s after the restart; tier config restored after %s", allocated.Round(time.Millisecond), time.Since(restarted).Round(time.Millisecond))
	// edge's log lines leave in batches (logwriter.go): awaited, not read
	// at once.
	mediaEventually(t, 5*time.Second, "a log line saying the tier config was restored", func() bool {
		return strings.Contains(e.logText(), "restored this replica's copy")
	})
	mediaEventually(t, 10*time.Second, "merchant config and target restored", func() bool {
		return client.HGet(context.Background(), "voice:merchant:config", "acme").Val() == `{"tier":"gold"}` &&
			client.HGet(context.Background(), "voice:merchant:targets", "acme-pool").Val() == "0"
	})
	t.Logf("merchant config restored %s after the restart", time.Since(restarted).Round(time.Millisecond))
	mediaEventually(t, 5*time.Second, "a log line saying the merchant config was restored", func() bool {
		return strings.Contains(e.logText(), "merchant config and pool targets were missing")
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
