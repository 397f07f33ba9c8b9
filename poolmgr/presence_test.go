package poolmgr

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/edge-voice/edge/allocator"
	"github.com/edge-voice/edge/allocator/allocatortest"
)

// Every replica beats once a second; the dead-replica check after each beat
// asked Redis for its clock and the stale replicas in two more round trips,
// although a beat finds none almost always. A beat now answers that
// question itself: with no stale peer, a beat and its check are one
// command.
func TestABeatWithNoStalePeerIsOneCommand(t *testing.T) {
	_, rdb := startRedis(t)
	a, err := allocator.New(rdb, allocator.Config{LeaseTTL: time.Minute, ReplicaTTL: 5 * time.Second, Tiers: allocatortest.Tiers()}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := a.Heartbeat(ctx, "edge-b"); err != nil { // a live peer
		t.Fatal(err)
	}
	sent := &sentCommands{}
	rdb.AddHook(sent)
	const beats = 5
	var n int
	stopped := make(chan struct{})
	runCtx, cancel := context.WithCancel(ctx)
	p := &Presence{
		Beat: func(ctx context.Context) (allocator.Beat, error) {
			b, err := a.Heartbeat(ctx, "edge-a")
			if n++; n == beats {
				cancel()
			}
			return b, err
		},
		DeadReplicas: func(ctx context.Context, stale []string) (allocator.DeadReplicas, error) {
			return a.EndDeadReplicas(ctx, "", stale)
		},
		Interval: func() time.Duration { return time.Millisecond },
		Log:      quietLog(), Metrics: NewMetrics(nil),
	}
	go func() { defer close(stopped); p.Run(runCtx) }()
	<-stopped
	if got := sent.names(); len(got) != beats {
		t.Errorf("%d beats and their checks sent %d commands, want one each: %v", beats, len(got), got)
	}
}

// sentCommands counts the commands a client sends (scripts count once,
// whatever they run inside Redis).
type sentCommands struct {
	mu   sync.Mutex
	sent []string
}

func (c *sentCommands) DialHook(next redis.DialHook) redis.DialHook { return next }
func (c *sentCommands) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		c.mu.Lock()
		c.sent = append(c.sent, cmd.Name())
		c.mu.Unlock()
		return next(ctx, cmd)
	}
}
func (c *sentCommands) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		c.mu.Lock()
		for _, cmd := range cmds {
			c.sent = append(c.sent, cmd.Name())
		}
		c.mu.Unlock()
		return next(ctx, cmds)
	}
}

func (c *sentCommands) names() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.sent...)
}

// The stale replicas a beat lists are those whose own beat is older than
// the TTL, by Redis' clock; the beating replica is never one.
func TestABeatListsTheStaleReplicas(t *testing.T) {
	_, rdb := startRedis(t)
	a, err := allocator.New(rdb, allocator.Config{LeaseTTL: time.Minute, ReplicaTTL: 50 * time.Millisecond, Tiers: allocatortest.Tiers()}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := a.Heartbeat(ctx, "edge-old"); err != nil {
		t.Fatal(err)
	}
	b, err := a.Heartbeat(ctx, "edge-a")
	if err != nil || len(b.Stale) != 0 {
		t.Fatalf("right after edge-old beat: stale %v, %v; want none", b.Stale, err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond) // Redis' clock passing the TTL is the event
		if b, err = a.Heartbeat(ctx, "edge-a"); err != nil {
			t.Fatal(err)
		}
		if len(b.Stale) > 0 {
			break
		}
	}
	if len(b.Stale) != 1 || b.Stale[0] != "edge-old" {
		t.Fatalf("stale %v, want [edge-old]", b.Stale)
	}
}
