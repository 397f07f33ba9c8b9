package main

import (
	"context"
	"net/http"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/edge-voice/edge/internal/edgetest"
	"github.com/edge-voice/edge/internal/testwait"
)

// On SIGTERM the leader gives its lock up before the slow shutdown steps,
// not after them: with a live call holding the media drain open, the lock's
// release (its PUBLISH on the lock's channel, which followers campaign on)
// arrives while the replica is still running and still relaying that call.
// Ordered by events: the release message, then the call still streaming,
// then the exit once the call ends.
func TestLeaderReleasesBeforeTheDrainOnSIGTERM(t *testing.T) {
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
proxy: {idle_timeout: 30s, drain_timeout: 60s}
leader: {lease_duration: 15s, renew_deadline: 10s, retry_period: 2s}
`+podsYAML("gold", "pod-a", ag.Addr())))
	testwait.Until(t, 10*time.Second, "leading with pod-a registered", func() bool {
		var st struct {
			IsLeader bool `json:"is_leader"`
		}
		return edgetest.GetJSON(e.admin+"/api/v1/status", &st) == nil && st.IsLeader &&
			edgetest.Pod(t, e.admin, "pod-a").Status == "available"
	})
	_, url, status := allocateOn(t, e, "CA-sigterm-1")
	if status != http.StatusOK {
		t.Fatalf("allocate: %d", status)
	}
	c := mediaDial(t, url)
	mediaStream(t, c, "CA-sigterm-1", 3)

	sub := f.redis.Client().Subscribe(ctx, "voice:leader:lock")
	defer sub.Close()
	if _, err := sub.Receive(ctx); err != nil { // the subscription is confirmed
		t.Fatal(err)
	}
	if err := e.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	wctx, wcancel := context.WithTimeout(ctx, 30*time.Second)
	defer wcancel()
	if _, err := sub.ReceiveMessage(wctx); err != nil {
		t.Fatalf("no lock release after SIGTERM: %v", err)
	}
	select {
	case <-e.Done():
		t.Fatal("edge exited before the lock release was seen: the release did not come first")
	default:
	}
	if got := f.redis.Client().Exists(ctx, "voice:leader:lock").Val(); got != 0 {
		t.Error("the lock still exists after its release was published")
	}
	// The drain still holds the live call: it keeps relaying after the release.
	mediaStream(t, c, "CA-sigterm-1", 3)
	c.Close(websocket.StatusNormalClosure, "call ended")
	select {
	case <-e.Done():
	case <-time.After(30 * time.Second):
		t.Fatal("edge did not exit after its last call ended")
	}
}
