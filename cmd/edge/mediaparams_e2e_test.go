package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/edge-voice/edge/internal/edgetest"
	"github.com/edge-voice/edge/internal/testwait"
)

// TestExotelSampleRateEndToEnd runs the edge binary with its built-in
// Exotel plugin configured for 16 kHz (24 kHz for merchant hd): an Exotel
// webhook gets a stream URL asking for the merchant's rate, the socket
// opened on it reaches the pod with exactly that query and the
// Edge-Media-Params header, and the same URL with anything added,
// changed or smuggled in its query is refused before the pod.
func TestExotelSampleRateEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("runs an edge process")
	}
	f := newE2E(t)
	agent := mediaAgent(t)
	e := f.start("edge", f.config("edge.yaml", `
tiers: {gold: {type: exclusive, target: 1}}
default_chain: [gold]
providers:
  plugins:
    exotel:
      settings: {sample_rate: "16000", sample_rate_by_merchant: "hd=24000"}
`+podsYAML("gold", "agent-0", agent.Addr())))
	if !e.WaitReady(30 * time.Second) {
		t.Fatal("edge not ready with its plugins after 30s")
	}

	resp, err := http.Post(e.public+"/api/v1/exotel/allocate?merchant_id=hd", "application/json",
		strings.NewReader(`{"CallSid":"ex-rate-1","CallFrom":"09999999999","CallTo":"08047491899"}`))
	if err != nil {
		t.Fatal(err)
	}
	var ans struct{ URL string }
	err = json.NewDecoder(resp.Body).Decode(&ans)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("exotel webhook: %d %v", resp.StatusCode, err)
	}
	const query = "?sample-rate=24000"
	if !strings.HasSuffix(ans.URL, "/agent/voice/breeze-buddy/exotel/callback/template/v2"+query) {
		t.Fatalf("stream URL %s, want the merchant's rate in its query", ans.URL)
	}
	ws := mediaOn(e, ans.URL)
	target := strings.TrimPrefix(ws, "ws"+strings.TrimPrefix(e.public, "http"))
	path := strings.TrimSuffix(target, query)

	for _, tc := range []struct {
		query  string
		status int
	}{
		{"", http.StatusForbidden},
		{"?sample-rate=16000", http.StatusForbidden},
		{query + "&x=1", http.StatusForbidden},
		{query + "0000000000000000000000000000000000000000000000000000000000000", http.StatusForbidden},
		{"?sample%2Drate=24000", http.StatusForbidden},
		{query + "%2F..%2Fadmin", http.StatusForbidden},
		{"?sample-rate=..", http.StatusForbidden},
		{query + "?x=/admin", http.StatusForbidden},
		{query + "#/admin", http.StatusForbidden},
		{query + "%00", http.StatusBadRequest},
	} {
		if got := e2eRawUpgrade(t, strings.TrimPrefix(e.public, "http://"), path+tc.query); got != tc.status {
			t.Errorf("GET ...%s: %d, want %d", tc.query, got, tc.status)
		}
	}
	if n := agent.Sockets.Load(); n != 0 {
		t.Fatalf("the pod got %d sockets from refused URLs", n)
	}

	c := mediaDial(t, ws)
	mediaStream(t, c, "ex-rate-1", 5)
	if got, want := agent.Paths(), "/agent/voice/breeze-buddy/exotel/callback/template/v2"+query; len(got) != 1 || got[0] != want {
		t.Errorf("the pod saw %q, want [%q]", got, want)
	}
	if got := agent.Headers()[0].Values("Edge-Media-Params"); len(got) != 1 || got[0] != "sample-rate=24000" {
		t.Errorf("the pod's Edge-Media-Params = %q, want [sample-rate=24000]", got)
	}
	c.Close(websocket.StatusNormalClosure, "")
	testwait.Until(t, 5*time.Second, "agent-0 free", func() bool { return edgetest.Pod(t, e.admin, "agent-0").Lease == "" })

	// A rate Exotel does not stream at is refused before serving.
	bad := edgetest.WriteFile(t, "bad.yaml", "providers:\n  plugins:\n    exotel: {settings: {sample_rate_by_merchant: 'hd=44100'}}\n")
	var stderr bytes.Buffer
	cmd := exec.Command(f.bin, "check-config", "--config", bad)
	cmd.Stderr = &stderr
	var exit *exec.ExitError
	if err := cmd.Run(); !errors.As(err, &exit) || exit.ExitCode() == 0 {
		t.Errorf("check-config of sample_rate_by_merchant hd=44100: %v, want a non-zero exit", err)
	}
	if want := `providers.plugins.exotel.settings.sample_rate_by_merchant: "44100" is not a sample rate Exotel streams at`; !strings.Contains(stderr.String(), want) {
		t.Errorf("check-config said:\n%s\nwant %s", stderr.String(), want)
	}
}

// e2eRawUpgrade sends a WebSocket opening handshake for target exactly as
// written (no client library normalises it) and returns the status.
func e2eRawUpgrade(t *testing.T, addr, target string) int {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(5 * time.Second))
	_, err = conn.Write([]byte("GET " + target + " HTTP/1.1\r\nHost: " + addr + "\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" +
		"Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n"))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("read the answer to %s: %v", target, err)
	}
	resp.Body.Close()
	return resp.StatusCode
}
