package main

import (
	"context"
	"html"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// TestPodSeesWhatTheTwilioPluginDeclares runs the edge binary with its
// built-in Twilio plugin: the plugin's declaration of the stream's upgrade
// (X-Twilio-Signature) crosses the plugin process to the proxy, so the pod
// reads Twilio's signature and nothing else the client sent (no cookie,
// Authorization, compression offer), and a query the URL was not minted
// with is refused before the pod.
func TestPodSeesWhatTheTwilioPluginDeclares(t *testing.T) {
	if testing.Short() {
		t.Skip("runs an edge process")
	}
	f := newE2E(t)
	agent := mediaAgent(t)
	e := f.start("edge", f.config("edge.yaml", `
tiers: {gold: {type: exclusive, target: 1}}
default_chain: [gold]
`+podsYAML("gold", "agent-0", agent.Addr())))
	if !e.WaitReady(30 * time.Second) {
		t.Fatal("edge not ready with its plugins after 30s")
	}

	resp, err := http.PostForm(e.public+"/api/v1/twilio/allocate", url.Values{"CallSid": {"CA00000000000000000000000000b0d001"}, "merchant_id": {"m"}})
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	m := retryStreamURL.FindSubmatch(body)
	if resp.StatusCode != http.StatusOK || m == nil {
		t.Fatalf("twilio webhook: %d %s", resp.StatusCode, body)
	}
	ws := mediaOn(e, html.UnescapeString(string(m[1])))
	target := strings.TrimPrefix(ws, "ws"+strings.TrimPrefix(e.public, "http"))
	if got := e2eRawUpgrade(t, strings.TrimPrefix(e.public, "http://"), target+"?sample-rate=44100"); got != http.StatusBadRequest {
		t.Errorf("a query the URL was not minted with: %d, want 400", got)
	}
	if n := agent.Sockets.Load(); n != 0 {
		t.Fatalf("the pod got %d sockets from a refused URL", n)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, up, err := websocket.Dial(ctx, ws, &websocket.DialOptions{CompressionMode: websocket.CompressionContextTakeover,
		HTTPHeader: http.Header{"X-Twilio-Signature": {"c2lnbmVk"}, "Cookie": {"s=1"}, "Authorization": {"Bearer x"}, "Origin": {"https://evil.example"}}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseNow()
	if ext := up.Header.Get("Sec-WebSocket-Extensions"); ext != "" {
		t.Errorf("the client negotiated %q through edge", ext)
	}
	mediaStream(t, c, "CA00000000000000000000000000b0d001", 3)
	h := agent.Headers()[0]
	if h.Get("X-Twilio-Signature") != "c2lnbmVk" {
		t.Errorf("the pod's X-Twilio-Signature = %q, want Twilio's, which the plugin declares", h.Get("X-Twilio-Signature"))
	}
	for _, name := range []string{"Cookie", "Authorization", "Origin", "Sec-Websocket-Extensions", "User-Agent"} {
		if v := h.Values(name); len(v) != 0 {
			t.Errorf("the pod read the client's %s %q", name, v)
		}
	}
	c.Close(websocket.StatusNormalClosure, "")
}
