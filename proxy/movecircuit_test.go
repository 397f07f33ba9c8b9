package proxy

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/edge-voice/edge/allocator"
	"github.com/edge-voice/edge/internal/testwait"
)

// A move is a circuit, not a loop. A stream whose opening crashes every
// agent that reads it costs two agents: the first, and the one it moved
// to, which died on the replay having answered nothing; the call then
// ends (poison) instead of walking the tier, and never returns to a pod
// it left. Counted by the agents themselves.
func TestStreamThatKillsAgentsCostsTwo(t *testing.T) {
	e := newEnv(t, envOpt{opening: twilioOpening, cfg: resumeCfg})
	ctx := context.Background()
	for _, pod := range []string{"pod-a", "pod-b", "pod-s"} {
		if _, err := e.alloc.Drain(ctx, pod); err != nil {
			t.Fatal(err)
		}
	}
	agents := map[string]*mortalPod{}
	for i := range 4 {
		name := fmt.Sprintf("pod-c%d", i)
		agents[name] = newMortalPod(t)
		// An agent that says nothing before it has read the stream's
		// start, and crashes on this one's.
		agents[name].quiet, agents[name].crashOn = true, "start"
		e.addPod(name, "gold", agents[name].addr())
	}
	callID, url := e.twilioCallOn("pod-c0")
	s := openStream(t, e, url, callID, 5*time.Millisecond, 4)
	testwait.Until(t, 10*time.Second, "the provider's socket ended", func() bool {
		_, ended := s.snapshot()
		return ended != nil
	})
	if _, ended := s.snapshot(); websocket.CloseStatus(ended) != closeBadGateway {
		t.Errorf("the provider read %v, want close %d", ended, closeBadGateway)
	}
	e.waitSockets(0)
	crashed := 0
	for name, a := range agents {
		a.mu.Lock()
		crashed += a.crashes
		if a.crashes > 1 {
			t.Errorf("%s crashed %d times: the call went back to a pod it left", name, a.crashes)
		}
		a.mu.Unlock()
	}
	if crashed != 2 {
		t.Errorf("the stream crashed %d agents, want 2", crashed)
	}
	if got := value(e.px.metrics.resumptions.WithLabelValues("poison")); got != 1 {
		t.Errorf("resumptions{poison} = %v, want 1", got)
	}
	if tl, _ := e.alloc.Timeline(ctx, callID); tl.State != "ended" || tl.Resumptions != 1 {
		t.Errorf("timeline = %+v; want ended after one move", tl)
	}
}

// Moves of one merchant's calls are bounded per minute on a replica:
// past proxy.resume.max_per_merchant_per_minute a pod's death ends the
// call (rate_limited) instead of costing another pod; another merchant's
// calls still move.
func TestMovesPerMerchantAreBounded(t *testing.T) {
	e := newEnv(t, envOpt{opening: twilioOpening, cfg: func(c *Config) {
		resumeCfg(c)
		c.Resume.MaxPerMerchantPerMinute = 1
	}})
	ctx := context.Background()
	for _, pod := range []string{"pod-a", "pod-b", "pod-s"} {
		if _, err := e.alloc.Drain(ctx, pod); err != nil {
			t.Fatal(err)
		}
	}
	agents := map[string]*mortalPod{}
	for i := range 6 {
		name := fmt.Sprintf("pod-m%d", i)
		agents[name] = newMortalPod(t)
		e.addPod(name, "gold", agents[name].addr())
	}
	type call struct {
		id  string
		pod string
		s   *stream
	}
	var calls []call
	for i, merchant := range []string{"m1", "m1", "m2"} {
		id := fmt.Sprintf("CA%d", i)
		al, err := e.alloc.Allocate(ctx, allocator.Request{CallID: id, MerchantID: merchant, Creator: "provider:twilio"})
		if err != nil {
			t.Fatal(err)
		}
		s := openStream(t, e, e.url(al.PodName, e.signer.Mint(id, al.PodName, agentPath)), id, 5*time.Millisecond, 4)
		s.waitEchoes(3)
		calls = append(calls, call{id, al.PodName, s})
	}
	moved := 0.0
	for i, c := range calls {
		agents[c.pod].kill("reset")
		if i == 1 { // m1's second move in the minute
			testwait.Until(t, 10*time.Second, "m1's second call ended", func() bool {
				_, ended := c.s.snapshot()
				return ended != nil
			})
			continue
		}
		moved++
		e.waitResumed(moved)
		before, _ := c.s.snapshot()
		c.s.waitEchoes(len(before) + 3)
	}
	if _, ended := calls[1].s.snapshot(); websocket.CloseStatus(ended) != closeBadGateway {
		t.Errorf("m1's second call read %v, want close %d", ended, closeBadGateway)
	}
	if got := value(e.px.metrics.resumptions.WithLabelValues("rate_limited")); got != 1 {
		t.Errorf("resumptions{rate_limited} = %v, want 1", got)
	}
	for _, i := range []int{0, 2} {
		if _, ended := calls[i].s.snapshot(); ended != nil {
			t.Errorf("call %s ended (%v); want it moved", calls[i].id, ended)
		}
		calls[i].s.close()
	}
	e.waitSockets(0)
}

// The bucket of a merchant's moves refills over a minute, and the map of
// buckets stays bounded whatever the merchants.
func TestMoveBudget(t *testing.T) {
	now := time.Unix(1000, 0)
	b := newMoveBudget(func() time.Time { return now })
	for i := range 3 {
		if !b.take("m1", 3) {
			t.Fatalf("move %d refused within the budget", i+1)
		}
	}
	if b.take("m1", 3) {
		t.Fatal("a fourth move within a minute was allowed")
	}
	if !b.take("m2", 3) {
		t.Fatal("another merchant's move was refused")
	}
	now = now.Add(20 * time.Second)
	if !b.take("m1", 3) || b.take("m1", 3) {
		t.Fatal("a third of a minute should give back one move, and only one")
	}
	for i := range 3 * maxMoveBuckets {
		b.take(fmt.Sprint("x", i), 3)
	}
	if n := len(b.buckets); n > maxMoveBuckets {
		t.Errorf("%d buckets kept, want at most %d", n, maxMoveBuckets)
	}
}
