package main

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"fmt"
	"html"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/edge-voice/edge/internal/edgetest"
	"github.com/edge-voice/edge/internal/testwait"
)

// TestTelnyxEndToEnd runs the real edge binary, its built-in telnyx plugin
// process and a real Redis, with one fake voice agent as the pod. A TeXML
// voice webhook signed with Ed25519 (a key of the test's own: Telnyx's
// private key never leaves Telnyx) allocates the pod and is answered with
// <Connect><Stream url>; a bad signature, a stale timestamp and a replay
// of the signed webhook are refused 403 without allocating; Telnyx's
// opening messages and media frames on the streamed URL reach the pod and
// are echoed back; the socket's close frees the pod.
func TestTelnyxEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs edge processes")
	}
	key := ed25519.NewKeyFromSeed([]byte("telnyx-e2e-account-key-seed-32b!"))
	forger := ed25519.NewKeyFromSeed([]byte("telnyx-e2e-forger-key-seed-32by!"))
	f := newE2E(t)
	agent := mediaAgent(t)
	e := f.start("edge", f.config("edge.yaml", fmt.Sprintf(`
allocator: {lease_ttl: 15s, renew_interval: 5s, call_info_ttl: 1h}
tiers: {gold: {type: exclusive, target: 1}}
default_chain: [gold]
providers:
  webhook_base_url: https://edge.example.com
  plugins:
    telnyx:
      auth_tokens: [%s]
`, base64.StdEncoding.EncodeToString(key.Public().(ed25519.PublicKey)))+podsYAML("gold", "t-pod", agent.Addr())))
	if !e.WaitReady(30 * time.Second) {
		t.Fatal("edge not ready with its plugins after 30s")
	}

	const sid = "v3:e2eTelnyxCallControlId_0123456789-abcdefghijklmnopq"
	const callID = "v3.e2eTelnyxCallControlId_0123456789-abcdefghijklmnopq"
	body := "AccountSid=acct&CallSid=" + sid + "&From=%2B15550100&To=%2B15550199"
	now := time.Now()

	if status, ans := telnyxWebhook(t, e, forger, now, body); status != http.StatusForbidden {
		t.Errorf("webhook signed with another key: %d %s, want 403", status, ans)
	}
	if status, ans := telnyxWebhook(t, e, key, now.Add(-10*time.Minute), body); status != http.StatusForbidden {
		t.Errorf("webhook signed 10 minutes ago: %d %s, want 403", status, ans)
	}
	if p := edgetest.Pod(t, e.admin, "t-pod"); p.Lease != "" {
		t.Fatalf("a refused webhook leased the pod to %q", p.Lease)
	}

	status, ans := telnyxWebhook(t, e, key, now, body)
	m := telnyxStreamURL.FindStringSubmatch(ans)
	if status != http.StatusOK || m == nil {
		t.Fatalf("signed webhook: %d %s", status, ans)
	}
	if p := edgetest.Pod(t, e.admin, "t-pod"); p.Lease != callID {
		t.Fatalf("after the signed webhook t-pod is leased to %q, want %q", p.Lease, callID)
	}
	if status, ans := telnyxWebhook(t, e, key, now, body); status != http.StatusForbidden || !strings.Contains(ans, "replayed") {
		t.Errorf("the same signed webhook again: %d %s, want 403 replayed", status, ans)
	}

	c := mediaDial(t, mediaOn(e, html.UnescapeString(m[1])))
	telnyxStream(t, c, sid, 25)
	c.Close(websocket.StatusNormalClosure, "")
	testwait.Until(t, 5*time.Second, "t-pod free after the socket closed", func() bool { return edgetest.Pod(t, e.admin, "t-pod").Lease == "" })
	if got := agent.Paths(); len(got) != 1 {
		t.Errorf("the pod saw sockets %q, want one", got)
	}

	// A caller who hangs up before the stream opens: the answer names the
	// stream's status callback, and Telnyx's signed call-progress callback
	// "completed" gives the pod back before it is answered; the stream's
	// URL is refused from then on.
	const hungUp = "v3:e2eTelnyxHangupBeforeTheStream_0123456789"
	body = "AccountSid=acct&CallSid=" + hungUp + "&From=%2B15550100&To=%2B15550199"
	status, ans = telnyxWebhook(t, e, key, time.Now(), body)
	m = telnyxStreamURL.FindStringSubmatch(ans)
	if status != http.StatusOK || m == nil || !strings.Contains(ans, `statusCallback="https://edge.example.com/api/v1/telnyx/status"`) {
		t.Fatalf("signed webhook: %d %s, want a stream naming its status callback", status, ans)
	}
	if p := edgetest.Pod(t, e.admin, "t-pod"); p.Lease != "v3.e2eTelnyxHangupBeforeTheStream_0123456789" {
		t.Fatalf("t-pod is leased to %q", p.Lease)
	}
	if status, ans := telnyxPost(t, e, key, "/api/v1/telnyx/status", time.Now(), body+"&CallStatus=in-progress"); status != http.StatusNoContent {
		t.Fatalf("in-progress callback: %d %s", status, ans)
	}
	if p := edgetest.Pod(t, e.admin, "t-pod"); p.Lease == "" {
		t.Fatal("an in-progress callback freed the pod")
	}
	sent := time.Now()
	if status, ans := telnyxPost(t, e, key, "/api/v1/telnyx/status", time.Now(), body+"&CallStatus=completed&CallbackSource=call-progress-events"); status != http.StatusNoContent {
		t.Fatalf("completed callback: %d %s", status, ans)
	}
	answered := time.Since(sent)
	if p := edgetest.Pod(t, e.admin, "t-pod"); p.Lease != "" || p.Status != "available" {
		t.Fatalf("after the completed callback t-pod is %+v, want it back in its pool", p)
	}
	t.Logf("pod back in its pool %v after the signed hangup callback was sent (answered after the release)", answered)
	if got := retryHandshake(t, mediaOn(e, html.UnescapeString(m[1]))); got != http.StatusForbidden {
		t.Errorf("the ended call's stream: %d, want 403", got)
	}
}

