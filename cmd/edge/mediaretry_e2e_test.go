package main

import (
	"context"
	"encoding/json"
	"html"
	"io"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/edge-voice/edge/internal/edgetest"
	"github.com/edge-voice/edge/internal/testwait"
)

// TestProviderMediaRetryIsAdmitted runs a real edge with its built-in
// plugin processes against one pod whose port is closed. Exotel retries a
// failed media handshake once (its plugin declares it): after edge answers
// the first handshake 502, the retry dials again (502 while the pod stays
// closed, 101 once it listens) and is never refused 403; only the retry's
// failure ends the call. Twilio declares no retry: its call ends on the
// first 502 and a second handshake gets 403, as before.
func TestProviderMediaRetryIsAdmitted(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs edge processes")
	}
	f := newE2E(t)
	closed := e2eBroken(t, "closed", nil)
	e := f.start("edge", f.config("edge.yaml", `
allocator: {lease_ttl: 15s, renew_interval: 5s, call_info_ttl: 1h}
tiers: {gold: {type: exclusive, target: 1}}
default_chain: [gold]
proxy: {dial_timeout: 300ms, connect_budget: 2s, max_ejection_percent: 50}
`+podsYAML("gold", "x-closed", closed)))
	if !e.WaitReady(30 * time.Second) {
		t.Fatal("edge not ready with its plugins after 30s")
	}
	podFree := func(t *testing.T) {
		t.Helper()
		testwait.Until(t, 5*time.Second, "x-closed free", func() bool { return edgetest.Pod(t, e.admin, "x-closed").Lease == "" })
	}

	t.Run("twilio: no retry declared, the call ends on the first 502", func(t *testing.T) {
		ws := retryTwilioCall(t, e, "CA00000000000000000000000000000a01")
		if got := retryHandshake(t, ws); got != http.StatusBadGateway {
			t.Fatalf("first handshake: %d, want 502", got)
		}
		if got := retryHandshake(t, ws); got != http.StatusForbidden {
			t.Errorf("second handshake: %d, want 403 (the call ended)", got)
		}
		podFree(t)
	})

	t.Run("exotel: the retry dials again; its failure ends the call", func(t *testing.T) {
		ws := retryExotelCall(t, e, "ex-retry-1")
		if got := retryHandshake(t, ws); got != http.StatusBadGateway {
			t.Fatalf("first handshake: %d, want 502", got)
		}
		if p := edgetest.Pod(t, e.admin, "x-closed"); p.Lease != "ex-retry-1" {
			t.Errorf("after the first 502 x-closed is leased to %q, want the call kept for the retry", p.Lease)
		}
		if got := retryHandshake(t, ws); got != http.StatusBadGateway {
			t.Fatalf("Exotel's retry: %d, want 502 (dialled again, the pod still closed)", got)
		}
		if got := retryHandshake(t, ws); got != http.StatusForbidden {
			t.Errorf("a third handshake: %d, want 403 (the retry's failure ended the call)", got)
		}
		podFree(t)
	})

	t.Run("exotel: the retry reaches the pod once it listens", func(t *testing.T) {
		ws := retryExotelCall(t, e, "ex-retry-2")
		if got := retryHandshake(t, ws); got != http.StatusBadGateway {
			t.Fatalf("first handshake: %d, want 502", got)
		}
		// The pod comes up at its address between the two handshakes.
		ln, err := net.Listen("tcp", closed)
		if err != nil {
			t.Skipf("the closed pod's port was taken meanwhile: %v", err)
		}
		srv := &http.Server{Handler: mediaAgent(t)}
		go srv.Serve(ln)
		t.Cleanup(func() { srv.Close() })
		c := mediaDial(t, ws)
		mediaStream(t, c, "ex-retry-2", 5)
		c.Close(websocket.StatusNormalClosure, "")
		podFree(t)
	})
}

// retryHandshake opens a media socket and returns the status of its
// handshake's answer (101 when it opened; the socket is then closed).
func retryHandshake(t *testing.T, ws string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, resp, err := websocket.Dial(ctx, ws, nil)
	if err == nil {
		c.CloseNow()
		return http.StatusSwitchingProtocols
	}
	if resp == nil {
		t.Fatalf("open %s: %v", ws, err)
	}
	return resp.StatusCode
}

// retryExotelCall allocates a call through Exotel's Voicebot dynamic URL
// and returns its media URL on e.
func retryExotelCall(t *testing.T, e *mediaReplica, callID string) string {
	t.Helper()
	resp, err := http.Get(e.public + "/providers/exotel/voicebot?merchant_id=m&CallSid=" + url.QueryEscape(callID))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var ans struct{ URL string }
	if err := json.NewDecoder(resp.Body).Decode(&ans); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("exotel voicebot %s: %d %v", callID, resp.StatusCode, err)
	}
	return mediaOn(e, ans.URL)
}

var retryStreamURL = regexp.MustCompile(`<Stream url="([^"]+)"`)

// retryTwilioCall allocates a call through Twilio's webhook (no
// auth_tokens: unsigned) and returns its media URL on e.
func retryTwilioCall(t *testing.T, e *mediaReplica, callID string) string {
	t.Helper()
	resp, err := http.PostForm(e.public+"/api/v1/twilio/allocate", url.Values{"CallSid": {callID}, "merchant_id": {"m"}})
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	m := retryStreamURL.FindSubmatch(body)
	if resp.StatusCode != http.StatusOK || m == nil {
		t.Fatalf("twilio webhook %s: %d %s", callID, resp.StatusCode, body)
	}
	return mediaOn(e, html.UnescapeString(string(m[1])))
}
