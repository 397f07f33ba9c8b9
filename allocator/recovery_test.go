package allocator_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/edge-voice/edge/allocator"
	"github.com/edge-voice/edge/allocator/allocatortest"
	"github.com/edge-voice/edge/internal/testredis"
)

// Redis restarted empty under live calls: the leader's reconcile puts every
// pod back in its pool at once, as the pool manager does. No new call may
// get a pod whose call still lives (its socket relays on this replica):
// allocation waits out the hold, the replica writes its calls back at its
// next heartbeat, and the new calls get only the free pods.
func TestRedisEmptiedNeverOffersABusyPod(t *testing.T) {
	rs := testredis.Start(t)
	rdb := rs.Client()
	ctx := context.Background()
	a := allocatortest.New(t, rdb, func(c *allocator.Config) {
		c.Tiers = allocator.TierConfig{
			Tiers:        map[string]allocator.Tier{"gold": {Type: allocator.Exclusive, Target: 4}, "basic": {Type: allocator.Shared, Target: 1, MaxConcurrent: 2}},
			DefaultChain: []string{"gold", "basic"},
		}
		c.RecoveryHold = 600 * time.Millisecond
		c.HeartbeatInterval = 100 * time.Millisecond
	})
	pods := []allocator.PodState{
		{Name: "pod-0", Address: "127.0.0.1:9000", Tier: "gold", Ready: true},
		{Name: "pod-1", Address: "127.0.0.1:9001", Tier: "gold", Ready: true},
		{Name: "pod-2", Address: "127.0.0.1:9002", Tier: "gold", Ready: true},
		{Name: "pod-s", Address: "127.0.0.1:9003", Tier: "basic", Ready: true},
	}
	sync := func() {
		t.Helper()
		if _, err := a.SyncPods(ctx, "", pods); err != nil {
			t.Fatal(err)
		}
	}
	sync()
	if _, err := a.Heartbeat(ctx, "edge-a"); err != nil {
		t.Fatal(err)
	}
	// Three live calls with sockets on this replica: two exclusive pods and
	// one slot of the shared pod (the exclusive ones run out first).
	live := map[string]string{}
	for i := range 4 {
		call := fmt.Sprintf("CA-live-%d", i)
		al := mustAllocate(t, a, call, "")
		if i == 2 {
			// Leave pod-2 free: its call ends before the restart.
			if _, err := a.Release(ctx, call); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if _, err := a.ClaimMediaOn(ctx, call, al.PodName, "holder-"+call, "edge-a"); err != nil {
			t.Fatal(err)
		}
		live[call] = al.PodName
	}

	rs.Restart()
	sync() // the leader's new term re-registers every pod as free

	// Before the replica's heartbeat: allocation waits (within its ctx)
	// rather than hand out a pod; with no time to wait it says edge cannot
	// serve (not that the pool is empty).
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	_, err := a.Allocate(short, allocator.Request{CallID: "CA-new-early"})
	cancel()
	if !errors.Is(err, allocator.ErrRecovering) || !errors.Is(err, allocator.ErrUnavailable) {
		t.Fatalf("allocate right after the empty restart: %v, want ErrRecovering (an ErrUnavailable)", err)
	}

	beat, err := a.Heartbeat(ctx, "edge-a")
	if err != nil || !beat.DataLost || beat.Reasserted != len(live) || beat.Lost != 0 {
		t.Fatalf("heartbeat after the restart: %+v, err %v; want lost data, %d reasserted, 0 lost", beat, err, len(live))
	}

	// New calls: each gets a pod no live call holds, or none.
	busy := map[string]int{}
	for _, pod := range live {
		busy[pod]++
	}
	for i := range 3 {
		al, err := a.Allocate(ctx, allocator.Request{CallID: fmt.Sprintf("CA-new-%d", i)})
		if err != nil {
			if errors.Is(err, allocator.ErrNoCapacity) {
				continue
			}
			t.Fatalf("allocate after recovery: %v", err)
		}
		busy[al.PodName]++
	}
	for pod, n := range busy {
		max := 1
		if pod == "pod-s" {
			max = 2
		}
		if n > max {
			t.Errorf("%s serves %d calls at once, at most %d allowed", pod, n, max)
		}
	}
	// The written-back calls renew, and their records are whole again.
	var leases []allocator.Lease
	for call, pod := range live {
		leases = append(leases, allocator.Lease{CallID: call, PodName: pod, Holder: "holder-" + call})
	}
	held, err := a.Renew(ctx, leases)
	if err != nil {
		t.Fatal(err)
	}
	for i, h := range held {
		if !h {
			t.Errorf("call %s lost its pod after being written back", leases[i].CallID)
		}
	}
}

// A replica that restarts with nothing known (a fresh process) on a fresh
// Redis creates the epoch without holding allocation back: there is no call
// it could protect.
func TestFreshDataSetIsNotHeld(t *testing.T) {
	rdb := testredis.Start(t).Client()
	ctx := context.Background()
	a := allocatortest.New(t, rdb, func(c *allocator.Config) { c.RecoveryHold = time.Minute })
	register(t, a, "gold", "pod-0")
	if beat, err := a.Heartbeat(ctx, "edge-a"); err != nil || beat.DataLost {
		t.Fatalf("first heartbeat: %+v, err %v", beat, err)
	}
	short, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	if _, err := a.Allocate(short, allocator.Request{CallID: "CA-1"}); err != nil {
		t.Fatalf("allocate on a fresh data set: %v", err)
	}
}

// A replica killed -9 leaves calls whose sockets nobody relays: the leader
// ends them once the replica's heartbeat is stale and Redis holds none of
// its connections. A replica that is only slow (its connection still open)
// keeps its calls.
func TestDeadReplicaCallsEnd(t *testing.T) {
	rs := testredis.Start(t)
	ctx := context.Background()
	named := func(name string) *redis.Client { return namedClient(t, rs, name) }
	cfg := func(c *allocator.Config) {
		c.ReplicaTTL = 300 * time.Millisecond
		c.HeartbeatInterval = 100 * time.Millisecond
	}
	leader := allocatortest.New(t, named("edge-a"), cfg)
	dying := allocatortest.New(t, named("edge-b"), cfg)
	slowClient := named("edge-c")
	slow := allocatortest.New(t, slowClient, cfg)
	register(t, leader, "gold", "pod-0")
	register(t, leader, "standard", "pod-1", "pod-2")

	for _, r := range []struct {
		a    *allocator.Allocator
		name string
		call string
	}{{dying, "edge-b", "CA-b"}, {slow, "edge-c", "CA-c"}} {
		if _, err := r.a.Heartbeat(ctx, r.name); err != nil {
			t.Fatal(err)
		}
		al := mustAllocate(t, r.a, r.call, "")
		if _, err := r.a.ClaimMediaOn(ctx, r.call, al.PodName, "h-"+r.call, r.name); err != nil {
			t.Fatal(err)
		}
	}
	// edge-b dies: its connections close. edge-c stops beating but keeps
	// its connection (a long GC pause, a starved CPU).
	dyingPod := podOf(t, leader, "CA-b")
	closeNamed(t, rs, "edge-b")
	if err := slowClient.Ping(ctx).Err(); err != nil {
		t.Fatal(err)
	}

	// Before the TTL nothing is judged.
	if res, err := leader.SweepDeadReplicas(ctx, ""); err != nil || len(res.Replicas) > 0 {
		t.Fatalf("sweep before the TTL: %+v, %v", res, err)
	}
	var res allocator.DeadReplicas
	deadline := time.Now().Add(5 * time.Second)
	for len(res.Replicas) == 0 && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond) // the TTL is the event: Redis' clock passing it
		if _, err := leader.Heartbeat(ctx, "edge-a"); err != nil {
			t.Fatal(err)
		}
		var err error
		if res, err = leader.SweepDeadReplicas(ctx, ""); err != nil {
			t.Fatal(err)
		}
	}
	if len(res.Replicas) != 1 || res.Replicas[0] != "edge-b" || res.CallsCut != 1 {
		t.Fatalf("dead replicas: %+v, want edge-b with its one call", res)
	}
	if len(res.Sweep.Recovered) != 1 || res.Sweep.Recovered[0] != dyingPod {
		t.Fatalf("recovered %v, want [%s]", res.Sweep.Recovered, dyingPod)
	}
	tl, err := leader.Timeline(ctx, "CA-b")
	if err != nil {
		t.Fatal(err)
	}
	if tl.How != "expired" || tl.SocketEnd != "replica_lost" {
		t.Fatalf("CA-b's record: how %q, socket_end %q; want expired, replica_lost", tl.How, tl.SocketEnd)
	}
	// edge-c's call lives on.
	if _, err := leader.Timeline(ctx, "CA-c"); err != nil {
		t.Fatal(err)
	}
	held, err := slow.Renew(ctx, []allocator.Lease{{CallID: "CA-c", PodName: podOf(t, leader, "CA-c"), Holder: "h-CA-c"}})
	if err != nil || !held[0] {
		t.Fatalf("the slow replica's call: held %v, err %v", held, err)
	}
}

