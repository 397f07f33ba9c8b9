package allocator_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/edge-voice/edge/allocator"
	"github.com/edge-voice/edge/allocator/allocatortest"
)

var testEjection = allocator.Ejection{Backoff: time.Second, MaxBackoff: 8 * time.Second, MaxPercent: 50}

// MoveCall moves a call off a pod its socket could not reach, in one
// script: the broken pod ejected and free, the call's info, lease and owner
// on the new pod, the claim kept and the old pod's URL still admitted; a
// socket without the claim, or a call already moved, moves nothing; and
// once every call is released, every pod is back.
func TestMoveCall(t *testing.T) {
	forEachBackend(t, func(t *testing.T, rdb redis.UniversalClient) {
		a := allocatortest.New(t, rdb)
		register(t, a, "standard", "s0", "s1", "s2", "s3")
		register(t, a, "basic", "shared-0")
		ctx := context.Background()
		al := mustAllocate(t, a, "CA1", "")
		if al.PodName != "s0" && al.PodName[0] != 's' {
			t.Fatalf("allocated %s", al.PodName)
		}
		broken := al.PodName
		if _, err := a.ClaimMedia(ctx, "CA1", broken, "r/1"); err != nil {
			t.Fatal(err)
		}
		if _, err := a.MoveCall(ctx, "CA1", broken, "r/2", "refused", testEjection); !errors.Is(err, allocator.ErrMediaClaimed) {
			t.Fatalf("move by a socket without the claim: %v, want ErrMediaClaimed", err)
		}
		f, err := a.MoveCall(ctx, "CA1", broken, "r/1", "refused", testEjection)
		if err != nil || f.Pod == broken || !f.Ejected {
			t.Fatalf("move = %+v, %v", f, err)
		}
		if _, err := a.MoveCall(ctx, "CA1", broken, "r/1", "refused", testEjection); !errors.Is(err, allocator.ErrCallNotFound) {
			t.Errorf("second move off the same pod: %v, want ErrCallNotFound", err)
		}
		info, err := a.Call(ctx, "CA1")
		if err != nil || info.PodName != f.Pod || info.MediaClaim != "r/1" {
			t.Errorf("call = %+v, %v; want on %s with its claim", info, err, f.Pod)
		}
		pi, _ := a.PodInfo(ctx, f.Pod)
		if pi.CallID != "CA1" || pi.Lease != "CA1" {
			t.Errorf("new pod = %+v; want owned and leased by CA1", pi)
		}
		old, _ := a.PodInfo(ctx, broken)
		if old.CallID != "" || old.Lease != "" || old.Ejection == nil || old.Ejection.Reason != "refused" {
			t.Errorf("broken pod = %+v (%+v); want free and ejected", old, old.Ejection)
		}
		// The provider's URL names the broken pod: it still reaches the call.
		if at, err := a.ClaimMedia(ctx, "CA1", broken, "r/1"); err != nil || at != f.Pod {
			t.Errorf("claim on the old pod = %q, %v; want %s", at, err, f.Pod)
		}
		if _, err := a.ClaimMedia(ctx, "CA1", broken, "r/3"); !errors.Is(err, allocator.ErrMediaClaimed) {
			t.Errorf("second socket on the old URL: %v, want ErrMediaClaimed", err)
		}
		if held, err := a.Renew(ctx, []allocator.Lease{{CallID: "CA1", PodName: f.Pod, Holder: "r/1"}}); err != nil || !held[0] {
			t.Errorf("renew on the new pod = %v, %v", held, err)
		}
		// Three more calls take the other pods: none gets the ejected one.
		for _, id := range []string{"CA2", "CA3", "CA4"} {
			if got := mustAllocate(t, a, id, ""); got.PodName == broken {
				t.Errorf("%s got the ejected pod", id)
			}
		}
		for _, id := range []string{"CA1", "CA2", "CA3", "CA4"} {
			if _, err := a.Release(ctx, id); err != nil {
				t.Fatal(err)
			}
		}
		checkQuiescent(t, rdb, a, map[string]string{"s0": "standard", "s1": "standard", "s2": "standard", "s3": "standard", "shared-0": "basic"})
	})
}

// A tier never has more than max_ejection_percent of its pods ejected, the
// backoff doubles per failure up to its cap, a probe's success or a new
// address takes the pod back, and status counts ejected pods.
func TestEjectionBounds(t *testing.T) {
	forEachBackend(t, func(t *testing.T, rdb redis.UniversalClient) {
		a := allocatortest.New(t, rdb)
		register(t, a, "standard", "s0", "s1", "s2", "s3")
		ctx := context.Background()
		for i, pod := range []string{"s0", "s1", "s2"} {
			ejected, _, err := a.PodFailed(ctx, pod, "timeout", testEjection)
			if err != nil {
				t.Fatal(err)
			}
			if want := i < 2; ejected != want {
				t.Errorf("failure of %s: ejected %v, want %v (50%% of 4 pods)", pod, ejected, want)
			}
		}
		var dues []time.Duration
		for range 5 {
			start := time.Now()
			_, due, _ := a.PodFailed(ctx, "s0", "probe", testEjection)
			dues = append(dues, due.Sub(start).Round(time.Second))
		}
		if want := []time.Duration{2 * time.Second, 4 * time.Second, 8 * time.Second, 8 * time.Second, 8 * time.Second}; !equalDurations(dues, want) {
			t.Errorf("backoffs = %v, want %v", dues, want)
		}
		st, err := a.Status(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range st {
			if p.Tier == "standard" && p.Ejected != 2 {
				t.Errorf("status ejected = %d, want 2", p.Ejected)
			}
		}
		if was, err := a.Reinstate(ctx, "s0"); err != nil || !was {
			t.Errorf("reinstate = %v, %v", was, err)
		}
		// A new address is a new pod behind the name.
		if _, err := a.RegisterPod(ctx, allocator.Pod{Name: "s1", Tier: "standard", Address: "127.0.0.1:9001"}); err != nil {
			t.Fatal(err)
		}
		left, err := a.Ejected(ctx)
		if err != nil || len(left) != 0 {
			t.Errorf("ejected after reinstate and re-address = %v, %v; want none", left, err)
		}
		if pi, _ := a.PodInfo(ctx, "s0"); pi.Ejection != nil {
			t.Errorf("reinstated pod still shows %+v", pi.Ejection)
		}
	})
}

func equalDurations(a, b []time.Duration) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
