package telnyx_test

import (
	"encoding/json"
	"os"
	"testing"
	"time"

	"github.com/edge-voice/edge/plugins/telnyx"
)

// sdkVectors are the verdicts of Telnyx's official SDK verifier (the npm
// package "telnyx"; testdata/sdk/vectors.cjs records them). Telnyx's Go
// SDK is not served by the Go module proxy edge builds from, so the
// TypeScript one is the oracle, run once and kept here: signed, forged,
// stale and oddly spelled webhooks.
type sdkVectors struct {
	SDK   string
	Cases []struct {
		Name       string
		PublicKey  string `json:"public_key"`
		Timestamp  string
		Signature  string
		Body       string
		Now        int64
		SDKAccepts bool   `json:"sdk_accepts"`
		SDKSays    string `json:"sdk_says"`
	}
}

// TestVerifyAgreesWithTelnyxSDK: Verify accepts exactly the webhooks the
// official SDK accepts, no valid one is refused and no refused one let in.
func TestVerifyAgreesWithTelnyxSDK(t *testing.T) {
	raw, err := os.ReadFile("testdata/sdk/vectors.json")
	if err != nil {
		t.Fatal(err)
	}
	var v sdkVectors
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatal(err)
	}
	if len(v.Cases) < 20 {
		t.Fatalf("%d cases from %s, want the recorded set", len(v.Cases), v.SDK)
	}
	accepted := 0
	for _, c := range v.Cases {
		keys, err := telnyx.ParsePublicKeys(c.PublicKey)
		if err != nil {
			t.Fatalf("%s: key %q: %v", c.Name, c.PublicKey, err)
		}
		_, err = telnyx.Verify(keys, c.Timestamp, c.Signature, []byte(c.Body), time.Unix(c.Now, 0))
		if got := err == nil; got != c.SDKAccepts {
			t.Errorf("%s: Verify says %v, %s says accepted=%v (%s)", c.Name, err, v.SDK, c.SDKAccepts, c.SDKSays)
		}
		if c.SDKAccepts {
			accepted++
		}
	}
	if accepted == 0 || accepted == len(v.Cases) {
		t.Errorf("%d of %d cases accepted: the vectors test nothing", accepted, len(v.Cases))
	}
}
