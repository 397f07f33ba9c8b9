package proxy

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/edge-voice/edge/allocator"
)

// On shutdown the proxy refuses new sockets but keeps the open ones flowing,
// with their leases renewed, until they end; Run returns after their
// release.
func TestShutdownDrainsOpenSockets(t *testing.T) {
	eachRelay(t, func(t *testing.T, relay Relay) {
		const ttl = 600 * time.Millisecond
		e := newEnv(t, envOpt{relay: relay, leaseTTL: ttl})
		pod, url := e.allocate("CA1", "")
		_, url2 := e.allocate("CA2", "")
		c := e.mustDial(url)
		echo(t, c, "before")
		e.cancel()
		// Run is draining: it must not return while the socket is open.
		if _, err := e.dial(url2); err == nil || !strings.Contains(err.Error(), "status 503") {
			t.Fatalf("new socket while draining: %v, want 503", err)
		}
		end := time.Now().Add(2 * ttl)
		for time.Now().Before(end) {
			echo(t, c, "during drain")
			time.Sleep(20 * time.Millisecond) // media rate
		}
		select {
		case err := <-e.runErr:
			t.Fatalf("Run returned (%v) with a socket open", err)
		default:
		}
		if owner := e.podOwner(pod); owner != "CA1" {
			t.Fatalf("lease not renewed during drain: owner %q", owner)
		}
		c.Close(1000, "")
		select {
		case err := <-e.runErr:
			if err != nil {
				t.Fatal(err)
			}
			e.runErr <- nil // for the cleanup
		case <-time.After(10 * time.Second):
			t.Fatal("Run did not return after the last socket closed")
		}
		if _, err := e.alloc.Call(context.Background(), "CA1"); !errors.Is(err, allocator.ErrCallNotFound) {
			t.Errorf("call not released before Run returned: %v", err)
		}
	})
}

func TestDrainDeadlineClosesWith1001(t *testing.T) {
	eachRelay(t, func(t *testing.T, relay Relay) {
		e := newEnv(t, envOpt{relay: relay, cfg: func(c *Config) { c.DrainTimeout = 200 * time.Millisecond }})
		pod, url := e.allocate("CA1", "")
		c := e.mustDial(url)
		echo(t, c, "hi")
		e.cancel()
		if got := readClose(t, c); got != closeGoingAway {
			t.Errorf("close status = %d, want 1001", got)
		}
		select {
		case <-e.runErr:
			e.runErr <- nil
		case <-time.After(10 * time.Second):
			t.Fatal("Run did not return after the drain deadline")
		}
		if owner := e.podOwner(pod); owner != "" {
			t.Errorf("pod still leased to %q after the drain closed its socket", owner)
		}
		if got := value(e.px.metrics.closes.WithLabelValues("edge", "1001")); got != 1 {
			t.Errorf("closes{edge,1001} = %v, want 1", got)
		}
		// The call's record says the drain ended it.
		if tl, err := e.alloc.Timeline(context.Background(), "CA1"); err != nil || tl.SocketEnd != "drain" ||
			tl.ClosedBy != "edge" || tl.CloseCode != "1001" {
			t.Errorf("timeline = %+v, %v; want ended by the drain", tl, err)
		}
	})
}