func podOf(t *testing.T, a *allocator.Allocator, call string) string {
	t.Helper()
	tl, err := a.Timeline(context.Background(), call)
	if err != nil {
		t.Fatal(err)
	}
	return tl.Pod
}

// closeNamed kills the connections of a replica at Redis, as its death
// would close them.
func closeNamed(t *testing.T, rs *testredis.Server, replica string) {
	t.Helper()
	c := rs.Client()
	defer c.Close()
	list, err := c.ClientList(context.Background()).Result()
	if err != nil {
		t.Fatal(err)
	}
	want := "name=" + allocator.ClientName(replica)
	n := 0
	for _, line := range strings.Split(list, "\n") {
		fields := strings.Fields(line)
		if !slices.Contains(fields, want) {
			continue
		}
		for _, f := range fields {
			if id, ok := strings.CutPrefix(f, "id="); ok {
				if err := c.ClientKillByFilter(context.Background(), "ID", id).Err(); err != nil {
					t.Fatal(err)
				}
				n++
			}
		}
	}
	if n == 0 {
		t.Fatalf("no connection of %s to close", replica)
	}
}

// A call answered just before Redis lost its data, whose provider opens the
// media socket only after: the replica that answered writes it back, so the
// socket is admitted (on any replica) and its pod is not given away.
func TestAnsweredCallSurvivesRedisEmptied(t *testing.T) {
	rs := testredis.Start(t)
	ctx := context.Background()
	opts := func(c *allocator.Config) {
		c.Tiers = allocator.TierConfig{
			Tiers:        map[string]allocator.Tier{"gold": {Type: allocator.Exclusive, Target: 2}},
			DefaultChain: []string{"gold"},
		}
		c.RecoveryHold = 400 * time.Millisecond
		c.HeartbeatInterval = 100 * time.Millisecond
	}
	answering := allocatortest.New(t, rs.Client(), opts)
	other := allocatortest.New(t, rs.Client(), opts) // where the socket lands
	pods := []allocator.PodState{
		{Name: "pod-0", Address: "127.0.0.1:9000", Tier: "gold", Ready: true},
		{Name: "pod-1", Address: "127.0.0.1:9001", Tier: "gold", Ready: true},
	}
	if _, err := answering.SyncPods(ctx, "", pods); err != nil {
		t.Fatal(err)
	}
	for _, a := range []*allocator.Allocator{answering, other} {
		if _, err := a.Heartbeat(ctx, "edge"); err != nil {
			t.Fatal(err)
		}
	}
	al := mustAllocate(t, answering, "CA-answered", "")

	rs.Restart()
	if _, err := answering.SyncPods(ctx, "", pods); err != nil {
		t.Fatal(err)
	}
	beat, err := answering.Heartbeat(ctx, "edge-a")
	if err != nil || !beat.DataLost || beat.Reasserted != 1 {
		t.Fatalf("heartbeat of the answering replica: %+v, err %v; want lost data, 1 written back", beat, err)
	}
	if _, err := other.Heartbeat(ctx, "edge-b"); err != nil {
		t.Fatal(err)
	}
	c, err := other.ClaimMediaOn(ctx, "CA-answered", al.PodName, "socket-1", "edge-b")
	if err != nil || c.Pod != al.PodName {
		t.Fatalf("the socket after the loss: %+v, %v", c, err)
	}
	next, err := other.Allocate(ctx, allocator.Request{CallID: "CA-next"})
	if err != nil {
		t.Fatal(err)
	}
	if next.PodName == al.PodName {
		t.Fatalf("the next call got %s, the answered call's pod", next.PodName)
	}
}

