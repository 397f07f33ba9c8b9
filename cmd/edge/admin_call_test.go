package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/edge-voice/edge/allocator"
	"github.com/edge-voice/edge/api"
	"github.com/edge-voice/edge/internal/testredis"
)

// `edge admin call` shows a call that moved mid-call (proxy.resume) with
// how often and when it last did, in its table and its JSON, and the pods
// it left; a call that never moved shows neither field. The admin API is
// the real one over a real allocator: the record is the one ResumeCall
// writes, not a copy of its shape.
func TestAdminCallShowsResumptions(t *testing.T) {
	srv := testredis.Start(t)
	rdb := redis.NewClient(srv.Options())
	t.Cleanup(func() { rdb.Close() })
	alloc, err := allocator.New(rdb, allocator.Config{Tiers: allocator.TierConfig{
		Tiers:        map[string]allocator.Tier{"gold": {Type: allocator.Exclusive, Target: 3}},
		DefaultChain: []string{"gold"},
	}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, p := range []string{"g0", "g1", "g2"} {
		if _, err := alloc.RegisterPod(ctx, allocator.Pod{Name: p, Tier: "gold"}); err != nil {
			t.Fatal(err)
		}
	}
	first, err := alloc.Allocate(ctx, allocator.Request{CallID: "CA1", MerchantID: "m1"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := alloc.Allocate(ctx, allocator.Request{CallID: "CA2", MerchantID: "m1"}); err != nil {
		t.Fatal(err)
	}
	if _, err := (allocator.MediaLeases{Alloc: alloc}).Claim(ctx, "CA1", first.PodName, "r/1"); err != nil {
		t.Fatal(err)
	}
	moved, err := alloc.ResumeCall(ctx, "CA1", first.PodName, "r/1", allocator.Ejection{Backoff: time.Second, MaxBackoff: time.Minute, MaxPercent: 100}, true)
	if err != nil {
		t.Fatal(err)
	}
	tl, err := alloc.Timeline(ctx, "CA1")
	if err != nil || tl.Resumptions != 1 || tl.ResumedAt.IsZero() {
		t.Fatalf("timeline = %+v, %v", tl, err)
	}
	const token = "admin-token-0123456789"
	surface := &api.Surface{
		Handlers:   &api.Handlers{Pools: alloc, Records: alloc, Log: slog.New(slog.DiscardHandler)},
		Ready:      &api.Readiness{},
		AdminToken: func() string { return token },
	}
	admin := httptest.NewServer(surface.Admin())
	t.Cleanup(admin.Close)
	call := func(args ...string) string {
		t.Helper()
		var out bytes.Buffer
		if err := run(ctx, append([]string{"admin", "--url", admin.URL, "--token", token}, args...), nil, &out, io.Discard); err != nil {
			t.Fatalf("edge admin %s: %v", strings.Join(args, " "), err)
		}
		return out.String()
	}

	at := tl.ResumedAt.UTC().Format(time.RFC3339Nano)
	table := call("call", "CA1")
	for _, want := range []string{"\nresumptions: 1\n", "\nresumed_at: " + at + "\n", "\npod_name: " + moved.Pod + "\n", `moved_from: ["` + first.PodName + `"]`} {
		if !strings.Contains(table, want) {
			t.Errorf("edge admin call CA1 has no %q:\n%s", strings.TrimSpace(want), table)
		}
	}
	var answer struct {
		Call struct {
			Resumptions int       `json:"resumptions"`
			ResumedAt   time.Time `json:"resumed_at"`
		} `json:"call"`
	}
	if err := json.Unmarshal([]byte(call("-o", "json", "call", "CA1")), &answer); err != nil ||
		answer.Call.Resumptions != 1 || !answer.Call.ResumedAt.Equal(tl.ResumedAt) {
		t.Errorf("edge admin -o json call CA1 = %+v, %v; want 1 resumption at %s", answer.Call, err, at)
	}
	for _, args := range [][]string{{"call", "CA2"}, {"-o", "json", "call", "CA2"}} {
		if out := call(args...); strings.Contains(out, "resum") {
			t.Errorf("edge admin %s: a call that never moved shows a resumption:\n%s", strings.Join(args, " "), out)
		}
	}
}
