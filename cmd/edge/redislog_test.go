package main

import (
	"context"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/edge-voice/edge/config"
)

// go-redis printed its own unstructured lines ("redis: 2026/... sentinel:
// GetMasterAddrByName ... failed") to stderr, into edge's log stream,
// during Redis outages. Its logger now writes through edge's slog, at
// WARN, as "redis client" lines with the text in detail.
func TestRedisClientLinesGoThroughSlog(t *testing.T) {
	// A sentinel address nobody listens on.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()

	cfg, err := config.Load(nil, []string{"EDGE_REDIS__SENTINEL__MASTER=mymaster", `EDGE_REDIS__SENTINEL__ADDRS=["` + addr + `"]`})
	if err != nil {
		t.Fatal(err)
	}
	var buf lockedBuffer
	log := slog.New(slog.NewJSONHandler(&buf, nil))
	rdb, closeRedis, err := newRedis(cfg, log)
	if err != nil {
		t.Fatal(err)
	}
	defer closeRedis()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := rdb.Ping(ctx).Err(); err == nil {
		t.Fatal("a ping through a dead sentinel succeeded")
	}
	out := buf.String()
	if !strings.Contains(out, `"msg":"redis client"`) || !strings.Contains(out, "sentinel") {
		t.Fatalf("go-redis's line did not reach edge's log:\n%s", out)
	}
}
