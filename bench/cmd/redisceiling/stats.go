package main

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// latencies records how long each kind of operation took, as the
// generator (edge's side of the connection) saw it, while recording is on.
type latencies struct {
	on atomic.Bool
	mu sync.Mutex
	by map[string][]time.Duration
}

func newLatencies() *latencies { return &latencies{by: map[string][]time.Duration{}} }

func (l *latencies) add(op string, d time.Duration) {
	if !l.on.Load() {
		return
	}
	l.mu.Lock()
	l.by[op] = append(l.by[op], d)
	l.mu.Unlock()
}

func (l *latencies) since(op string, start time.Time) { l.add(op, time.Since(start)) }

type dist struct {
	n             int
	p50, p99, max time.Duration
}

func (l *latencies) dists() map[string]dist {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := map[string]dist{}
	for op, ds := range l.by {
		out[op] = distOf(ds)
	}
	return out
}

func distOf(ds []time.Duration) dist {
	if len(ds) == 0 {
		return dist{}
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	at := func(q float64) time.Duration { return s[min(len(s)-1, int(q*float64(len(s))))] }
	return dist{n: len(s), p50: at(0.50), p99: at(0.99), max: s[len(s)-1]}
}

// tripCounter counts the round trips a client makes (a pipeline is one),
// the commands edge sends as Redis sees them arrive.
type tripCounter struct{ n atomic.Int64 }

func (t *tripCounter) DialHook(next redis.DialHook) redis.DialHook { return next }

func (t *tripCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		t.n.Add(1)
		return next(ctx, cmd)
	}
}

func (t *tripCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		t.n.Add(1)
		return next(ctx, cmds)
	}
}

var _ redis.Hook = (*tripCounter)(nil)