// The predecessor's reconciler reads voice:pod:<pod>:calls when a pod dies:
// a call that ends by the sweep (its lease ran out) leaves it, as one
// released does.
func TestSweptCallLeavesThePredecessorsPodSet(t *testing.T) {
	rdb := testredis.Start(t).Client()
	ctx := context.Background()
	a := allocatortest.New(t, rdb)
	register(t, a, "gold", "pod-0")
	al := mustAllocate(t, a, "CA-swept", "")
	keys := a.Keys()
	rdb.SAdd(ctx, keys.PredecessorPodCalls(al.PodName), "CA-swept", "CA-other")
	rdb.Del(ctx, keys.Lease(al.PodName)) // its lease ran out
	res, err := a.SweepPods(ctx, "", []string{al.PodName})
	if err != nil || len(res.CallsEnded) != 1 {
		t.Fatalf("sweep: %+v, %v", res, err)
	}
	got := rdb.SMembers(ctx, keys.PredecessorPodCalls(al.PodName)).Val()
	if len(got) != 1 || got[0] != "CA-other" {
		t.Fatalf("the predecessor's set after the sweep: %v, want only CA-other", got)
	}
}

// A media socket that ends while Redis is paused releases its call once
// Redis answers again, not a lease later: the pod is back at once.
func TestSocketReleaseRetriedAfterRedisPause(t *testing.T) {
	rs := testredis.Start(t)
	ctx := context.Background()
	a := allocatortest.New(t, rs.Client())
	register(t, a, "gold", "pod-0")
	al := mustAllocate(t, a, "CA-paused", "")
	if _, err := a.ClaimMediaOn(ctx, "CA-paused", al.PodName, "h", "edge-a"); err != nil {
		t.Fatal(err)
	}
	leases := allocator.MediaLeases{Alloc: a, Replica: "edge-a"}

	rs.Pause()
	short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	outcome, err := leases.Release(short, "CA-paused", allocator.SocketEnd{Ended: "socket_close", ClosedBy: "client", CloseCode: "1000", Closed: time.Now()})
	cancel()
	if err != nil || outcome != "retrying" {
		t.Fatalf("release while Redis is paused: %q, %v; want retrying", outcome, err)
	}
	if n := a.RetriedReleases(); n != 1 {
		t.Fatalf("%d releases pending, want 1", n)
	}
	rs.Resume()
	deadline := time.Now().Add(10 * time.Second)
	for a.RetriedReleases() > 0 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond) // the retry's own pace
	}
	tl, err := a.Timeline(ctx, "CA-paused")
	if err != nil || tl.How != "released" || tl.SocketEnd != "socket_close" {
		t.Fatalf("the call after Redis came back: %+v, %v; want released by its socket's close", tl, err)
	}
	next := mustAllocate(t, a, "CA-next", "")
	if next.PodName != al.PodName {
		t.Fatalf("the next call got %q, want the released pod %s", next.PodName, al.PodName)
	}
}

