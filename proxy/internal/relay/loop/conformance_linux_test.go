//go:build linux

package loop_test

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/edge-voice/edge/proxy/internal/iouring"
	"github.com/edge-voice/edge/proxy/internal/relay"
	"github.com/edge-voice/edge/proxy/internal/relay/loop"
	"github.com/edge-voice/edge/proxy/internal/relay/relaytest"
	"github.com/edge-voice/edge/proxy/internal/tls13"
)

// The epoll and io_uring loops keep every relay's contract (relaytest).
func TestLoopsConformance(t *testing.T) {
	for _, uring := range []bool{false, true} {
		name := "epoll"
		if uring {
			name = "uring"
		}
		t.Run(name, func(t *testing.T) {
			if uring {
				if err := iouring.Probe(); err != nil {
					t.Skipf("io_uring unavailable: %v", err)
				}
			}
			relaytest.Conformance(t, func(t *testing.T, env relay.Env) (func(*relaytest.Socket), func()) {
				var ls loop.Loops
				if err := ls.Start(loop.Options{Env: env, Uring: uring, Carried: func(uring, tls bool) {},
					UringOwnBufs: prometheus.NewCounter(prometheus.CounterOpts{Name: "own"})}); err != nil {
					t.Fatal(err)
				}
				if uring && !ls.UringRunning() {
					t.Fatal("the io_uring loops did not start")
				}
				add := func(s *relaytest.Socket) {
					var tk *tls13.Takeover
					var held []byte
					if s.TLS != nil {
						// The loop carries the provider's records.
						if tk, held = tls13.Take(s.TLS); tk == nil {
							t.Fatal("crypto/tls did not give up a TLS 1.3 socket's records")
						}
					}
					if !ls.Add(s.Socket, nil, held, tk) {
						t.Fatal("the loops refused a TCP socket")
					}
				}
				return add, ls.Stop
			})
		})
	}
}
