package main

import (
	"io"
	"net/http"
	"net/url"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/edge-voice/edge/internal/edgetest"
	"github.com/edge-voice/edge/internal/testwait"
)

// TestBuiltinProvidersAsPluginProcesses runs the real edge binary with no
// provider config but a Twilio token: the built-ins run as `edge plugin
// <name>` child processes; a signed webhook is answered with TwiML, a
// forged one refused; the twilio plugin process is killed and the next
// webhook succeeds once edge has restarted it.
func TestBuiltinProvidersAsPluginProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs edge processes")
	}
	const token = "e2e-twilio-token"
	edge := edgetest.Start(t, nil,
		"EDGE_PROVIDERS__PLUGINS__TWILIO__AUTH_TOKENS="+token,
		"EDGE_PROVIDERS__WEBHOOK_BASE_URL=https://edge.example.com")
	if !edge.WaitReady(60 * time.Second) {
		t.Fatal("edge not ready after 60s")
	}
	if strings.Contains(edge.Log(), token) {
		t.Error("the auth token is in edge's log")
	}

	path := "/api/v1/twilio/allocate?merchant_id=demo"
	webhook := func(callSid string, tok string) (int, string) {
		form := url.Values{"CallSid": {callSid}, "From": {"+15550100"}}
		req, _ := http.NewRequest("POST", edge.PublicURL+path, strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("X-Twilio-Signature", edgetest.TwilioSign(tok, "https://edge.example.com"+path, form))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if status, body := webhook("CA0000000000000000000000000000e2e1", token); status != 200 || !strings.Contains(body, "<Connect><Stream url=\"ws://") {
		t.Fatalf("signed webhook: %d %s", status, body)
	}
	if status, _ := webhook("CA0000000000000000000000000000e2e2", "forged"); status != 403 {
		t.Errorf("forged webhook: %d", status)
	}

	pid := edgetest.ChildPID(t, edge.Pid(), "plugin twilio")
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	testwait.Until(t, 60*time.Second, "twilio plugin restarted", func() bool {
		np, ok := edgetest.FindChild(edge.Pid(), "plugin twilio")
		return ok && np != pid && provGet(t, edge.AdminURL+"/readyz") == 200
	})
	if status, body := webhook("CA0000000000000000000000000000e2e3", token); status != 200 || !strings.Contains(body, "<Stream") {
		t.Errorf("webhook after the restart: %d %s", status, body)
	}
	for _, name := range []string{"plivo", "exotel", "telnyx"} {
		if _, ok := edgetest.FindChild(edge.Pid(), "plugin "+name); !ok {
			t.Errorf("no %s plugin process", name)
		}
	}
}

func provGet(t *testing.T, u string) int {
	resp, err := http.Get(u)
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}
