package allocator_test

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/edge-voice/edge/allocator"
	"github.com/edge-voice/edge/allocator/allocatortest"
	"github.com/edge-voice/edge/internal/mediacontract"
)

// ResumeCall moves a call whose pod died while its socket relayed it, as
// MoveCall does, and the call's record counts the move: live, and in its
// tombstone after the release. A failed connect's move is not counted.
func TestResumeCallCountsTheMove(t *testing.T) {
	forEachBackend(t, func(t *testing.T, rdb redis.UniversalClient) {
		a := allocatortest.New(t, rdb)
		register(t, a, "standard", "s0", "s1", "s2", "s3", "s4")
		ctx := context.Background()
		first := mustAllocate(t, a, "CA1", "").PodName
		if _, err := a.ClaimMedia(ctx, "CA1", first, "r/1"); err != nil {
			t.Fatal(err)
		}
		moved, err := a.MoveCall(ctx, "CA1", first, "r/1", "refused", testEjection)
		if err != nil {
			t.Fatal(err)
		}
		if tl, _ := a.Timeline(ctx, "CA1"); tl.Resumptions != 0 || !tl.ResumedAt.IsZero() {
			t.Errorf("a failed connect's move counted as a resumption: %+v", tl)
		}
		f, err := a.ResumeCall(ctx, "CA1", moved.Pod, "r/1", testEjection, true)
		if err != nil || f.Pod == moved.Pod || f.Pod == first {
			t.Fatalf("resume = %+v, %v", f, err)
		}
		tl, err := a.Timeline(ctx, "CA1")
		if err != nil || tl.Resumptions != 1 || tl.ResumedAt.IsZero() || tl.Pod != f.Pod ||
			!slices.Equal(tl.MovedFrom, []string{first, moved.Pod}) {
			t.Errorf("timeline = %+v, %v; want one resumption onto %s", tl, err, f.Pod)
		}
		lost, _ := a.PodInfo(ctx, moved.Pod)
		if lost.CallID != "" || lost.Ejection == nil || lost.Ejection.Reason != "lost" {
			t.Errorf("the dead pod = %+v (%+v); want free and ejected as lost", lost, lost.Ejection)
		}
		if _, err := a.Release(ctx, "CA1"); err != nil {
			t.Fatal(err)
		}
		if tl, err := a.Timeline(ctx, "CA1"); err != nil || tl.State != "ended" || tl.Resumptions != 1 || tl.ResumedAt.IsZero() {
			t.Errorf("ended call's record = %+v, %v; want its resumption kept", tl, err)
		}
	})
}

