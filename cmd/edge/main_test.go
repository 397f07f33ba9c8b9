package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/edge-voice/edge/internal/edgetest"
	"github.com/edge-voice/edge/internal/testredis"
	"github.com/edge-voice/edge/internal/testwait"
)

// The README's run command with no configuration: embedded Redis, built-in
// fake agents, a working allocation, a clean exit on SIGTERM.
func TestEmbeddedDefault(t *testing.T) {
	edge := edgetest.Start(t, nil)
	waitLog(t, edge, `msg="edge is ready"`)
	status, body := postJSON(t, edge.PublicURL+"/api/v1/allocate", `{"call_sid":"CA-demo-1","merchant_id":"demo"}`)
	if status != 200 || !strings.HasPrefix(body["pod_name"].(string), "fake-agent-") {
		t.Fatalf("allocate on the embedded default: %d %v", status, body)
	}
	// Plain lines, pasteable as they are: not quoted inside a log line,
	// where the JSON body's quotes would come out escaped.
	paste := "curl -s -X POST " + edge.PublicURL + `/api/v1/allocate -H 'Content-Type: application/json' -d '{"call_sid":"CA-demo-1","merchant_id":"demo"}'`
	if !strings.Contains(edge.Log(), "\n  allocate a pod:  "+paste+"\n") {
		t.Errorf("the start-up output has no ready-to-paste allocate curl line:\n%s", edge.Log())
	}
	// The predecessor's agents release on the internal listener, with no
	// token, and read released_to_pool as the pool's name.
	status, body = postJSON(t, edge.InternalURL+"/api/v1/release", `{"call_sid":"CA-demo-1"}`)
	if status != 200 || body["released_to_pool"] != "pool:standard" || body["returned_to_pool"] != true {
		t.Fatalf("release: %d %v", status, body)
	}
	if !edge.Stop(30 * time.Second) {
		t.Fatal("edge did not exit within 30s of SIGTERM")
	}
	if code := edge.ExitCode(); code != 0 {
		t.Fatalf("exit code after SIGTERM = %d, want 0", code)
	}
}

func TestCheckConfig(t *testing.T) {
	useBuiltEdge(t) // the default config runs the built-in plugins
	dir := t.TempDir()
	good := filepath.Join(dir, "good.yaml")
	bad := filepath.Join(dir, "bad.yaml")
	os.WriteFile(good, []byte("allocator:\n  lease_ttl: 90s\n"), 0o600)
	typo := filepath.Join(dir, "typo.yaml")
	os.WriteFile(bad, []byte("allocator:\n  lease_ttl: 0s\n  call_info_ttl: -1s\n"), 0o600)
	os.WriteFile(typo, []byte("allocator:\n  leese_ttl: 1s\n"), 0o600)
	var out bytes.Buffer
	if err := run(context.Background(), []string{"check-config", "--config", good}, nil, &out, io.Discard); err != nil {
		t.Fatalf("valid file: %v", err)
	}
	if !strings.Contains(out.String(), "lease_ttl") {
		t.Errorf("check-config does not print the effective config:\n%s", out.String())
	}
	err := run(context.Background(), []string{"check-config", "--config", bad}, nil, io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "allocator.lease_ttl") || !strings.Contains(err.Error(), "allocator.call_info_ttl") {
		t.Fatalf("invalid file: err = %v, want both fields named", err)
	}
	err = run(context.Background(), []string{"check-config", "--config", typo}, nil, io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "allocator.leese_ttl") {
		t.Fatalf("misspelt key: err = %v, want the key named", err)
	}
}

