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

// A partition that heals after its callers' deadlines leaves the pool as
// it was: redis-server is stopped (SIGSTOP) while a webhook's allocation
// and a socket's move of a live call off a pod it could not reach are in
// flight; both callers give up at their deadline, and when Redis resumes
// their scripts run (their commands were in the sockets' buffers). Judged
// by what the allocator reports: every pod free that was free, none
// ejected, the late call unknown and the live call still on its pod.
// Before, the late move ejected the live call's pod and moved the call to
// the other one, for a socket that had given up on it.
func TestPartitionHealedAfterTheDeadlineLeavesThePoolWhole(t *testing.T) {
	rs := testredis.Start(t)
	ctx := context.Background()
	rdb := rs.Client()
	a := allocatortest.New(t, rdb)
	register(t, a, "gold", "pod-0", "pod-1")
	if err := a.Preload(ctx); err != nil {
		t.Fatal(err)
	}
	live := mustAllocate(t, a, "CA-live", "")
	if _, err := a.ClaimMediaOn(ctx, "CA-live", live.PodName, "r/live", "replica-a"); err != nil {
		t.Fatal(err)
	}
	free := func() map[string]allocator.PoolStatus {
		st, err := a.Status(ctx)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]allocator.PoolStatus{}
		for _, p := range st {
			out[p.Tier] = p
		}
		return out
	}
	before := free()
	if before["gold"].Available != 1 {
		t.Fatalf("gold before the partition: %+v, want one pod free", before["gold"])
	}
	evals := func() int64 { return rs.CommandStats(ctx, rs.Client())["evalsha"] }
	// The replica's connections are open when the partition starts: each
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
	ran := evals()

	rs.Pause()
	short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	if _, err := a.Allocate(short, allocator.Request{CallID: "CA-late"}); !errors.Is(err, allocator.ErrUnavailable) {
		t.Fatalf("allocate in the partition: %v, want ErrUnavailable", err)
	}
	cancel()
	short, cancel = context.WithTimeout(ctx, 200*time.Millisecond)
	ej := allocator.Ejection{Backoff: time.Second, MaxBackoff: 8 * time.Second, MaxPercent: 100}
	if _, err := a.MoveCall(short, "CA-live", live.PodName, "r/live", "timeout", ej); !errors.Is(err, allocator.ErrUnavailable) {
		t.Fatalf("move in the partition: %v, want ErrUnavailable", err)
	}
	cancel()
	// Past both deadlines and the margin for the clocks (1 s).
	time.Sleep(1500 * time.Millisecond) // the partition's length, not a synchronisation
	rs.Resume()
	testwait.Until(t, 10*time.Second, "the 2 late scripts ran", func() bool { return evals() >= ran+2 })

	after := free()
	if after["gold"] != before["gold"] {
		t.Errorf("gold after the partition healed: %+v, want %+v as before", after["gold"], before["gold"])
	}
	if _, err := a.Timeline(ctx, "CA-late"); !errors.Is(err, allocator.ErrCallNotFound) {
		t.Errorf("the late allocation's call: %v; want none: its webhook was answered before it ran", err)
	}
	tl, err := a.Timeline(ctx, "CA-live")
	if err != nil || tl.State != "live" || tl.Pod != live.PodName || len(tl.MovedFrom) != 0 {
		t.Errorf("the live call after the partition: %+v, %v; want it live on %s, never moved", tl, err, live.PodName)
	}
}