// A pod removed from the registry while a socket that moves its call
// (MarkResumable) carries it leaves the call to that socket: the call is
// not ended, the socket's renewal says RenewalPodGone, and ResumeCall
// moves it without writing anything of the removed pod. Every other call
// of a removed pod ends as before, and a socket that does not hold the
// claim cannot mark a call.
func TestRemovedPodLeavesAResumableCallToItsSocket(t *testing.T) {
	forEachBackend(t, func(t *testing.T, rdb redis.UniversalClient) {
		a := allocatortest.New(t, rdb)
		register(t, a, "standard", "s0", "s1", "s2")
		ctx := context.Background()
		k := a.Keys()
		moving, ending := mustAllocate(t, a, "CA-move", "").PodName, mustAllocate(t, a, "CA-end", "").PodName
		for id, pod := range map[string]string{"CA-move": moving, "CA-end": ending} {
			if _, err := a.ClaimMedia(ctx, id, pod, "r/"+id); err != nil {
				t.Fatal(err)
			}
		}
		if marked, err := a.MarkResumable(ctx, "CA-move", "r/other"); err != nil || marked {
			t.Fatalf("a socket without the claim marked the call: %v, %v", marked, err)
		}
		if marked, err := a.MarkResumable(ctx, "CA-move", "r/CA-move"); err != nil || !marked {
			t.Fatalf("mark = %v, %v", marked, err)
		}
		for pod, want := range map[string]allocator.Unregistered{
			moving: {Tier: "standard", CallsMoving: 1},
			ending: {Tier: "standard", CallsEnded: 1, Calls: []string{"CA-end"}},
		} {
			got, err := a.UnregisterPod(ctx, "", pod)
			if err != nil || got.CallsEnded != want.CallsEnded || got.CallsMoving != want.CallsMoving || !slices.Equal(got.Calls, want.Calls) {
				t.Errorf("unregister %s = %+v, %v; want %+v", pod, got, err, want)
			}
		}
		if tl, _ := a.Timeline(ctx, "CA-end"); tl.State != "ended" || tl.How != "unregistered" {
			t.Errorf("the other call = %+v; want ended as unregistered", tl)
		}
		rs, err := a.RenewSockets(ctx, []allocator.Lease{
			{CallID: "CA-move", PodName: moving, Holder: "r/CA-move"},
			{CallID: "CA-move", PodName: moving, Holder: "r/other"},
			{CallID: "CA-end", PodName: ending, Holder: "r/CA-end"},
		})
		if want := []mediacontract.Renewal{mediacontract.RenewalPodGone, mediacontract.RenewalLost, mediacontract.RenewalLost}; err != nil || !slices.Equal(rs, want) {
			t.Fatalf("renewals = %v, %v; want %v", rs, err, want)
		}
		if held, _ := a.Renew(ctx, []allocator.Lease{{CallID: "CA-move", PodName: moving, Holder: "r/CA-move"}}); held[0] {
			t.Error("Renew says a call whose pod left is held")
		}
		f, err := a.ResumeCall(ctx, "CA-move", moving, "r/CA-move", testEjection, true)
		if err != nil || f.Ejected || f.Pod == moving {
			t.Fatalf("resume = %+v, %v", f, err)
		}
		for _, key := range []string{k.PodInfo(moving), k.Lease(moving), k.PodTier(moving)} {
			if n := rdb.Exists(ctx, key).Val(); n != 0 {
				t.Errorf("the move wrote %s of the removed pod", key)
			}
		}
		if rdb.ZScore(ctx, k.Ejected(), moving).Err() == nil {
			t.Error("the removed pod was ejected")
		}
		if rs, _ := a.RenewSockets(ctx, []allocator.Lease{{CallID: "CA-move", PodName: f.Pod, Holder: "r/CA-move"}}); rs[0] != mediacontract.RenewalHeld {
			t.Errorf("renewal on the new pod = %v, want held", rs[0])
		}
		if tl, _ := a.Timeline(ctx, "CA-move"); tl.Resumptions != 1 || tl.Pod != f.Pod || !slices.Equal(tl.MovedFrom, []string{moving}) {
			t.Errorf("moved call = %+v", tl)
		}
		if _, err := a.Release(ctx, "CA-move"); err != nil {
			t.Fatal(err)
		}
		// The mark names a socket, which no record shows.
		if rdb.HExists(ctx, k.CallEnded("CA-move"), "resumable").Val() {
			t.Error("the tombstone keeps the socket's mark")
		}
		remaining := map[string]string{}
		for _, p := range []string{"s0", "s1", "s2"} {
			if p != moving && p != ending {
				remaining[p] = "standard"
			}
		}
		checkQuiescent(t, rdb, a, remaining)
	})
}

