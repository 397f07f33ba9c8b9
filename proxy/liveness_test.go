package proxy

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/edge-voice/edge/internal/testwait"
)

// livenessCfg pings a pod quiet for 100 ms and loses it after 400 ms of
// silence with a ping unanswered.
func livenessCfg(c *Config) {
	c.PodPingInterval, c.PodSilence = 100*time.Millisecond, 400*time.Millisecond
}

// liveEnv is an env on relay whose only pod, pod-x, is a mortal pod
// (quiet: it answers pings only), with a Twilio call on it.
func liveEnv(t *testing.T, relay Relay, quiet bool) (e *env, agent *mortalPod, callID, url string) {
	e = newEnv(t, envOpt{relay: relay, cfg: func(c *Config) { failoverCfg(c); livenessCfg(c) }})
	for _, pod := range []string{"pod-a", "pod-b", "pod-s"} {
		if _, err := e.alloc.Drain(context.Background(), pod); err != nil {
			t.Fatal(err)
		}
	}
	agent = newMortalPod(t)
	agent.quiet = quiet
	e.addPod("pod-x", "gold", agent.addr())
	callID, url = e.twilioCallOn("pod-x")
	return e, agent, callID, url
}

// A pod that hangs (it reads nothing and answers nothing, as a stopped
// process: its kernel still takes the provider's bytes) is found by
// edge's pings on every relay, within the silence bound rather than when
// its buffers fill: the provider gets 1014 naming it, the metrics count a
// hung pod, and the call's record keeps the reason.
func TestHungPodIsFoundByPing(t *testing.T) {
	eachRelay(t, func(t *testing.T, relay Relay) {
		e, agent, callID, url := liveEnv(t, relay, false)
		ctx := context.Background()
		s := openStream(t, e, url, callID, 20*time.Millisecond, 4)
		s.waitEchoes(5)
		agent.kill("hang")
		testwait.Until(t, 10*time.Second, "the provider's socket ended", func() bool {
			_, ended := s.snapshot()
			return ended != nil
		})
		_, ended := s.snapshot()
		if websocket.CloseStatus(ended) != closeBadGateway || !strings.Contains(ended.Error(), "pod lost: hung, not_enabled") {
			t.Errorf("the provider read %v, want 1014 %q", ended, "pod lost: hung, not_enabled")
		}
		e.waitSockets(0)
		if got := value(e.px.metrics.podsLost.WithLabelValues("hung")); got != 1 {
			t.Errorf("pods_lost{hung} = %v, want 1", got)
		}
		if got := value(e.px.metrics.resumptions.WithLabelValues("not_enabled")); got != 1 {
			t.Errorf("resumptions{not_enabled} = %v, want 1", got)
		}
		if tl, _ := e.alloc.Timeline(ctx, callID); tl.SocketEnd != "pod_lost" || tl.CloseReason != "pod lost: hung, not_enabled" {
			t.Errorf("timeline = %+v; want pod_lost, its reason kept", tl)
		}
	})
}

// A pod that is quiet but alive answers edge's pings and is never taken
// for hung, on every relay; its pongs never reach the provider.
func TestQuietPodAnsweringPingsLives(t *testing.T) {
	eachRelay(t, func(t *testing.T, relay Relay) {
		e, agent, _, url := liveEnv(t, relay, true)
		c := e.mustDial(url)
		testwait.Until(t, 10*time.Second, "the pod answered 10 pings", func() bool {
			agent.mu.Lock()
			defer agent.mu.Unlock()
			return agent.pings >= 10
		})
		// The provider's library answers nothing to a pong and reports
		// none: the relay's own count of what went to the provider says
		// whether any pong of the pod's passed edge.
		if got := value(e.px.metrics.dirs[1].Bytes); got != 0 {
			t.Errorf("%v bytes of the quiet pod's reached the provider; want none: edge's pongs stay at edge", got)
		}
		if got := value(e.px.metrics.podsLost.WithLabelValues("hung")); got != 0 || e.px.Active() != 1 {
			t.Errorf("pods_lost{hung} = %v, sockets %d; want a quiet pod alive", got, e.px.Active())
		}
		c.Close(websocket.StatusNormalClosure, "")
		e.waitSockets(0)
	})
}

// With proxy.resume, a hung pod's call moves to another pod, which the
// provider hears only as a gap.
func TestHungPodsCallMoves(t *testing.T) {
	eachRelay(t, func(t *testing.T, relay Relay) {
		e := newEnv(t, envOpt{relay: relay, opening: twilioOpening, cfg: func(c *Config) { resumeCfg(c); livenessCfg(c) }})
		ctx := context.Background()
		for _, pod := range []string{"pod-a", "pod-b", "pod-s"} {
			if _, err := e.alloc.Drain(ctx, pod); err != nil {
				t.Fatal(err)
			}
		}
		first, next := newMortalPod(t), newMortalPod(t)
		e.addPod("pod-x", "gold", first.addr())
		callID, url := e.twilioCallOn("pod-x")
		e.addPod("pod-y", "gold", next.addr())
		s := openStream(t, e, url, callID, 20*time.Millisecond, 4)
		s.waitEchoes(5)
		first.kill("hang")
		e.waitResumed(1)
		before, _ := s.snapshot()
		s.waitEchoes(len(before) + 5)
		if _, ended := s.snapshot(); ended != nil {
			t.Fatalf("the provider's socket ended: %v", ended)
		}
		if got := value(e.px.metrics.podsLost.WithLabelValues("hung")); got != 1 {
			t.Errorf("pods_lost{hung} = %v, want 1", got)
		}
		s.close()
		e.waitSockets(0)
	})
}
