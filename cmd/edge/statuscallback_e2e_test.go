package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/edge-voice/edge/internal/edgetest"
	"github.com/edge-voice/edge/internal/testwait"
)

var statusStreamURL = regexp.MustCompile(`<Stream url="([^"]+)"`)

// A Twilio caller who hangs up before the media stream starts, through the
// binary, its built-in Twilio plugin process, a real redis-server and a
// fake agent: the answer names the stream's status callback, the signed
// "completed" callback puts the pod back in its pool before it is
// answered (the pod is available on the next read, well under a second,
// where the lease and the sweep took 60-90 s), the late media socket is
// refused, and the timeline says who ended the call.
func TestTwilioHangupBeforeStreamFreesThePodEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs edge processes")
	}
	r, post := statusEdge(t, "")
	const sid = "CA0000000000000000000000000000a5e1"
	status, body := post("/api/v1/twilio/allocate", url.Values{"CallSid": {sid}, "From": {"+15550100"}})
	m := statusStreamURL.FindStringSubmatch(body)
	if status != http.StatusOK || m == nil || !strings.Contains(body, `statusCallback="https://edge.example.com/api/v1/twilio/status"`) {
		t.Fatalf("webhook: %d %s", status, body)
	}
	if p := edgetest.Pod(t, r.admin, "pod-a"); p.Status != "allocated" || p.CallID != sid {
		t.Fatalf("pod-a after the webhook = %+v", p)
	}

	start := time.Now()
	if st, b := post("/api/v1/twilio/status", url.Values{"CallSid": {sid}, "CallStatus": {"completed"}, "CallDuration": {"0"}}); st != http.StatusNoContent {
		t.Fatalf("completed callback: %d %s", st, b)
	}
	p := edgetest.Pod(t, r.admin, "pod-a")
	took := time.Since(start)
	if p.Status != "available" || took > time.Second {
		t.Fatalf("pod-a %v after the completed callback = %+v, want available within 1s", took, p)
	}
	t.Logf("pod back in its pool %v after the signed completed callback was sent", took)

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if c, resp, err := websocket.Dial(ctx, mediaOn(r, m[1]), nil); err == nil {
		c.CloseNow()
		t.Error("the late media socket of the ended call was admitted")
	} else if resp == nil || resp.StatusCode != http.StatusForbidden {
		t.Errorf("late media socket: %v, %+v; want 403 (no allocation)", err, resp)
	}
	call := mediaTimeline(t, r.admin, sid)
	if call["state"] != "ended" || call["released_by"] != "provider" || call["ended_by"] != "provider:completed" {
		t.Errorf("timeline = %v", call)
	}
}

// With the media socket open, Twilio's completed callback releases nothing
// (the stream goes on until Twilio closes it) but a replayed webhook is
// told the call ended; a socket Twilio never closes is closed by edge at
// the call's next lease renewal, which it no longer gets, and its end
// releases the pod with the provider named on the timeline.
func TestTwilioCallbackWithSocketOpenEndsAtTheNextRenewal(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs edge processes")
	}
	r, post := statusEdge(t, "allocator: {lease_ttl: 6s, renew_interval: 1s}\n")
	const sid = "CA0000000000000000000000000000a5e2"
	status, body := post("/api/v1/twilio/allocate", url.Values{"CallSid": {sid}})
	m := statusStreamURL.FindStringSubmatch(body)
	if status != http.StatusOK || m == nil {
		t.Fatalf("webhook: %d %s", status, body)
	}
	c := mediaDial(t, mediaOn(r, m[1]))
	mediaStream(t, c, sid, 5)

	if st, b := post("/api/v1/twilio/status", url.Values{"CallSid": {sid}, "CallStatus": {"completed"}}); st != http.StatusNoContent {
		t.Fatalf("completed callback: %d %s", st, b)
	}
	if p := edgetest.Pod(t, r.admin, "pod-a"); p.Status != "allocated" {
		t.Fatalf("pod-a released under an open socket: %+v", p)
	}
	if call := mediaTimeline(t, r.admin, sid); call["state"] != "live" || call["ended_by"] != "provider:completed" {
		t.Errorf("timeline with the socket open = %v", call)
	}
	if st, b := post("/api/v1/twilio/allocate", url.Values{"CallSid": {sid}}); st != http.StatusOK || !strings.Contains(b, "This call has ended.") {
		t.Errorf("replayed webhook while the socket is open: %d %s", st, b)
	}

	// The provider never closes: edge does, at the next renewal.
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for {
		if _, _, err := c.Read(ctx); err != nil {
			if ctx.Err() != nil {
				t.Fatalf("the socket was still open %v after the callback", time.Since(start))
			}
			break
		}
	}
	t.Logf("edge closed the socket %v after the callback", time.Since(start))
	testwait.Until(t, 5*time.Second, "pod-a back in its pool", func() bool { return edgetest.Pod(t, r.admin, "pod-a").Status == "available" })
	call := mediaTimeline(t, r.admin, sid)
	if call["state"] != "ended" || call["released_by"] != "socket" || call["ended_by"] != "provider:completed" || call["socket_end"] != "lease_lost" {
		t.Errorf("timeline after the socket's end = %v", call)
	}
}

// mediaTimeline reads a call's timeline from the admin API.
func mediaTimeline(t *testing.T, admin, callID string) map[string]any {
	t.Helper()
	resp, err := http.Get(admin + "/api/v1/calls/" + callID)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct{ Call map[string]any }
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		t.Fatal(err)
	}
	return body.Call
}

// statusEdge runs the binary with the Twilio plugin verifying statusToken,
// a webhook base, a real redis-server and one fake agent (pod-a), waits
// until the plugin answers, and returns the replica and a signed poster.
func statusEdge(t *testing.T, extraYAML string) (*mediaReplica, func(path string, form url.Values) (int, string)) {
	t.Helper()
	f := newE2E(t)
	ag := mediaAgent(t)
	r := f.start("edge-s", f.config("edge.yaml", fmt.Sprintf(`
tiers: {gold: {type: exclusive, target: 1}}
default_chain: [gold]
leader: {identity: edge-s}
providers:
  webhook_base_url: https://edge.example.com
  plugins:
    twilio: {auth_tokens: %q}
`, statusToken)+podsYAML("gold", "pod-a", ag.Addr())+extraYAML))
	testwait.Until(t, 10*time.Second, "pod-a registered", func() bool { return edgetest.Pod(t, r.admin, "pod-a").Status == "available" })
	post := func(path string, form url.Values) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, r.public+path, strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("X-Twilio-Signature", edgetest.TwilioSign(statusToken, "https://edge.example.com"+path, form))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	// The plugin process may still be starting: a call to probe it, ended
	// the same way so that pod-a is free again.
	const probe = "CA0000000000000000000000000000a5e0"
	testwait.Until(t, 30*time.Second, "the twilio plugin answering", func() bool {
		st, _ := post("/api/v1/twilio/allocate", url.Values{"CallSid": {probe}})
		return st == http.StatusOK
	})
	if st, _ := post("/api/v1/twilio/status", url.Values{"CallSid": {probe}, "CallStatus": {"completed"}}); st != http.StatusNoContent {
		t.Fatalf("probe call's callback: %d", st)
	}
	return r, post
}

const statusToken = "e2e-status-token"