// A call answered on one replica whose socket another replica relayed, and
// that has ended, is never written back after Redis loses its data: the
// answering replica forgot it at its next heartbeat, so its pod is not
// held for a call that is over.
func TestEndedCallAnsweredElsewhereIsNotWrittenBack(t *testing.T) {
	rs, answering, relaying := answeringAndRelaying(t)
	ctx := context.Background()
	al := mustAllocate(t, answering, "CA-over", "")
	if _, err := relaying.ClaimMediaOn(ctx, "CA-over", al.PodName, "s", "edge-b"); err != nil {
		t.Fatal(err)
	}
	if _, err := (allocator.MediaLeases{Alloc: relaying}).Release(ctx, "CA-over", allocator.SocketEnd{Ended: "socket_close"}); err != nil {
		t.Fatal(err)
	}
	if _, err := answering.Heartbeat(ctx, "edge-a"); err != nil {
		t.Fatal(err)
	}
	if n := answering.Tracked(); n != 0 {
		t.Fatalf("the answering replica still tracks %d calls after the call ended elsewhere", n)
	}
	rs.Restart()
	register(t, answering, "gold", "pod-0")
	if beat, err := answering.Heartbeat(ctx, "edge-a"); err != nil || beat.Reasserted != 0 {
		t.Fatalf("after the loss: %d written back, %v; want none", beat.Reasserted, err)
	}
}

