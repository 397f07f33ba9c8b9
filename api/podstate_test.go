package api_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/edge-voice/edge/allocator"
)

// A pod's state in GET /api/v1/pods and GET /api/v1/pod/<name> agrees with
// its record and with GET /api/v1/status: an exclusive pod held by a call
// (its owner recorded, out of its available pool) is allocated even once
// the call's lease key is gone and until the sweep frees it, as the status
// counts it taken; a shared pod is allocated while it has calls, and
// available once it has none, whatever owner its record still names.
func TestPodStateAgreesWithStatus(t *testing.T) {
	e := newEnv(t)
	srv := pageServer(t, e, "", "r")
	ctx := context.Background()
	k := e.alloc.Keys()
	e.register(t, "gold", "g0")
	e.register(t, "basic", "b0")
	for _, id := range []string{"CA-g", "CA-b"} {
		if _, err := e.alloc.Allocate(ctx, allocator.Request{CallID: id, MerchantID: "m1"}); err != nil {
			t.Fatal(err)
		}
	}
	// The exclusive call's lease ran out and no sweep came yet (or, in
	// migration mode, the sweep keeps a call younger than the
	// predecessor's lease); the shared pod's only call ended without its
	// record's owner being cleared.
	e.rdb.Del(ctx, k.Lease("g0"), k.Lease("b0"))
	e.rdb.ZRem(ctx, k.PodCalls("b0"), "CA-b")

	states := func() map[string]string {
		t.Helper()
		st, out := get(t, srv.URL+"/api/v1/pods")
		if st != http.StatusOK {
			t.Fatalf("GET /api/v1/pods: %d %v", st, out)
		}
		m := map[string]string{}
		for _, p := range out["pods"].([]any) {
			p := p.(map[string]any)
			m[p["pod_name"].(string)] = p["state"].(string)
		}
		return m
	}
	podState := func(pod string) (state, status string) {
		t.Helper()
		st, out := get(t, srv.URL+"/api/v1/pod/"+pod)
		if st != http.StatusOK {
			t.Fatalf("GET /api/v1/pod/%s: %d %v", pod, st, out)
		}
		p := out["pod"].(map[string]any)
		return p["state"].(string), p["status"].(string)
	}
	available := func(tier string) float64 {
		t.Helper()
		_, out := get(t, srv.URL+"/api/v1/status")
		return out["pools"].(map[string]any)[tier].(map[string]any)["available"].(float64)
	}

	if n := available("gold"); n != 0 {
		t.Fatalf("status counts %v gold pods available, want 0 (g0 is held)", n)
	}
	if got := states()["g0"]; got != allocator.StateAllocated {
		t.Errorf("pods says g0 is %q beside status counting it taken, want allocated", got)
	}
	if state, status := podState("g0"); state != allocator.StateAllocated {
		t.Errorf("pod g0: state %q beside status %q, want allocated", state, status)
	}
	if state, status := podState("b0"); state != allocator.StateAvailable || states()["b0"] != allocator.StateAvailable {
		t.Errorf("shared b0 without calls: state %q (list %q) beside status %q, want available", state, states()["b0"], status)
	}

	// The sweep frees g0: available everywhere.
	if _, err := e.alloc.SweepPods(ctx, "", []string{"g0", "b0"}); err != nil {
		t.Fatal(err)
	}
	if n, got := available("gold"), states()["g0"]; n != 1 || got != allocator.StateAvailable {
		t.Errorf("after the sweep: status counts %v gold available, pods says g0 is %q; want 1 and available", n, got)
	}
}
