package proxy

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/edge-voice/edge/allocator"
	"github.com/edge-voice/edge/internal/mediacontract"
	"github.com/edge-voice/edge/internal/testwait"
)

// cutOffClaims is a replica's view of Redis while a partition cuts it off:
// its claims get no answer; every other replica (the allocator itself)
// still reaches Redis.
type cutOffClaims struct {
	Leases
	cut atomic.Bool
}

func (c *cutOffClaims) Claim(ctx context.Context, callID, pod, holder string) (mediacontract.Claimed, error) {
	if c.cut.Load() {
		return mediacontract.Claimed{}, fmt.Errorf("claim %s: %w", callID, allocator.ErrUnavailable)
	}
	return c.Leases.Claim(ctx, callID, pod, holder)
}

// A replica cut off from Redis that refuses a media socket says so in its
// log (the call and the reason, at most a line a second with a count of
// the rest), and the call, whose provider hung up, is ended once Redis
// answers: its pod back at once, not at the lease's end. A call whose
// socket another replica admitted meanwhile is left alone.
func TestSocketRefusedForRedisIsLoggedAndItsCallEnded(t *testing.T) {
	sink := &lockedBuf{}
	cut := &cutOffClaims{}
	e := newEnv(t, envOpt{log: slog.New(slog.NewJSONHandler(sink, nil)),
		leases: func(l Leases) Leases { cut.Leases = l; return cut },
		cfg:    func(c *Config) { c.ConnectBudget = 200 * time.Millisecond }})
	ctx := context.Background()
	pod, u := e.allocate("CA-cut", "")
	heldPod, heldURL := e.allocate("CA-held", "")
	// Another replica admitted CA-held's socket (a provider's retry there):
	// its claim keeps the call whatever this replica queues.
	if _, err := e.alloc.ClaimMedia(ctx, "CA-held", heldPod, "other-replica/1"); err != nil {
		t.Fatal(err)
	}
	cut.cut.Store(true)
	for _, url := range []string{u, u, heldURL} {
		if _, err := e.dial(url); err == nil {
			t.Fatal("a socket was admitted without its claim")
		}
	}
	if got := value(e.px.metrics.refused.WithLabelValues("redis_error")); got != 3 {
		t.Fatalf("refused{redis_error} = %v, want 3", got)
	}
	var logged []map[string]any
	for _, l := range sink.lines(t) {
		if l["reason"] == "redis_error" && l["level"] == "WARN" {
			logged = append(logged, l)
		}
	}
	if len(logged) != 1 || logged[0]["call_sid"] != "CA-cut" || logged[0]["pod"] != pod {
		t.Errorf("refusals logged: %v; want one WARN naming CA-cut on %s (the others within the second counted, not logged)", logged, pod)
	}
	testwait.Until(t, 10*time.Second, "CA-cut ended", func() bool {
		tl, err := e.alloc.Timeline(ctx, "CA-cut")
		return err == nil && tl.State == "ended" && tl.ReleasedBy == "refused"
	})
	if owner := e.podOwner(pod); owner != "" {
		t.Errorf("pod %s still held by %q after its call ended", pod, owner)
	}
	testwait.Until(t, 10*time.Second, "the queued releases done", func() bool { return e.alloc.RetriedReleases() == 0 })
	if tl, err := e.alloc.Timeline(ctx, "CA-held"); err != nil || tl.State != "live" {
		t.Errorf("CA-held = %+v, %v; want live: another replica holds its socket", tl, err)
	}
	// The URL of the ended call opens nothing.
	cut.cut.Store(false)
	if _, err := e.dial(u); err == nil {
		t.Error("the ended call's socket was admitted")
	}
}
