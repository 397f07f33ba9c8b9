package main

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/edge-voice/edge/internal/edgetest"
	"github.com/edge-voice/edge/plugins"
	"github.com/edge-voice/edge/plugins/plugintest"
)

const key = "acme-signing-key-0123456789"

func signed(body string) *plugins.Request {
	mac := hmac.New(sha256.New, []byte(key))
	mac.Write([]byte(body))
	return &plugins.Request{Route: plugins.RouteAllocate, Method: "POST", URL: "http://127.0.0.1/api/v1/acme/allocate",
		Header: http.Header{"X-Acme-Signature": {hex.EncodeToString(mac.Sum(nil))}}, Body: []byte(body)}
}

func TestConformance(t *testing.T) {
	forged := signed(`{"call_id":"a-1"}`)
	forged.Body = []byte(`{"call_id":"a-2"}`)
	plugintest.Run(t, newAcme(), plugintest.Suite{
		Settings:    plugins.Settings{"signing_key": key},
		BadSettings: []plugintest.BadSettings{{Name: "short key", Settings: plugins.Settings{"signing_key": "short"}, Key: "signing_key"}},
		Valid:       []plugintest.Valid{{Name: "signed", Request: signed(`{"call_id":"a-1","merchant":"m1"}`), CallID: "a-1"}},
		Invalid: []plugintest.Invalid{
			{Name: "forged", Request: forged, Status: 403},
			{Name: "no call id", Request: signed(`{"merchant":"m1"}`), Status: 400},
		},
		StatusCallbacks: []plugintest.StatusCallback{
			{Name: "hangup", Request: statusCallback(signed(`{"call_id":"a-1","event":"hangup"}`)), CallID: "a-1", Event: "hangup"},
			{Name: "ringing", Request: statusCallback(signed(`{"call_id":"a-1","event":"ringing"}`))},
		},
	})
}

// statusCallback makes req a status callback.
func statusCallback(req *plugins.Request) *plugins.Request {
	req.Route, req.URL = "status", "http://127.0.0.1/api/v1/acme/status"
	return req
}

// TestLoadedThroughConfig builds this example as a third-party binary,
// names it in a config file (with its checksum) and runs the real edge
// binary on it: the webhook goes through the plugin process end to end.
func TestLoadedThroughConfig(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "acme-provider")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build the example: %v\n%s", err, out)
	}
	data, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(data)
	cfg := filepath.Join(dir, "edge.yaml")
	os.WriteFile(cfg, []byte(fmt.Sprintf(`
public_base_url: wss://edge.example.com
providers:
  builtin: false
  plugins:
    acme:
      path: %s
      sha256: %s
      secrets: {signing_key: %s}
`, bin, hex.EncodeToString(sum[:]), key)), 0o600)

	edge := edgetest.Start(t, []string{"--config", cfg})
	waitReady(t, edge.AdminURL)
	if strings.Contains(edge.Log(), key) {
		t.Error("the signing key is in edge's log")
	}
	post := func(req *plugins.Request) (int, string) {
		r, _ := http.NewRequest("POST", edge.PublicURL+"/api/v1/acme/"+req.Route, strings.NewReader(string(req.Body)))
		r.Header = req.Header
		resp, err := http.DefaultClient.Do(r)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	status, body := post(signed(`{"call_id":"acme-1","merchant":"m1"}`))
	if status != 200 || !strings.Contains(body, `"stream_url":"wss://edge.example.com/ws/pod/fake-agent-`) || !strings.Contains(body, "/agent/voice/breeze-buddy/acme/callback/order-confirmation/v2") {
		t.Errorf("signed webhook: %d %s", status, body)
	}
	forged := signed(`{"call_id":"acme-2"}`)
	forged.Body = []byte(`{"call_id":"acme-3"}`)
	if status, body := post(forged); status != 403 {
		t.Errorf("forged webhook: %d %s", status, body)
	}
	if status, _ := post(signed(`{"call_id":"x"}`)); status != 200 {
		t.Errorf("second call: %d", status)
	}
	// Acme's hangup ends the call at once: its stream never opened.
	if code, body := post(statusCallback(signed(`{"call_id":"acme-1","event":"hangup"}`))); code != 204 {
		t.Errorf("status callback: %d %s", code, body)
	}
	if code, body := get(t, edge.AdminURL+"/api/v1/calls/acme-1"); code != 200 || !strings.Contains(body, `"released_by":"provider"`) || !strings.Contains(body, `"ended_by":"provider:hangup"`) {
		t.Errorf("timeline after the hangup: %d %s", code, body)
	}
	r, _ := http.Post(edge.PublicURL+"/api/v1/twilio/allocate", "application/x-www-form-urlencoded", strings.NewReader("CallSid=CA00000000000000000000000000000001"))
	if r.StatusCode != 404 {
		t.Errorf("built-ins disabled, twilio answered %d", r.StatusCode)
	}
	r.Body.Close()
}

// waitReady polls /readyz: the plugin process starts after the listeners,
// and an external process offers no event to wait on.
func waitReady(t *testing.T, admin string) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := http.Get(admin + "/readyz")
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("edge not ready: %s", b)
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func get(t *testing.T, u string) (int, string) {
	t.Helper()
	resp, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}
