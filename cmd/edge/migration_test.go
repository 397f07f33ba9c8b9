package main

import (
	"context"
	"encoding/json"
	"github.com/redis/go-redis/v9"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/edge-voice/edge/internal/edgetest"
	"github.com/edge-voice/edge/internal/testredis"
)

const predecessorWarning = "Redis holds calls the predecessor allocated"

// Edge started with its short default lease on a Redis
// holding the predecessor's calls WARNs (their media still flows through
// nginx, nothing renews their leases); with allocator.migration it does not,
// and a predecessor agent releases its call on the internal listener.
func TestPredecessorCallsAtStart(t *testing.T) {
	srv := testredis.Start(t)
	rdb := srv.Client()
	ctx := context.Background()
	dir := t.TempDir()
	base := "redis:\n  url: " + srv.URL() + "\npods:\n  static:\n    - {name: p0, address: 127.0.0.1:9, tier: standard}\n"
	short := filepath.Join(dir, "short.yaml")
	os.WriteFile(short, []byte(base), 0o600)
	migrating := filepath.Join(dir, "migration.yaml")
	os.WriteFile(migrating, []byte(base+"allocator:\n  migration: true\n"), 0o600)

	// A call the predecessor allocated on p0 (seeds 000 §6, the five stores).
	seedCall := func(c redis.Cmdable) {
		c.Del(ctx, "voice:call_ended:CA-pred")
		c.HSet(ctx, "voice:call:CA-pred", "pod_name", "p0", "source_pool", "pool:standard", "merchant_id", "", "allocated_at", time.Now().Unix())
		c.Expire(ctx, "voice:call:CA-pred", 24*time.Hour)
	}
	seedCall(rdb)

	edge := edgetest.Start(t, []string{"--config", short})
	if !strings.Contains(edge.Log(), predecessorWarning) {
		t.Fatalf("no WARN about the predecessor's calls with a 60s lease:\n%s", edge.Log())
	}
	edge.Kill()

	edge = edgetest.Start(t, []string{"--config", migrating})
	if strings.Contains(edge.Log(), predecessorWarning) {
		t.Fatalf("WARN about the predecessor's calls in migration mode:\n%s", edge.Log())
	}
	// Wait for p0 to be registered, then let the predecessor take it.
	deadline := time.Now().Add(10 * time.Second)
	for rdb.Exists(ctx, "voice:pod:tier:p0").Val() == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("p0 never registered:\n%s", edge.Log())
		}
		time.Sleep(20 * time.Millisecond)
	}
	// The predecessor's allocation, all its stores in one step: a call info
	// naming a pod that does not name it back is a dead call, which edge's
	// leader ends (the first edge may already have, before it was killed).
	if _, err := rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		seedCall(p)
		p.SRem(ctx, "voice:pool:standard:available", "p0")
		p.HSet(ctx, "voice:pod:p0", "status", "allocated", "allocated_call_sid", "CA-pred", "source_pool", "pool:standard")
		p.Set(ctx, "voice:lease:p0", "CA-pred", 15*time.Minute)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	status, body := getJSON(t, edge.InternalURL+"/api/v1/pod/p0")
	if status != 200 || body["has_active_lease"] != true || body["lease_call_sid"] != "CA-pred" {
		t.Fatalf("pod info of the predecessor's pod: %d %v", status, body)
	}
	status, body = postJSON(t, edge.InternalURL+"/api/v1/release", `{"call_sid":"CA-pred"}`)
	if status != 200 || body["released_to_pool"] != "pool:standard" {
		t.Fatalf("release of the predecessor's call: %d %v", status, body)
	}
	if !rdb.SIsMember(ctx, "voice:pool:standard:available", "p0").Val() {
		t.Fatal("p0 is not back in its pool")
	}
}

func getJSON(t *testing.T, url string) (int, map[string]any) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out
}
