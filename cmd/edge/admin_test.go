package main

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/edge-voice/edge/internal/edgetest"
	"github.com/edge-voice/edge/internal/testredis"
)

// `edge admin` reads and writes tier and merchant config through the admin
// API of a running edge; invalid input is refused and changes nothing; a new
// tier config applies on the replica at once.
func TestAdminConfigCLI(t *testing.T) {
	srv := testredis.Start(t)
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "edge.yaml")
	os.WriteFile(cfgPath, []byte("redis:\n  url: "+srv.URL()+"\npods:\n  static:\n    - {name: p0, address: 127.0.0.1:9}\n"), 0o600)
	edge := edgetest.Start(t, []string{"--config", cfgPath})
	admin := func(args ...string) (string, error) {
		var out bytes.Buffer
		err := run(context.Background(), append([]string{"admin", "--url", edge.AdminURL}, args...), nil, &out, io.Discard)
		return out.String(), err
	}

	tiers := filepath.Join(dir, "tiers.json")
	os.WriteFile(tiers, []byte(`{"tiers":{"vip":{"type":"exclusive","target":1},"pool":{"type":"shared","target":1,"max_concurrent":2}},"default_chain":["vip","pool"]}`), 0o600)
	if _, err := admin("tiers", "set", tiers); err != nil {
		t.Fatal(err)
	}
	out, err := admin("tiers", "get")
	if err != nil || !strings.Contains(out, `"vip"`) {
		t.Fatalf("tiers get = %s, %v", out, err)
	}
	// Applied at once on this replica: a merchant may name the new tier.
	if _, err := admin("merchants", "set", "acme", `{"pool":"acme","fallback":["vip"],"max_calls":3,"rate_per_second":2.5}`); err != nil {
		t.Fatalf("merchant naming the new tier: %v", err)
	}
	for name, args := range map[string][]string{
		"unknown tier in fallback": {"merchants", "set", "acme", `{"fallback":["nope"]}`},
		"unknown field":            {"merchants", "set", "acme", `{"pool":"acme","fallbak":["vip"]}`},
		"bad merchant id":          {"merchants", "set", "a:b", `{}`},
		"negative target":          {"pools", "set", "acme", "-1"},
		"zero max_calls":           {"merchants", "set", "acme", `{"max_calls":0}`},
		"absurd max_calls":         {"merchants", "set", "acme", `{"max_calls":1000000000}`},
		"fractional max_calls":     {"merchants", "set", "acme", `{"max_calls":2.5}`},
		"zero rate_per_second":     {"merchants", "set", "acme", `{"rate_per_second":0}`},
		"rate_burst without rate":  {"merchants", "set", "acme", `{"rate_burst":5}`},
	} {
		if _, err := admin(args...); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	bad := filepath.Join(dir, "bad.json")
	os.WriteFile(bad, []byte(`{"tiers":{"vip":{"type":"weird"}},"default_chain":["vip"]}`), 0o600)
	if _, err := admin("tiers", "set", bad); err == nil {
		t.Fatal("invalid tier config accepted")
	}
	if out, _ := admin("merchants", "get", "acme"); !strings.Contains(out, `"vip"`) || !strings.Contains(out, `"max_calls": 3`) || !strings.Contains(out, `"rate_per_second": 2.5`) {
		t.Fatalf("merchant config changed by refused writes: %s", out)
	}
	if _, err := admin("pools", "set", "acme", "2"); err != nil {
		t.Fatal(err)
	}
	if out, _ := admin("pools", "list"); !strings.Contains(out, `"acme": 2`) {
		t.Fatalf("pools list = %s", out)
	}
	if _, err := admin("merchants", "delete", "acme"); err != nil {
		t.Fatal(err)
	}
	if _, err := admin("merchants", "get", "acme"); err == nil {
		t.Fatal("deleted merchant still readable")
	}
	if !edge.Stop(30 * time.Second) {
		t.Fatal("edge did not stop")
	}
}

// The log level changes at run time through the admin API and the CLI,
// without a restart: a debug line appears only after the change.
func TestAdminLogLevel(t *testing.T) {
	srv := testredis.Start(t)
	cfgPath := filepath.Join(t.TempDir(), "edge.yaml")
	os.WriteFile(cfgPath, []byte("redis:\n  url: "+srv.URL()+"\nlog:\n  level: info\npods:\n  static:\n    - {name: p0, address: 127.0.0.1:9}\n"), 0o600)
	edge := edgetest.Start(t, []string{"--config", cfgPath})
	admin := func(args ...string) (string, error) {
		var out bytes.Buffer
		err := run(context.Background(), append([]string{"admin", "--url", edge.AdminURL}, args...), nil, &out, io.Discard)
		return out.String(), err
	}
	if out, err := admin("log-level"); err != nil || !strings.Contains(out, `"info"`) {
		t.Fatalf("log-level = %s, %v", out, err)
	}
	if _, err := admin("log-level", "verbose"); err == nil {
		t.Fatal("an unknown level was accepted")
	}
	if out, err := admin("log-level", "debug"); err != nil || !strings.Contains(out, `"debug"`) {
		t.Fatalf("log-level debug = %s, %v", out, err)
	}
	// The process's output is read by a goroutine: poll it (no event).
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(edge.Log(), "log level changed"); {
		if time.Now().After(deadline) {
			t.Fatalf("no log line for the change:\n%s", edge.Log())
		}
		time.Sleep(20 * time.Millisecond)
	}
}
