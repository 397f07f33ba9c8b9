package providers_test

import (
	"net/url"
	"strings"
	"syscall"
	"testing"

	"github.com/edge-voice/edge/plugins"
	"github.com/edge-voice/edge/plugins/plivo"
)

const plivoToken = "plivo-token-0123456789"

const plivoPath = "/api/v1/plivo/allocate?merchant_id=acme"

// signedPlivo sends a Plivo webhook signed (V3) with nonce to e.
func signedPlivo(t *testing.T, e *env, callUUID, nonce string) answer {
	t.Helper()
	form := url.Values{"CallUUID": {callUUID}, "From": {"+15550100"}}
	sig, err := plivo.Signature(plivoToken, "POST", "https://edge.example.com"+plivoPath, form, nonce)
	if err != nil {
		t.Fatal(err)
	}
	return e.do(t, "POST", plivoPath, form.Encode(), plivo.SignatureHeader, sig, plivo.NonceHeader, nonce)
}

// A captured Plivo webhook replayed on another replica while its call was
// live got the call's media URL (each plugin process remembered its own
// nonces), and the replayer's socket could open before Plivo's: a nonce
// seen by any replica is refused by every replica, and by a plugin
// process started afresh.
func TestPlivoNonceSeenOnOneReplicaIsRefusedOnEvery(t *testing.T) {
	settings := plugins.Settings{"auth_tokens": plivoToken}
	a := newEnv(t, spec("plivo", settings))
	b := a.replica(t, spec("plivo", settings))
	a.register(t, "gold", "voice-agent-0")
	uuid := plivoUUID(1)
	const nonce = "01234567890123456789"

	first := signedPlivo(t, a, uuid, nonce)
	if first.status != 200 || !strings.Contains(first.body, "<Stream") {
		t.Fatalf("first webhook: %+v", first)
	}
	for name, e := range map[string]*env{"the other replica": b, "the same replica": a} {
		replay := signedPlivo(t, e, uuid, nonce)
		if replay.status != 403 || strings.Contains(replay.body, "wss://") {
			t.Errorf("replay on %s: %+v, want 403 without the media URL", name, replay)
		}
	}
	// A restarted plugin process forgets nothing.
	gen, pid := a.waitUp(t, "plivo", 0)
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	a.waitUp(t, "plivo", gen)
	if replay := signedPlivo(t, a, uuid, nonce); replay.status != 403 {
		t.Errorf("replay after the plugin restarted: %+v, want 403", replay)
	}
	// A fresh nonce for the same live call is Plivo's own retry: it gets
	// the same stream.
	if retry := signedPlivo(t, b, uuid, "98765432109876543210"); retry.status != 200 || !strings.Contains(retry.body, "<Stream") {
		t.Errorf("a retry with a fresh nonce: %+v, want the stream", retry)
	}
	if n := metric(t, b, "edge_provider_webhooks_total", "provider", "plivo", "outcome", "replayed"); n != 1 {
		t.Errorf("replayed outcomes on the other replica = %v, want 1", n)
	}
}