// A call left to its socket whose chain has no pod left ends with the
// socket, as released: nothing of the removed pod is written.
func TestRemovedPodsCallWithNowhereToGoEndsWithItsSocket(t *testing.T) {
	forEachBackend(t, func(t *testing.T, rdb redis.UniversalClient) {
		a := allocatortest.New(t, rdb)
		register(t, a, "standard", "s0")
		ctx := context.Background()
		k := a.Keys()
		mustAllocate(t, a, "CA1", "")
		if _, err := a.ClaimMedia(ctx, "CA1", "s0", "r/1"); err != nil {
			t.Fatal(err)
		}
		if _, err := a.MarkResumable(ctx, "CA1", "r/1"); err != nil {
			t.Fatal(err)
		}
		if _, err := a.UnregisterPod(ctx, "", "s0"); err != nil {
			t.Fatal(err)
		}
		if _, err := a.ResumeCall(ctx, "CA1", "s0", "r/1", testEjection, true); !errors.Is(err, allocator.ErrNoOtherPod) {
			t.Fatalf("resume with no pod left: %v, want ErrNoOtherPod", err)
		}
		if _, err := a.Release(ctx, "CA1"); err != nil {
			t.Fatal(err)
		}
		if tl, _ := a.Timeline(ctx, "CA1"); tl.State != "ended" || tl.How != "released" {
			t.Errorf("the call = %+v; want released", tl)
		}
		for _, key := range []string{k.PodInfo("s0"), k.Lease("s0"), k.PodTier("s0")} {
			if n := rdb.Exists(ctx, key).Val(); n != 0 {
				t.Errorf("%s of the removed pod was written", key)
			}
		}
		if rdb.ZScore(ctx, k.Ejected(), "s0").Err() == nil {
			t.Error("the removed pod was ejected")
		}
		checkQuiescent(t, rdb, a, map[string]string{})
	})
}

// A move off an instance the pod's name no longer stands for (blame
// false) counts the resumption and records nothing of the pod: the
// replacement behind the name stays in allocation.
func TestResumeCallWithoutBlame(t *testing.T) {
	forEachBackend(t, func(t *testing.T, rdb redis.UniversalClient) {
		a := allocatortest.New(t, rdb)
		register(t, a, "standard", "s0", "s1", "s2")
		ctx := context.Background()
		first := mustAllocate(t, a, "CA1", "").PodName
		if _, err := a.ClaimMedia(ctx, "CA1", first, "r/1"); err != nil {
			t.Fatal(err)
		}
		f, err := a.ResumeCall(ctx, "CA1", first, "r/1", testEjection, false)
		if err != nil || f.Ejected || f.Pod == first {
			t.Fatalf("resume = %+v, %v", f, err)
		}
		pi, _ := a.PodInfo(ctx, first)
		if pi.Ejection != nil || pi.CallID != "" {
			t.Errorf("the pod left = %+v (%+v); want free and in allocation", pi, pi.Ejection)
		}
		if tl, _ := a.Timeline(ctx, "CA1"); tl.Resumptions != 1 {
			t.Errorf("timeline = %+v; want the move counted", tl)
		}
	})
}

// A move is a circuit: a call never goes back to a pod it left, even one
// that was not ejected (its tier at the ejection cap), so that a stream
// which crashes agents cannot bounce between the same two. Once every
// other pod of its chain is one it left, there is no pod for it.
func TestMovedCallNeverReturnsToAPodItLeft(t *testing.T) {
	forEachBackend(t, func(t *testing.T, rdb redis.UniversalClient) {
		a := allocatortest.New(t, rdb)
		register(t, a, "standard", "s0", "s1", "s2")
		ctx := context.Background()
		noEjection := testEjection
		noEjection.MaxPercent = 0
		pod := mustAllocate(t, a, "CA1", "").PodName
		if _, err := a.ClaimMedia(ctx, "CA1", pod, "r/1"); err != nil {
			t.Fatal(err)
		}
		visited := []string{pod}
		for range 2 {
			f, err := a.ResumeCall(ctx, "CA1", pod, "r/1", noEjection, true)
			if err != nil {
				t.Fatalf("move off %s: %v", pod, err)
			}
			if slices.Contains(visited, f.Pod) {
				t.Fatalf("the call went back to %s, a pod it left (visited %v)", f.Pod, visited)
			}
			pod = f.Pod
			visited = append(visited, pod)
		}
		if f, err := a.ResumeCall(ctx, "CA1", pod, "r/1", noEjection, true); !errors.Is(err, allocator.ErrNoOtherPod) {
			t.Fatalf("third move = %+v, %v; want ErrNoOtherPod: every other pod is one the call left", f, err)
		}
		// The pods it left serve other calls.
		for _, id := range []string{"CA2", "CA3"} {
			if got := mustAllocate(t, a, id, "").PodName; !slices.Contains(visited[:2], got) {
				t.Errorf("%s got %s; want one of the free pods %v", id, got, visited[:2])
			}
		}
	})
}
