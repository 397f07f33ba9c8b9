package calls

import (
	"context"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"
)

// refusalLog aggregates refused allocations: a burst that outruns the pool
// refuses calls by the thousand, and one WARN each would bury everything
// else. The first refusal of a quiet period is logged at once; the rest are
// counted and logged as one line per interval with a count per reason.
type refusalLog struct {
	log      *slog.Logger
	interval time.Duration
	level    slog.Level
	msg      string // the line of a refusal logged whole
	aggMsg   string // the line of the counts

	mu      sync.Mutex
	counts  map[string]int // reason -> refusals not yet logged
	pending bool           // a flush is scheduled
}

func newRefusalLog(log *slog.Logger, interval time.Duration) *refusalLog {
	return &refusalLog{log: log, interval: interval, level: slog.LevelWarn,
		msg: "allocation refused", aggMsg: "allocations refused (aggregated)", counts: map[string]int{}}
}

// newReplayLog logs the webhooks of ended calls at info: a replay is no
// trouble of edge's (the call stays ended), but whoever repeats a captured
// webhook, or the README's curl, should find out why they got a hangup.
// Aggregated like refusals, so a flood of replays stays a few lines.
func newReplayLog(log *slog.Logger, interval time.Duration) *refusalLog {
	return &refusalLog{log: log, interval: interval, level: slog.LevelInfo,
		msg: "replay of an ended call refused", aggMsg: "replays of ended calls refused (aggregated)", counts: map[string]int{}}
}

// note records a refusal; first is logged whole when no flush is pending.
func (r *refusalLog) note(reason string, attrs ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.pending {
		r.counts[reason]++
		return
	}
	r.log.Log(context.Background(), r.level, r.msg, append([]any{"reason", reason}, attrs...)...)
	r.pending = true
	time.AfterFunc(r.interval, r.flush)
}

// flush logs what was counted since the last line, and stays quiet (the
// next refusal is logged at once) when nothing was.
func (r *refusalLog) flush() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.counts) == 0 {
		r.pending = false
		return
	}
	attrs := []any{"interval", r.interval}
	for _, reason := range slices.Sorted(maps.Keys(r.counts)) {
		attrs = append(attrs, reason, r.counts[reason])
	}
	r.log.Log(context.Background(), r.level, r.aggMsg, attrs...)
	clear(r.counts)
	time.AfterFunc(r.interval, r.flush)
}

// shortID keeps an id fit for a log line: a refused id can be 64 KiB long.
func shortID(s string) string {
	const max = 64
	if len(s) <= max {
		return s
	}
	return s[:max] + "…"
}
