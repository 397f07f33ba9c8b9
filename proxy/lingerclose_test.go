package proxy

import (
	"context"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/edge-voice/edge/allocator"
	"github.com/edge-voice/edge/internal/testwait"
)

// A client that keeps sending after its message went over the limit still
// reads edge's 1009: edge cuts the relay before the
// oversized frame, so the pod, between frames, gets 1009 too, and drains
// the client instead of resetting it with its bytes unread.
func TestOversizedWhileSendingClosesWith1009BothWays(t *testing.T) {
	eachRelay(t, func(t *testing.T, relay Relay) {
		e := newEnv(t, envOpt{relay: relay, cfg: func(c *Config) { c.MaxMessageBytes = 64 << 10 }})
		pod, url := e.allocate("CA1", "")
		c := e.mustDial(url)
		echo(t, c, "small")
		c.SetReadLimit(1 << 20)
		go func() {
			msg := make([]byte, 256<<10)
			for {
				if err := c.Write(context.Background(), websocket.MessageBinary, msg); err != nil {
					return
				}
			}
		}()
		if got := readClose(t, c); got != closeTooBig {
			t.Errorf("client saw close %d, want %d", got, closeTooBig)
		}
		e.waitSockets(0)
		testwait.Until(t, 5*time.Second, "the pod's close", func() bool { return len(e.agents[pod].CloseCodes()) > 0 })
		if got := e.agents[pod].CloseCodes(); len(got) != 1 || got[0] != closeTooBig {
			t.Errorf("pod saw closes %v, want [%d]", got, closeTooBig)
		}
	})
}

// A call that loses its lease while its client floods the socket still
// ends with a 1008 close frame the client reads, not a reset (every close
// edge starts is a lingering close, not only 1009).
func TestLostLeaseWhileSendingCloses1008(t *testing.T) {
	eachRelay(t, func(t *testing.T, relay Relay) {
		e := newEnv(t, envOpt{relay: relay, cfg: func(c *Config) { c.RenewInterval = time.Hour }})
		_, url := e.allocate("CA1", "")
		c := e.mustDial(url)
		echo(t, c, "hi")
		c.SetReadLimit(1 << 20)
		go func() {
			msg := make([]byte, 32<<10)
			for {
				if err := c.Write(context.Background(), websocket.MessageBinary, msg); err != nil {
					return
				}
			}
		}()
		ctx := context.Background()
		info, err := e.alloc.Call(ctx, "CA1")
		if err != nil {
			t.Fatal(err)
		}
		if err := (allocator.MediaLeases{Alloc: e.alloc}).Unclaim(ctx, "CA1", info.MediaClaim); err != nil {
			t.Fatal(err)
		}
		e.px.renewOnce(ctx)
		if got := readClose(t, c); got != closePolicy {
			t.Errorf("client saw close %d, want %d", got, closePolicy)
		}
		e.waitSockets(0)
	})
}
