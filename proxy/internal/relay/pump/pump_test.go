package pump_test

import (
	"testing"

	"github.com/edge-voice/edge/proxy/internal/relay"
	"github.com/edge-voice/edge/proxy/internal/relay/pump"
	"github.com/edge-voice/edge/proxy/internal/relay/relaytest"
)

// The goroutine relay keeps every relay's contract (relaytest).
func TestPumpConformance(t *testing.T) {
	relaytest.Conformance(t, func(t *testing.T, env relay.Env) (func(*relaytest.Socket), func()) {
		r := pump.New(env)
		// crypto/tls carries a TLS provider's records on this relay.
		return func(s *relaytest.Socket) { r.Add(s.Socket, nil, nil) }, func() {}
	})
}
