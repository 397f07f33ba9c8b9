package providers_test

import (
	"testing"

	"github.com/edge-voice/edge/forwarded"
	"github.com/edge-voice/edge/plugins"
)

// The Exotel IP allow-list reads the client address a trusted proxy names,
// and only then: with providers.trust_forwarded on, any direct client set
// its own address in X-Forwarded-For and passed the list.
func TestIPAllowListBelievesOnlyTrustedProxies(t *testing.T) {
	e := newEnv(t, spec("exotel", plugins.Settings{"allow_ips": "203.0.113.7"}))
	e.register(t, "gold", "voice-agent-0")
	lookup := func(sid string) answer {
		return e.do(t, "GET", "/providers/exotel/voicebot?CallSid="+sid+"&merchant_id=acme", "", "X-Forwarded-For", "203.0.113.7")
	}
	// Nobody trusted: the test client (127.0.0.1) is not on the list,
	// whatever its header says.
	if got := lookup("ex-1"); got.status != 403 {
		t.Fatalf("spoofed X-Forwarded-For, no trusted proxy: %+v, want 403", got)
	}
	// A trusted list that does not hold the peer: still the peer.
	other, _ := forwarded.Parse("trusted_proxies", []string{"10.0.0.0/8"})
	e.trusted.Store(other)
	if got := lookup("ex-2"); got.status != 403 {
		t.Fatalf("spoofed X-Forwarded-For from an untrusted peer: %+v, want 403", got)
	}
	// The peer is the trusted load balancer: the address it names counts.
	lb, _ := forwarded.Parse("trusted_proxies", []string{"127.0.0.1/32"})
	e.trusted.Store(lb)
	if got := lookup("ex-3"); got.status != 200 {
		t.Fatalf("client named by a trusted proxy: %+v, want 200", got)
	}
}