// telnyxPost posts a form to path signed as Telnyx signs it.
func telnyxPost(t *testing.T, e *mediaReplica, key ed25519.PrivateKey, path string, at time.Time, body string) (int, string) {
	t.Helper()
	ts := strconv.FormatInt(at.Unix(), 10)
	req, err := http.NewRequest(http.MethodPost, e.public+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Telnyx-Timestamp", ts)
	req.Header.Set("Telnyx-Signature-Ed25519", base64.StdEncoding.EncodeToString(ed25519.Sign(key, []byte(ts+"|"+body))))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

var telnyxStreamURL = regexp.MustCompile(`<Connect><Stream url="([^"]+)"`)

// telnyxWebhook posts a TeXML voice webhook signed as Telnyx signs it:
// Ed25519 over "<unix seconds>|<raw body>", both in headers.
func telnyxWebhook(t *testing.T, e *mediaReplica, key ed25519.PrivateKey, at time.Time, body string) (int, string) {
	t.Helper()
	return telnyxPost(t, e, key, "/api/v1/telnyx/allocate?merchant_id=m", at, body)
}

// telnyxStream sends Telnyx's media stream as its WebSocket reference
// gives it (connected, start naming the call, n media frames of 20 ms of
// PCMU, stop) and checks each message's echo, in order.
func telnyxStream(t *testing.T, c *websocket.Conn, callSid string, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	const stream = "32de0dea-53cb-4b21-89a4-9e1819c043bc"
	payload := base64.StdEncoding.EncodeToString(make([]byte, 160))
	msgs := []string{
		`{"event":"connected","version":"1.0.0"}`,
		fmt.Sprintf(`{"event":"start","sequence_number":"1","start":{"user_id":"u","call_control_id":%q,"client_state":null,"media_format":{"encoding":"PCMU","sample_rate":8000,"channels":1}},"stream_id":%q}`, callSid, stream),
	}
	for i := range n {
		msgs = append(msgs, fmt.Sprintf(`{"event":"media","sequence_number":"%d","media":{"track":"inbound","chunk":"%d","timestamp":"%d","payload":%q},"stream_id":%q}`, i+2, i+1, i*20, payload, stream))
	}
	msgs = append(msgs, fmt.Sprintf(`{"event":"stop","sequence_number":"%d","stop":{"user_id":"u","call_control_id":%q},"stream_id":%q}`, n+2, callSid, stream))
	for i, msg := range msgs {
		if err := c.Write(ctx, websocket.MessageText, []byte(msg)); err != nil {
			t.Fatalf("write message %d: %v", i, err)
		}
		_, got, err := c.Read(ctx)
		if err != nil {
			t.Fatalf("read echo %d: %v", i, err)
		}
		if string(got) != msg {
			t.Fatalf("echo %d = %.80s, want %.80s", i, got, msg)
		}
	}
}

// A Telnyx key that is not one (a truncated paste, the API key instead of
// the public key) fails check-config naming the item, not its value: the
// real binary starts the telnyx plugin, which parses its keys.
func TestCheckConfigRefusesATelnyxKeyThatIsNotOne(t *testing.T) {
	good := base64.StdEncoding.EncodeToString(ed25519.NewKeyFromSeed([]byte("telnyx-check-account-key-seed-32")).Public().(ed25519.PublicKey))
	cfg := edgetest.WriteFile(t, "telnyx.yaml", "providers:\n  plugins:\n    telnyx: {auth_tokens: ["+good+", KEYabc123notakey]}\n")
	useBuiltEdge(t)
	var out bytes.Buffer
	err := run(t.Context(), []string{"check-config", "--config", cfg}, nil, &out, &out)
	want := "providers.plugins.telnyx.auth_tokens: item 2 is not a Telnyx public key"
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("check-config: %v, want %q", err, want)
	}
	if strings.Contains(err.Error()+out.String(), "KEYabc123notakey") {
		t.Errorf("check-config printed the refused value:\n%v\n%s", err, out.String())
	}
}
