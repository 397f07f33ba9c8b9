package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/edge-voice/edge/internal/edgetest"
	"github.com/edge-voice/edge/internal/testwait"
)

// A whole call through the binary leaves its thread: at info,
// the media socket's open and close lines name the call, merchant, pod
// and replica; `edge admin call` shows the call's timeline, live and then
// ended, with every stamp and the socket's counters; `edge admin calls`
// lists a pod's live calls; an unknown call is a bare 404.
func TestCallTimelineEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs edge processes")
	}
	f := newE2E(t)
	ag := mediaAgent(t)
	r := f.start("edge-t", f.config("edge.yaml", `
allocator: {call_info_ttl: 1h}
tiers: {gold: {type: exclusive, target: 1}}
default_chain: [gold]
leader: {identity: edge-t}
`+podsYAML("gold", "pod-a", ag.Addr())))
	admin := func(args ...string) (map[string]any, string, error) {
		var out, errOut bytes.Buffer
		err := run(context.Background(), append([]string{"admin", "--url", r.admin, "-o", "json"}, args...), nil, &out, &errOut)
		var v map[string]any
		json.Unmarshal(out.Bytes(), &v)
		return v, out.String() + errOut.String(), err
	}

	var ans struct {
		PodName string `json:"pod_name"`
		WSURL   string `json:"ws_url"`
	}
	testwait.Until(t, 10*time.Second, "pod-a registered", func() bool { return edgetest.Pod(t, r.admin, "pod-a").Status != "" })
	if st := mediaPost(t, r.public+"/api/v1/allocate", `{"call_sid":"CA-tl","merchant_id":"m1"}`, &ans); st != http.StatusOK {
		t.Fatalf("allocate: %d", st)
	}
	c := mediaDial(t, mediaOn(r, ans.WSURL))
	mediaStream(t, c, "CA-tl", 10)

	live, text, err := admin("call", "CA-tl")
	if err != nil {
		t.Fatalf("edge admin call (live): %v\n%s", err, text)
	}
	call, _ := live["call"].(map[string]any)
	if call["state"] != "live" || call["merchant_id"] != "m1" || call["creator"] != "token:tests" ||
		call["pod_name"] != "pod-a" || call["source_pool"] != "pool:gold" || call["allocated_at"] == nil ||
		call["socket_opened_at"] == nil || !ofReplica(call["socket_replica"], "edge-t") {
		t.Errorf("live timeline = %s", text)
	}
	if list, text, err := admin("calls", "pod-a"); err != nil || fmt.Sprint(list["calls"]) != "[CA-tl]" {
		t.Errorf("edge admin calls pod-a = %s, %v", text, err)
	}

	c.Close(websocket.StatusNormalClosure, "bye")
	testwait.Until(t, 5*time.Second, "pod-a back in its pool", func() bool {
		return edgetest.Pod(t, r.admin, "pod-a").Status == "available"
	})
	ended, text, err := admin("call", "CA-tl")
	if err != nil {
		t.Fatalf("edge admin call (ended): %v\n%s", err, text)
	}
	call, _ = ended["call"].(map[string]any)
	relayed, _ := call["relayed"].(map[string]any)
	if call["state"] != "ended" || call["how"] != "released" || call["released_by"] != "socket" ||
		call["socket_end"] != "socket_close" || call["closed_by"] != "client" || call["close_code"] != "1000" ||
		call["merchant_id"] != "m1" || call["pod_name"] != "pod-a" || !ofReplica(call["socket_replica"], "edge-t") ||
		call["allocated_at"] == nil || call["socket_opened_at"] == nil || call["socket_closed_at"] == nil || call["ended_at"] == nil ||
		relayed["messages_in"] != 10.0 || relayed["messages_out"] != 10.0 ||
		relayed["bytes_in"].(float64) < 10*200 || relayed["bytes_out"].(float64) < 10*200 {
		t.Errorf("ended timeline = %s", text)
	}
	for _, secret := range []string{edgetest.APIToken, "media_claim", strings.Repeat("s", 32)} {
		if strings.Contains(text, secret) {
			t.Errorf("the timeline shows %q: %s", secret, text)
		}
	}
	if list, text, err := admin("calls", "pod-a"); err != nil || fmt.Sprint(list["calls"]) != "[]" {
		t.Errorf("edge admin calls pod-a after the call = %s, %v", text, err)
	}

	// An unknown call: 404 and the error, nothing else; a bad id: 400.
	resp, err := http.Get(r.admin + "/api/v1/calls/CA-never")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound || strings.TrimSpace(string(body)) != `{"code":"call_not_found","error":"call not found","success":false}` {
		t.Errorf("unknown call = %d %s", resp.StatusCode, body)
	}
	if _, text, err := admin("call", "bad:id"); err == nil || !strings.Contains(err.Error(), "invalid id") {
		t.Errorf("edge admin call bad:id = %s, %v", text, err)
	}

	// The log thread at info: one line at the socket's open, one at its
	// close, each naming the call, merchant, pod and replica.
	testwait.Until(t, 5*time.Second, "the socket's close logged", func() bool {
		return strings.Contains(r.Log(), `"msg":"media socket closed"`)
	})
	var opened, closed int
	for _, ln := range strings.Split(r.Log(), "\n") {
		var l map[string]any
		if json.Unmarshal([]byte(ln), &l) != nil || l["call_sid"] != "CA-tl" {
			continue
		}
		switch l["msg"] {
		case "media socket opened", "media socket closed":
			if l["merchant_id"] != "m1" || l["pod"] != "pod-a" || l["replica"] != "edge-t" {
				t.Errorf("line lacks the call's fields: %s", ln)
			}
			if l["msg"] == "media socket opened" {
				opened++
			} else {
				closed++
			}
		}
	}
	if opened != 1 || closed != 1 {
		t.Errorf("opened %d, closed %d lines; want one each:\n%s", opened, closed, r.Log())
	}
}

// ofReplica reports whether a socket_replica names a process of replica:
// "<replica>/<process id>".
func ofReplica(v any, replica string) bool {
	s, _ := v.(string)
	return strings.HasPrefix(s, replica+"/") && len(s) > len(replica)+1
}
