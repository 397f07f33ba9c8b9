package allocator_test

import (
	"context"
	"slices"
	"testing"

	"github.com/redis/go-redis/v9"
)

// ResumeCall moves a call whose pod died while its socket relayed it, as
// MoveCall does, and the call's record counts the move: live, and in its
// tombstone after the release. A failed connect's move is not counted.
func TestResumeCallCountsTheMove(t *testing.T) {
	forEachBackend(t, func(t *testing.T, rdb redis.UniversalClient) {
		a := newAllocator(t, rdb)
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
		f, err := a.ResumeCall(ctx, "CA1", moved.Pod, "r/1", testEjection)
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
