package main

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/edge-voice/edge/internal/edgetest"
	"github.com/edge-voice/edge/internal/testwait"
)

// A replica stopped gracefully (SIGTERM, its sockets drained) leaves the
// replicas its peers watch: a rolling update is no death. Left there, its
// peers found it dead within the replica TTL of every old pod of every
// rollout (the node test's edge logs: "replicas found dead", and
// edge_replicas_dead_total rose), so the warning and the counter no longer
// told a crash from a deploy.
func TestGracefulStopIsNoDeath(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs two edge processes")
	}
	f := newE2E(t)
	ag := mediaAgent(t)
	cfg := f.config("edge.yaml", `
allocator: {heartbeat_interval: 200ms, replica_ttl: 1s}
tiers: {gold: {type: exclusive, target: 1}}
default_chain: [gold]
proxy: {idle_timeout: 30s, drain_timeout: 60s}
`+podsYAML("gold", "pod-a", ag.Addr()))
	a := f.start("edge-a", cfg)
	b := f.start("edge-b", cfg)
	rdb := f.redis.Client()
	testwait.Until(t, 10*time.Second, "both replicas beating, pod-a available", func() bool {
		return rdb.ZCard(t.Context(), "voice:replicas").Val() == 2 && edgetest.Pod(t, a.admin, "pod-a").Status == "available"
	})
	// A call answered and relayed by a, ended by its caller.
	_, url, status := allocateOn(t, a, "CA-leave-1")
	if status != http.StatusOK {
		t.Fatalf("allocate: %d", status)
	}
	c := mediaDial(t, url)
	mediaStream(t, c, "CA-leave-1", 3)
	c.Close(websocket.StatusNormalClosure, "call ended")

	if err := a.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-a.Done():
	case <-time.After(30 * time.Second):
		t.Fatal("edge-a did not exit after SIGTERM")
	}
	if got := rdb.ZCard(t.Context(), "voice:replicas").Val(); got != 1 {
		t.Errorf("replicas after edge-a stopped gracefully: %d, want 1 (edge-b)", got)
	}
	// b's beats (each asks for the stale replicas, the dead-replica
	// check's first question), until they cover the replica TTL past a's
	// last beat twice over: nothing found dead.
	const checks = `edge_poolmgr_loop_duration_seconds_count{loop="heartbeat"}`
	var from int
	fmt.Sscan(adminMetric(t, b.admin, checks), &from)
	testwait.Until(t, 30*time.Second, "ten more beats on edge-b", func() bool {
		var n int
		fmt.Sscan(adminMetric(t, b.admin, checks), &n)
		return n >= from+10
	})
	if dead := adminMetric(t, b.admin, "edge_replicas_dead_total"); dead != "0" {
		t.Errorf("edge-b found %s replicas dead after edge-a stopped gracefully", dead)
	}
	if strings.Contains(b.Log(), "replicas found dead") {
		t.Error("edge-b logged a replica found dead after edge-a stopped gracefully")
	}
}

// adminMetric reads one unlabelled series of an admin listener's /metrics.
func adminMetric(t *testing.T, admin, series string) string {
	t.Helper()
	resp, err := http.Get(admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	for _, line := range strings.Split(string(body), "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			return v
		}
	}
	return "absent"
}
