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
	if _, err := (allocator.MediaLeases{Alloc: e.alloc}).Claim(ctx, "CA-held", heldPod, "other-replica/1"); err != nil {
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
	// Every release queued is finished (done or expired) once the retry
	// queue's counters agree; the refusals queued theirs before answering,
	// so none is still to come. At least two: CA-cut's and CA-held's.
	testwait.Until(t, 10*time.Second, "the queued releases done", func() bool {
		queued := e.releaseRetries("queued")
		return queued >= 2 && e.releaseRetries("done")+e.releaseRetries("expired") == queued
	})
	if tl, err := e.alloc.Timeline(ctx, "CA-held"); err != nil || tl.State != "live" {
		t.Errorf("CA-held = %+v, %v; want live: another replica holds its socket", tl, err)
	}
	// The URL of the ended call opens nothing.
	cut.cut.Store(false)
	if _, err := e.dial(u); err == nil {
		t.Error("the ended call's socket was admitted")
	}
}

// releaseRetries reads edge_release_retries_total{result}: the allocator's
// count of the releases it queued for want of Redis and of how they ended.
func (e *env) releaseRetries(result string) float64 {
	e.t.Helper()
	mfs, err := e.reg.Gather()
	if err != nil {
		e.t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "edge_release_retries_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "result" && l.GetValue() == result {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	e.t.Fatalf("edge_release_retries_total{result=%q} is not registered", result)
	return 0
}
