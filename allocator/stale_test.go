package allocator_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/edge-voice/edge/allocator"
	"github.com/edge-voice/edge/allocator/allocatortest"
	"github.com/edge-voice/edge/internal/testredis"
	"github.com/edge-voice/edge/internal/testwait"
)

// A script that reaches Redis after its caller gave up changes nothing:
// through a pause (a partition that heals) longer than the call's lease,
// the webhook's allocation, answered "cannot serve" and whose release was
// given up as well, and a media claim the socket abandoned, land in Redis
// when it resumes, and neither takes a pod or a claim. Before, the late
// allocation held its pod for a call the provider had sent to its fallback.
func TestLateScriptChangesNothing(t *testing.T) {
	rs := testredis.Start(t)
	ctx := context.Background()
	rdb := rs.Client()
	a := allocatortest.New(t, rdb, func(c *allocator.Config) { c.LeaseTTL = time.Second })
	register(t, a, "gold", "pod-0")
	register(t, a, "standard", "pod-1")
	register(t, a, "basic", "pod-s")
	if err := a.Preload(ctx); err != nil {
		t.Fatal(err)
	}
	live, err := a.Allocate(ctx, allocator.Request{CallID: "CA-live"})
	if err != nil {
		t.Fatal(err)
	}
	evals := func() int64 { return rs.CommandStats(ctx, rs.Client())["evalsha"] }
	// A replica's connections are open when the partition starts: each
	// late command goes out on one (a new one would wait on its handshake).
	var conns []interface{ Close() error }
	for range 4 {
		c := rdb.Conn()
		if err := c.Ping(ctx).Err(); err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
	}
	for _, c := range conns {
		c.Close()
	}
	before := evals()

	rs.Pause()
	short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	if _, err := a.Allocate(short, allocator.Request{CallID: "CA-late"}); !errors.Is(err, allocator.ErrUnavailable) {
		t.Fatalf("allocate in the pause: %v, want ErrUnavailable", err)
	}
	cancel()
	short, cancel = context.WithTimeout(ctx, 200*time.Millisecond)
	if _, err := a.ClaimMediaOn(short, "CA-live", live.PodName, "r/late", "replica-a"); !errors.Is(err, allocator.ErrUnavailable) {
		t.Fatalf("claim in the pause: %v, want ErrUnavailable", err)
	}
	cancel()
	// Longer than the stale margin (1 s) and the lease, whose end is when
	// the webhook's release is given up.
	time.Sleep(2 * time.Second) // the partition's length, not a synchronisation
	rs.Resume()
	// Both late scripts run (EVALSHA counted).
	deadline := time.Now().Add(10 * time.Second)
	for evals() < before+2 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if got := evals(); got < before+2 {
		t.Fatalf("%d scripts ran after the pause, want the 2 late ones", got-before)
	}
	if _, err := a.Timeline(ctx, "CA-late"); !errors.Is(err, allocator.ErrCallNotFound) {
		t.Errorf("the late allocation's call: %v; want none: it came after its webhook was answered", err)
	}
	if c, err := a.ClaimMediaOn(ctx, "CA-live", live.PodName, "r/now", "replica-a"); err != nil {
		t.Errorf("a socket of the live call now: %+v, %v; want the claim: the late one took nothing", c, err)
	}
}

// The same release asked again while Redis is away (a media URL replayed
// against a replica cut off from Redis, each socket refused) is queued
// once: no caller grows the queue of releases waiting for Redis.
func TestRefusedReleaseIsQueuedOnce(t *testing.T) {
	rs := testredis.Start(t)
	ctx := context.Background()
	a := allocatortest.New(t, rs.Client())
	register(t, a, "gold", "pod-0")
	if _, err := a.Allocate(ctx, allocator.Request{CallID: "CA-refused"}); err != nil {
		t.Fatal(err)
	}
	rs.Pause()
	leases := allocator.MediaLeases{Alloc: a, Replica: "replica-a"}
	for range 1000 {
		leases.ReleaseRefused("CA-refused")
	}
	if n := a.RetriedReleases(); n != 1 {
		t.Errorf("%d releases queued for one call, want 1", n)
	}
	rs.Resume()
	testwait.Until(t, 10*time.Second, "the refused call ended", func() bool {
		tl, err := a.Timeline(ctx, "CA-refused")
		return err == nil && tl.State == "ended" && tl.ReleasedBy == "refused"
	})
	// Once done, the same call's release may be queued again.
	rs.Pause()
	leases.ReleaseRefused("CA-refused")
	if n := a.RetriedReleases(); n != 1 {
		t.Errorf("%d releases queued after the first was done, want 1", n)
	}
	rs.Resume()
}
