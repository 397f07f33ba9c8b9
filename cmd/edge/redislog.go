package main

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// redisLog is go-redis's logger (redis.SetLogger) writing into edge's log
// stream: its lines (failed dials, sentinel lookups, pool errors) become
// WARN "redis client" lines with the text in detail, at most one per
// interval, with the number dropped since the last one. During an outage
// go-redis prints the same failure dozens of times; the allocator's own
// errors and metrics already say what failed.
type redisLog struct {
	log      *slog.Logger
	interval time.Duration

	mu         sync.Mutex
	last       time.Time
	suppressed int
}

func (l *redisLog) Printf(ctx context.Context, format string, v ...any) {
	l.mu.Lock()
	now := time.Now()
	if !l.last.IsZero() && now.Sub(l.last) < l.interval {
		l.suppressed++
		l.mu.Unlock()
		return
	}
	suppressed := l.suppressed
	l.last, l.suppressed = now, 0
	l.mu.Unlock()
	attrs := []any{"detail", strings.TrimSpace(fmt.Sprintf(format, v...))}
	if suppressed > 0 {
		attrs = append(attrs, "suppressed", suppressed)
	}
	l.log.WarnContext(context.WithoutCancel(ctx), "redis client", attrs...)
}

// routeRedisLog sends go-redis's lines to log. go-redis's logger is
// process-wide: the last call wins.
func routeRedisLog(log *slog.Logger) {
	redis.SetLogger(&redisLog{log: log.With("component", "redis"), interval: 10 * time.Second})
}