// A webhook whose allocation times out in a Redis pause is told edge cannot
// serve; its script may still run when Redis resumes. Run within its
// caller's deadline and the clocks' margin, that allocation is released
// again; run later, it allocates nothing (TestLateScriptChangesNothing).
// Either way no pod is held for a call nobody will connect.
func TestUnansweredAllocationIsReleased(t *testing.T) {
	rs := testredis.Start(t)
	ctx := context.Background()
	a := allocatortest.New(t, rs.Client())
	register(t, a, "gold", "pod-0")
	register(t, a, "standard", "pod-1", "pod-2")
	register(t, a, "basic", "pod-s")
	if err := a.Preload(ctx); err != nil { // as edge does at start
		t.Fatal(err)
	}

	rs.Pause()
	short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	_, err := a.Allocate(short, allocator.Request{CallID: "CA-unanswered"})
	cancel()
	if !errors.Is(err, allocator.ErrUnavailable) {
		t.Fatalf("allocate in a pause: %v, want ErrUnavailable", err)
	}
	rs.Resume()
	deadline := time.Now().Add(10 * time.Second)
	for a.RetriedReleases() > 0 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond) // the retry's own pace
	}
	switch tl, err := a.Timeline(ctx, "CA-unanswered"); {
	case errors.Is(err, allocator.ErrCallNotFound):
		// Its script came too late and allocated nothing.
	case err != nil:
		t.Fatalf("the unanswered call's record: %v", err)
	case tl.State != "ended" || tl.ReleasedBy != "unanswered":
		t.Fatalf("the unanswered call: state %q, released by %q; want ended, unanswered", tl.State, tl.ReleasedBy)
	}
	// Every pod is free again: four calls get four pods.
	for i := range 4 {
		if _, err := a.Allocate(ctx, allocator.Request{CallID: fmt.Sprintf("CA-after-%d", i)}); err != nil {
			t.Fatalf("allocation %d after the pause: %v", i, err)
		}
	}
}

// A replica killed between its answer and the call's socket: the provider
// never connects (the answer was lost with it), so the leader ends the
// call once the replica is dead and the replica TTL has passed since the
// answer, instead of after the lease and a sweep.
func TestDeadReplicaAnsweredCallEnds(t *testing.T) {
	rs := testredis.Start(t)
	ctx := context.Background()
	named := func(name string) *redis.Client { return namedClient(t, rs, name) }
	cfg := func(c *allocator.Config) {
		c.ReplicaTTL = 1200 * time.Millisecond
		c.HeartbeatInterval = 100 * time.Millisecond
	}
	leader := allocatortest.New(t, named("edge-a"), cfg)
	dying := allocatortest.New(t, named("edge-b"), cfg)
	dying.SetReplica("edge-b")
	register(t, leader, "gold", "pod-0")
	if _, err := dying.Heartbeat(ctx, "edge-b"); err != nil {
		t.Fatal(err)
	}
	al := mustAllocate(t, dying, "CA-lost-answer", "")
	closeNamed(t, rs, "edge-b")

	var res allocator.DeadReplicas
	deadline := time.Now().Add(10 * time.Second)
	for len(res.Replicas) == 0 && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond) // the TTL is the event: Redis' clock passing it
		var err error
		if res, err = leader.SweepDeadReplicas(ctx, ""); err != nil {
			t.Fatal(err)
		}
	}
	if len(res.Replicas) != 1 || res.CallsCut != 1 || len(res.Sweep.Recovered) != 1 || res.Sweep.Recovered[0] != al.PodName {
		t.Fatalf("dead replica with an answered call: %+v; want edge-b, its call cut, %s recovered", res, al.PodName)
	}
}

// namedClient is a client whose connections carry replica's Redis client
// name, as edge's do: what the dead-replica check looks for.
func namedClient(t *testing.T, rs *testredis.Server, replica string) *redis.Client {
	t.Helper()
	opts := rs.Options()
	opts.ClientName = allocator.ClientName(replica)
	c := redis.NewClient(opts)
	t.Cleanup(func() { c.Close() })
	return c
}

