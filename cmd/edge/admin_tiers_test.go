package main

import (
	"bytes"
	"context"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/edge-voice/edge/allocator"
	"github.com/edge-voice/edge/api"
	"github.com/edge-voice/edge/internal/testredis"
)

// `edge admin tiers set` takes the tier config inline, as `merchants set`
// takes a merchant's (an argument starting with "{", spaces before it
// allowed), from a file, or from standard input with "-"; each reaches the
// admin API and is stored. An argument that is neither JSON nor a file is
// refused naming it, and nothing is sent.
func TestAdminTiersSetTakesInlineJSON(t *testing.T) {
	srv := testredis.Start(t)
	rdb := redis.NewClient(srv.Options())
	t.Cleanup(func() { rdb.Close() })
	alloc, err := allocator.New(rdb, allocator.Config{Tiers: allocator.TierConfig{
		Tiers:        map[string]allocator.Tier{"standard": {Type: allocator.Exclusive, Target: 1}},
		DefaultChain: []string{"standard"},
	}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, _, err := alloc.BootstrapTierConfig(ctx, alloc.Config().Tiers); err != nil {
		t.Fatal(err)
	}
	const token = "admin-token-0123456789"
	log := slog.New(slog.DiscardHandler)
	surface := &api.Surface{
		Handlers:   &api.Handlers{Pools: alloc, Log: log},
		Ready:      &api.Readiness{},
		AdminToken: func() string { return token },
		Config:     &api.ConfigAPI{Alloc: alloc, Log: log, OnTierChange: alloc.ApplyTiers},
	}
	admin := httptest.NewServer(surface.Admin())
	t.Cleanup(admin.Close)
	call := func(args ...string) (string, error) {
		var out, errOut bytes.Buffer
		err := run(ctx, append([]string{"admin", "--url", admin.URL, "--token", token}, args...), nil, &out, &errOut)
		return out.String() + errOut.String(), err
	}
	stored := func() allocator.TierConfig {
		t.Helper()
		tc, err := alloc.LoadTierConfig(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return tc
	}

	if out, err := call("tiers", "set", `{"gold":1,"standard":2}`); err != nil {
		t.Fatalf("edge admin tiers set '<json>': %v\n%s", err, out)
	}
	if tc := stored(); tc.Tiers["gold"].Target != 1 || tc.Tiers["standard"].Target != 2 {
		t.Errorf("after tiers set '<json>', Redis holds %+v", tc)
	}
	envelope := ` 
	{"tiers":{"standard":{"type":"exclusive","target":3},"basic":{"type":"shared","target":1,"max_concurrent":2}},"default_chain":["standard","basic"]}`
	if out, err := call("tiers", "set", envelope); err != nil {
		t.Fatalf("edge admin tiers set '<json with space before>': %v\n%s", err, out)
	}
	if tc := stored(); tc.Tiers["standard"].Target != 3 || tc.Tiers["basic"].Type != allocator.Shared {
		t.Errorf("after tiers set '<envelope>', Redis holds %+v", tc)
	}

	// A file still works.
	f := filepath.Join(t.TempDir(), "tiers.json")
	os.WriteFile(f, []byte(`{"standard":4}`), 0o600)
	if out, err := call("tiers", "set", f); err != nil {
		t.Fatalf("edge admin tiers set FILE: %v\n%s", err, out)
	}
	if tc := stored(); tc.Tiers["standard"].Target != 4 {
		t.Errorf("after tiers set FILE, Redis holds %+v", tc)
	}

	// Invalid inline JSON is the API's 400, naming the problem; a name
	// that is no file is refused before anything is sent.
	if out, err := call("tiers", "set", `{"standard":`); err == nil || !strings.Contains(err.Error(), "400") {
		t.Errorf("tiers set with broken JSON: %v\n%s", err, out)
	}
	if _, err := call("tiers", "set", "no-such-file.json"); err == nil || !strings.Contains(err.Error(), "no-such-file.json") {
		t.Errorf("tiers set with a missing file: %v", err)
	}
	if tc := stored(); tc.Tiers["standard"].Target != 4 {
		t.Errorf("a refused tiers set changed Redis: %+v", tc)
	}

	// The usage says so.
	if !strings.Contains(adminUsage, "tiers set JSON|FILE|-") {
		t.Errorf("edge admin --help does not give tiers set's inline form:\n%s", adminUsage)
	}
}
