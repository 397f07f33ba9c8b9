package pump_test

import (
	"testing"

	"github.com/edge-voice/edge/proxy/internal/relay"
	"github.com/edge-voice/edge/proxy/internal/relay/pump"
	"github.com/edge-voice/edge/proxy/internal/relay/relaytest"
)

// The goroutine relay keeps every relay's contract (relaytest).
func TestPumpConformance(t *testing.T) {
	relaytest.Conformance(t, func(t *testing.T, env relay.Env) (func(*relay.Socket), func()) {
		r := pump.New(env)
		return func(s *relay.Socket) { r.Add(s, nil, nil) }, func() {}
	})
}