// Leave takes a replica out of the replicas once nothing of it is pending:
// a call whose socket it holds, or that it answered and whose socket has
// not come, keeps it there for the dead-replica check; a call whose socket
// went to another replica, or that ended, does not.
func TestLeave(t *testing.T) {
	rs := testredis.Start(t)
	ctx := context.Background()
	a := allocatortest.New(t, namedClient(t, rs, "edge-a"))
	a.SetReplica("edge-a")
	register(t, a, "gold", "pod-0", "pod-1")
	members := func() []string { return rs.Client().ZRange(ctx, a.Keys().Replicas(), 0, -1).Val() }
	if _, err := a.Heartbeat(ctx, "edge-a"); err != nil {
		t.Fatal(err)
	}
	// Answered here, its socket not come.
	al := mustAllocate(t, a, "CA-1", "")
	if pending, err := a.Leave(ctx, "edge-a"); err != nil || pending != 1 || len(members()) != 1 {
		t.Fatalf("leave with an answer pending: %d, %v, replicas %v", pending, err, members())
	}
	// Its socket held here.
	if _, err := a.ClaimMediaOn(ctx, "CA-1", al.PodName, "h-1", "edge-a"); err != nil {
		t.Fatal(err)
	}
	if pending, err := a.Leave(ctx, "edge-a"); err != nil || pending != 1 || len(members()) != 1 {
		t.Fatalf("leave with a socket held: %d, %v, replicas %v", pending, err, members())
	}
	// Answered here, its socket on another replica; the first call ended.
	al2 := mustAllocate(t, a, "CA-2", "")
	if _, err := a.ClaimMediaOn(ctx, "CA-2", al2.PodName, "h-2", "edge-b"); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Release(ctx, "CA-1"); err != nil {
		t.Fatal(err)
	}
	if pending, err := a.Leave(ctx, "edge-a"); err != nil || pending != 0 || len(members()) != 0 {
		t.Fatalf("leave with nothing pending: %d, %v, replicas %v", pending, err, members())
	}
	if n := rs.Client().Exists(ctx, a.Keys().ReplicaCalls("edge-a")).Val(); n != 0 {
		t.Error("the replica's call set outlived its leave")
	}
}

// A call whose socket ends on one replica after Redis lost its data, and
// before the replica that answered its webhook writes it back, is over:
// the write-back must not bring it back, or its pod stays held for a whole
// lease for a call nobody serves (the outside suite's "Redis restarted
// empty" saw six pods held a minute). The socket's release, finding no
// call, marks it ended, and the write-back refuses an ended call.
func TestCallEndedBeforeTheWriteBackIsNotWrittenBack(t *testing.T) {
	rs, answering, relaying := answeringAndRelaying(t)
	ctx := context.Background()
	al := mustAllocate(t, answering, "CA-over", "")
	rs.Restart()
	register(t, answering, "gold", "pod-0")
	// The socket ends: its release finds Redis empty.
	if _, err := (allocator.MediaLeases{Alloc: relaying}).Release(ctx, "CA-over", allocator.SocketEnd{Ended: "socket_close"}); err == nil {
		t.Log("released") // not_found is what an emptied Redis answers
	}
	if beat, err := answering.Heartbeat(ctx, "edge-a"); err != nil || beat.Reasserted != 0 {
		t.Fatalf("after the loss: %d written back, %v; want none", beat.Reasserted, err)
	}
	if pi, err := answering.PodInfo(ctx, al.PodName); err == nil && pi.CallID != "" {
		t.Errorf("pod %s held by %q for an ended call", al.PodName, pi.CallID)
	}
}

// answeringAndRelaying are two replicas on one Redis that has beaten once:
// one answers a call's webhook, the other relays its socket; pod-0 is in
// tier gold.
func answeringAndRelaying(t *testing.T) (rs *testredis.Server, answering, relaying *allocator.Allocator) {
	t.Helper()
	rs = testredis.Start(t)
	opts := func(c *allocator.Config) {
		c.RecoveryHold = 400 * time.Millisecond
		c.HeartbeatInterval = 100 * time.Millisecond
	}
	answering = allocatortest.New(t, rs.Client(), opts)
	relaying = allocatortest.New(t, rs.Client(), opts)
	register(t, answering, "gold", "pod-0")
	for _, a := range []*allocator.Allocator{answering, relaying} {
		if _, err := a.Heartbeat(context.Background(), "edge"); err != nil {
			t.Fatal(err)
		}
	}
	return rs, answering, relaying
}
