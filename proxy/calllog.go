package proxy

import (
	"strings"

	"github.com/edge-voice/edge/internal/mediacontract"
	"github.com/edge-voice/edge/proxy/internal/relay"
)

// callMeta is what a socket's log lines say of its call beside its id and
// pod (every line about a call carries call_sid, merchant_id, provider
// and pod, so that one call's lines can be found; the replica comes with
// the logger).
type callMeta struct {
	merchant, provider string
	// source is where the call's pod came from ("pool:<tier>",
	// "merchant:<id>").
	source string
	// failovers counts the call's moves to another pod after failed
	// connects, earlier sockets' and this one's.
	failovers int
	// failedHandshakes counts the call's earlier sockets that reached no
	// pod and left the call to the provider's retry.
	failedHandshakes int
}

// callOf reads the call's metadata off its claim. The provider is known
// for calls a provider's webhook created ("provider:<name>"); a token's
// name is not logged.
func callOf(c mediacontract.Claimed) callMeta {
	provider, _ := strings.CutPrefix(c.Creator, "provider:")
	if provider == c.Creator {
		provider = ""
	}
	return callMeta{merchant: c.MerchantID, provider: provider, source: c.SourcePool, failovers: len(c.MovedFrom), failedHandshakes: c.FailedHandshakes}
}

// attrs are the socket's call fields, for its log lines.
func (s *socket) attrs() []any {
	attrs := []any{"call_sid", s.CallID, "merchant_id", s.call.merchant}
	if s.call.provider != "" {
		// As every line of the call: only a provider's call names one.
		attrs = append(attrs, "provider", s.call.provider)
	}
	return append(attrs, "pod", s.podName())
}

// endedHow is why the socket's end released its call, for the log and the
// call's record: pod_lost (its pod died mid-call), lease_lost (the call
// lost its pod: swept, unregistered or released elsewhere), drain (edge
// shutting down), or socket_close (a side closed, or edge's policy did).
func endedHow(r relay.Result) string {
	switch {
	case r.Lost:
		return "pod_lost"
	case r.By != relay.Edge:
		return "socket_close"
	}
	switch r.Reason {
	case reasonCallReleased:
		return "lease_lost"
	case reasonShuttingDown:
		return "drain"
	}
	return "socket_close"
}

// Stop reasons endedHow tells apart.
const (
	reasonCallReleased = "call released"
	reasonShuttingDown = "edge shutting down"
)
