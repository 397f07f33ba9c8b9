package main

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/edge-voice/edge/internal/edgetest"
	"github.com/edge-voice/edge/internal/testwait"
)

// Waiting for capacity as a user meets it: edge with one pod and
// the default admission.wait.budget (3s); a second call through the
// generic API while the first holds the pod waits, and is answered with
// the pod as soon as the first call is released; a third, with nobody
// releasing, is refused at_capacity when the budget runs out; a fourth
// whose caller hangs up while it waits takes no pod.
func TestWaitForCapacityEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs an edge process")
	}
	f := newE2E(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ag := mediaAgent(t)
	e := f.start("edge", f.config("edge.yaml", `
tiers: {gold: {type: exclusive, target: 1}}
default_chain: [gold]
`+podsYAML("gold", "pod-a", ag.Addr())))
	testwait.Until(t, 10*time.Second, "pod registered", func() bool { return edgetest.Pod(t, e.admin, "pod-a").Status == "available" })

	if pod, _, status := allocateOn(t, e, "CA-wait-1"); status != http.StatusOK || pod != "pod-a" {
		t.Fatalf("first call: %d %s", status, pod)
	}
	type result struct {
		pod    string
		status int
		took   time.Duration
	}
	second := make(chan result, 1)
	go func() {
		start := time.Now()
		pod, _, status := allocateOn(t, e, "CA-wait-2")
		second <- result{pod, status, time.Since(start)}
	}()
	rdb := f.redis.Client()
	testwait.Until(t, 5*time.Second, "the second call waiting", func() bool { return rdb.ZCard(ctx, "voice:wait:deadline").Val() == 1 })
	released := time.Now()
	if status := mediaPost(t, e.admin+"/api/v1/release", `{"call_sid":"CA-wait-1"}`, nil); status != http.StatusOK {
		t.Fatalf("release: %d", status)
	}
	r := <-second
	if r.status != http.StatusOK || r.pod != "pod-a" {
		t.Fatalf("waiting call: %d %q, want 200 pod-a", r.status, r.pod)
	}
	t.Logf("second call answered %v after the release (it waited %v in all)", time.Since(released), r.took)

	start := time.Now()
	var refused struct{ Code string }
	status := mediaPost(t, e.public+"/api/v1/allocate", `{"call_sid":"CA-wait-3"}`, &refused)
	if took := time.Since(start); status != http.StatusServiceUnavailable || refused.Code != "at_capacity" || took < 3*time.Second {
		t.Fatalf("third call: %d %q after %v, want 503 at_capacity after the 3s budget", status, refused.Code, took)
	}
	// A caller that hangs up while waiting takes no pod: its request's
	// context ends, its wait with it, and the pod freed next goes back to
	// the pool.
	hurried := &http.Client{Timeout: 500 * time.Millisecond}
	req, _ := http.NewRequest(http.MethodPost, e.public+"/api/v1/allocate", strings.NewReader(`{"call_sid":"CA-wait-4"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+edgetest.APIToken)
	if resp, err := hurried.Do(req); err == nil {
		resp.Body.Close()
		t.Fatalf("the hurried caller got an answer (%d) while the pod was busy", resp.StatusCode)
	}
	testwait.Until(t, 5*time.Second, "the hurried caller's wait ended", func() bool { return rdb.ZCard(ctx, "voice:wait:deadline").Val() == 0 })
	if status := mediaPost(t, e.admin+"/api/v1/release", `{"call_sid":"CA-wait-2"}`, nil); status != http.StatusOK {
		t.Fatalf("release: %d", status)
	}
	if st := edgetest.Pod(t, e.admin, "pod-a").Status; st != "available" {
		t.Errorf("pod-a is %q after the waiter hung up and its call was released, want available", st)
	}
	if n := rdb.Exists(ctx, "voice:call:CA-wait-4").Val(); n != 0 {
		t.Error("the caller that hung up has a call")
	}
	metrics := provBody(t, e.admin+"/metrics")
	for _, want := range []string{`edge_admission_wait_seconds_count{result="served"} 1`, `edge_admission_wait_timeouts_total 1`, `edge_admission_wait_seconds_count{result="gave_up"} 1`} {
		if !strings.Contains(metrics, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
}