// Ops edit the file: a runtime change applies, a listener change is reported
// as needing a restart, an invalid edit is rejected and the last good config
// stays; edge keeps serving throughout.
func TestConfigReload(t *testing.T) {
	srv := testredis.Start(t)
	path := filepath.Join(t.TempDir(), "edge.yaml")
	write := func(s string) {
		t.Helper()
		// Write then rename, as a ConfigMap update does.
		tmp := path + ".tmp"
		if err := os.WriteFile(tmp, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, path); err != nil {
			t.Fatal(err)
		}
	}
	base := "redis:\n  url: " + srv.URL() + "\nreload:\n  interval: 20ms\ngeneric_api:\n  open: loopback\n"
	onePod := "pods:\n  static:\n    - {name: p0, address: 127.0.0.1:9, tier: standard}\n"
	write(base + onePod)
	edge := edgetest.Start(t, []string{"--config", path})
	waitLog := func(substr string) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for !strings.Contains(edge.Log(), substr) {
			if time.Now().After(deadline) {
				t.Fatalf("no %q in the log:\n%s", substr, edge.Log())
			}
			time.Sleep(20 * time.Millisecond) // polling a log file: no event to await
		}
	}
	write(base + "allocator:\n  lease_ttl: 2m\n    pods:\n  - nonsense\n")
	waitLog("config change rejected")
	write(base + onePod + "log:\n  format: json\n")
	waitLog("config change requires restart")
	write(base + "pods:\n  static:\n    - {name: p0, address: 127.0.0.1:9, tier: standard}\n    - {name: p1, address: 127.0.0.1:9, tier: standard}\n")
	waitLog("config reloaded")
	// The reloaded static list registered p1: two calls get two pods.
	for _, call := range []string{"CA1", "CA2"} {
		if status, body := postJSON(t, edge.PublicURL+"/api/v1/allocate", `{"call_sid":"`+call+`"}`); status != 200 {
			t.Fatalf("allocate %s after reload: %d %v", call, status, body)
		}
	}
}

func postJSON(t *testing.T, url, body string) (int, map[string]any) {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out
}

// SIGTERM with http.shutdown_delay: readiness turns false at once, and for
// the delay edge still answers webhooks and opens media sockets (load
// balancers go on sending for a few seconds after a pod turns unready),
// then stops cleanly. Without the delay a rolling update refused every
// connection still routed to the old pod.
func TestShutdownDelayKeepsServingWhileNotReady(t *testing.T) {
	edge := edgetest.Start(t, []string{"--set", "http.shutdown_delay=5s"})
	if !edge.WaitReady(60 * time.Second) {
		t.Fatal("edge not ready after 60s")
	}
	if err := syscall.Kill(edge.Pid(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	testwait.Until(t, 60*time.Second, "readiness false after SIGTERM", func() bool { return provGet(t, edge.AdminURL+"/readyz") == 503 })

	status, body := postJSON(t, edge.PublicURL+"/api/v1/allocate", `{"call_sid":"CA-after-sigterm","merchant_id":"demo"}`)
	if status != 200 {
		t.Fatalf("allocate while stopping: %d %v", status, body)
	}
	wsURL := body["ws_url"].(string)
	c := mediaDial(t, "ws"+strings.TrimPrefix(edge.PublicURL, "http")+wsURL[strings.Index(wsURL, "/ws/"):])
	mediaStream(t, c, "CA-after-sigterm", 10)
	c.Close(websocket.StatusNormalClosure, "done")

	select {
	case <-edge.Done():
	case <-time.After(60 * time.Second):
		t.Fatal("edge did not stop within 60s of SIGTERM")
	}
	if code := edge.ExitCode(); code != 0 {
		t.Fatalf("exit code %d", code)
	}
	if !strings.Contains(edge.Log(), "still serving for http.shutdown_delay") {
		t.Errorf("no log line for the delay:\n%s", edge.Log())
	}
}

// A real deployment (its own Redis) without public_base_url tells every
// provider to open media at the public listener's own address, 127.0.0.1
// for a wildcard: edge says so at start. Set, or on the embedded default,
// nothing is said.
func TestWarnsWhenMediaURLsPointAtLoopback(t *testing.T) {
	srv := testredis.Start(t)
	const warning = "public_base_url is not set: providers are told to open media sockets at this listener's own address"
	edge := edgetest.Start(t, []string{"--redis-url", srv.URL()})
	if log := edge.Log(); !strings.Contains(log, warning) || !strings.Contains(log, "media_base=ws://127.0.0.1:") {
		t.Errorf("no warning about an unreachable media base:\n%s", edge.Log())
	}
	edge.Kill()
	edge = edgetest.Start(t, []string{"--redis-url", srv.URL(), "--public-base-url", "wss://voice.example.com"})
	if strings.Contains(edge.Log(), "public_base_url is not set") {
		t.Errorf("warned with public_base_url set:\n%s", edge.Log())
	}
}
