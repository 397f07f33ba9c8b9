package proxy

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/edge-voice/edge/internal/testwait"
)

// TestNoHungVerdictUnderLoad streams EDGE_LIVENESS_LOAD sockets (1,000
// when set to 1) through each relay for EDGE_LIVENESS_SECONDS (30), each
// provider sending a media message every 20 ms to a quiet agent that only
// answers pings, with the default ping interval (1 s) and silence (3 s):
// every quiet pod is pinged about once a second, on a machine the streams
// load, and none may be taken for hung. A measurement (make
// liveness-load), skipped unless asked for.
func TestNoHungVerdictUnderLoad(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("EDGE_LIVENESS_LOAD"))
	if n <= 0 {
		t.Skip("a measurement: EDGE_LIVENESS_LOAD=1 (or a socket count) runs it")
	}
	if n == 1 {
		n = 1000
	}
	secs, _ := strconv.Atoi(os.Getenv("EDGE_LIVENESS_SECONDS"))
	if secs <= 0 {
		secs = 30
	}
	eachRelay(t, func(t *testing.T, relay Relay) {
		{
			e := newEnv(t, envOpt{relay: relay, cfg: func(c *Config) {
				failoverCfg(c)
				c.MaxSockets, c.IdleTimeout = n+10, time.Minute
				c.PodPingInterval, c.PodSilence = time.Second, 3*time.Second
			}})
			ctx := context.Background()
			for _, pod := range []string{"pod-a", "pod-b", "pod-s"} {
				if _, err := e.alloc.Drain(ctx, pod); err != nil {
					t.Fatal(err)
				}
			}
			agents := make([]*mortalPod, 8)
			for i := range agents {
				agents[i] = newMortalPod(t)
				agents[i].quiet = true
			}
			conns := make([]*websocket.Conn, n)
			for i := range n {
				pod := fmt.Sprintf("pod-q%d", i)
				e.addPod(pod, "gold", agents[i%len(agents)].addr())
				// The only free pod: the call lands there.
				_, url := e.allocateFor(fmt.Sprintf("CA-load-%d", i), "", "provider:twilio")
				conns[i] = e.mustDial(url)
			}
			stop := make(chan struct{})
			var wg sync.WaitGroup
			for _, c := range conns {
				wg.Add(1)
				go func() {
					defer wg.Done()
					tick := time.NewTicker(20 * time.Millisecond)
					defer tick.Stop()
					msg := []byte(`{"event":"media","media":{"payload":"AAAAAAAAAAAAAAAAAAAAAAAA"}}`)
					for {
						select {
						case <-stop:
							return
						case <-tick.C:
						}
						if c.Write(ctx, websocket.MessageText, msg) != nil {
							return
						}
					}
				}()
			}
			start := time.Now()
			time.Sleep(time.Duration(secs) * time.Second) // the measurement's length, not a synchronisation
			close(stop)
			wg.Wait()
			pings := 0
			for _, a := range agents {
				a.mu.Lock()
				pings += a.pings
				a.mu.Unlock()
			}
			hung := value(e.px.metrics.podsLost.WithLabelValues("hung"))
			t.Logf("%s: %d sockets for %v, %d pings answered, %v taken for hung, %d still open",
				relay, n, time.Since(start).Round(time.Second), pings, hung, e.px.Active())
			if hung != 0 || e.px.Active() != n {
				t.Errorf("%v healthy pods taken for hung; %d of %d sockets open", hung, e.px.Active(), n)
			}
			for _, c := range conns {
				c.Close(websocket.StatusNormalClosure, "")
			}
			testwait.Until(t, time.Minute, "every socket released", func() bool { return e.px.Active() == 0 })
		}
	})
}
