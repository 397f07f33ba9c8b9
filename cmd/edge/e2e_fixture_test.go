package main

import (
	"strings"
	"testing"

	"github.com/edge-voice/edge/internal/edgetest"
	"github.com/edge-voice/edge/internal/testredis"
)

// e2e is the fixture of the end-to-end tests that run edge as real
// processes: the edge binary (built once per test process), a Redis on
// TCP, and what every replica of such a test shares, given as
// environment so that a test's config file holds only its own sections:
// the listeners on free ports of 127.0.0.1 (internal included), JSON logs
// at debug, the Redis, and the media token secret every replica must
// share. The generic API token (edgetest.APITokenYAML) is added to each config.
type e2e struct {
	t     *testing.T
	bin   string
	redis *testredis.Server
}

// e2eTokenSecret is the replicas' proxy.token_secret.
var e2eTokenSecret = strings.Repeat("s", 32)

func newE2E(t *testing.T) *e2e {
	t.Helper()
	return &e2e{t: t, bin: edgetest.Binary(t), redis: testredis.Start(t, testredis.TCP())}
}

// config writes a replica's config file, name, holding the test's own
// sections (body) and the generic API token, and returns its path.
func (f *e2e) config(name, body string) string {
	f.t.Helper()
	return edgetest.WriteFile(f.t, name, body+"\n"+edgetest.APITokenYAML)
}

// start runs replica name from cfg (a path from config) with the shared
// settings; env, after them, overrides any (a replica without the
// internal listener: "EDGE_LISTEN__INTERNAL=").
func (f *e2e) start(name, cfg string, env ...string) *mediaReplica {
	f.t.Helper()
	shared := []string{
		"EDGE_LISTEN__PUBLIC=127.0.0.1:0", "EDGE_LISTEN__ADMIN=127.0.0.1:0", "EDGE_LISTEN__INTERNAL=127.0.0.1:0",
		"EDGE_LOG__FORMAT=json", "EDGE_LOG__LEVEL=debug",
		"EDGE_REDIS__URL=" + f.redis.URL(), "EDGE_PROXY__TOKEN_SECRET=" + e2eTokenSecret,
	}
	return mediaStartReplica(f.t, f.bin, name, cfg, append(shared, env...)...)
}

// podsYAML is the pods section of a config with name and address pairs
// in tier.
func podsYAML(tier string, pairs ...string) string {
	var b strings.Builder
	b.WriteString("pods:\n  static:\n")
	for i := 0; i+1 < len(pairs); i += 2 {
		b.WriteString("    - {name: " + pairs[i] + ", address: \"" + pairs[i+1] + "\", tier: " + tier + "}\n")
	}
	return b.String()
}
