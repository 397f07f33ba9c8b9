package main

import (
	"encoding/xml"
	"net/http"
	"net/url"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/edge-voice/edge/internal/edgetest"
)

// `edge ws --crash-pod-after` is how an operator tries proxy.resume by
// hand on the embedded default: the built-in fake agent drops the socket
// as a crashed pod does; with proxy.resume the call moves and the echoes
// go on to the stop, without it the command reports the 1014 edge closed
// the socket with.
func TestWSCrashPodAfterShowsTheMove(t *testing.T) {
	for _, resume := range []bool{true, false} {
		env := []string{}
		if resume {
			env = append(env, `EDGE_PROXY__RESUME__TIERS=["*"]`)
		}
		edge := edgetest.Start(t, nil, env...)
		if !edge.WaitReady(60 * time.Second) {
			t.Fatal("edge not ready after 60s")
		}
		out, err := exec.Command(edgetest.Binary(t), "ws", "-n", "6", "--crash-pod-after", "2", twilioStreamURL(t, edge.PublicURL)).CombinedOutput()
		got := string(out)
		switch {
		case resume && (err != nil || !strings.Contains(got, `edge gave it the stream's "start" again`) || !strings.Contains(got, `"event":"stop"`) ||
			!strings.Contains(got, `edge told the provider to drop the dead pod's queued audio: {"event":"clear","streamSid":"MZdemo"}`)):
			t.Errorf("with proxy.resume: %v\n%s", err, got)
		case !resume && (err == nil || !strings.Contains(got, "pod lost") || strings.Contains(got, "another pod took the call")):
			t.Errorf("without proxy.resume: %v\n%s", err, got)
		}
		edge.Stop(10 * time.Second)
	}
}

// twilioStreamURL places a Twilio call on an edge whose webhooks need no
// signature (the embedded default) and returns its <Stream> URL.
func twilioStreamURL(t *testing.T, public string) string {
	t.Helper()
	resp, err := http.PostForm(public+"/api/v1/twilio/allocate?merchant_id=demo", url.Values{"CallSid": {"CA0000000000000000000000000000ab01"}})
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var twiml struct {
		Stream struct {
			URL string `xml:"url,attr"`
		} `xml:"Connect>Stream"`
	}
	if err := xml.NewDecoder(resp.Body).Decode(&twiml); err != nil || twiml.Stream.URL == "" {
		t.Fatalf("the webhook answered %s: %v", resp.Status, err)
	}
	// The answer names the configured listener (port 0 here): the media
	// goes to the port it bound.
	u := twiml.Stream.URL
	return "ws" + strings.TrimPrefix(public, "http") + u[strings.Index(u, "/ws/"):]
}
