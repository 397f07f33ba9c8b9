package main

import (
	"crypto/hmac"
	"crypto/sha1"
	"encoding/base64"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strconv"
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
	testwait.Until(t, 60*time.Second, "edge ready", func() bool { return provGet(t, edge.AdminURL+"/readyz") == 200 })
	if strings.Contains(edge.Log(), token) {
		t.Error("the auth token is in edge's log")
	}

	path := "/api/v1/twilio/allocate?merchant_id=demo"
	webhook := func(callSid string, tok string) (int, string) {
		form := url.Values{"CallSid": {callSid}, "From": {"+15550100"}}
		req, _ := http.NewRequest("POST", edge.PublicURL+path, strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("X-Twilio-Signature", e2eTwilioSign(tok, "https://edge.example.com"+path, form))
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

	pid := provChildPID(t, edge.Pid(), "plugin twilio")
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	testwait.Until(t, 60*time.Second, "twilio plugin restarted", func() bool {
		np, ok := provFindChild(edge.Pid(), "plugin twilio")
		return ok && np != pid && provGet(t, edge.AdminURL+"/readyz") == 200
	})
	if status, body := webhook("CA0000000000000000000000000000e2e3", token); status != 200 || !strings.Contains(body, "<Stream") {
		t.Errorf("webhook after the restart: %d %s", status, body)
	}
	for _, name := range []string{"plivo", "exotel", "telnyx"} {
		if _, ok := provFindChild(edge.Pid(), "plugin "+name); !ok {
			t.Errorf("no %s plugin process", name)
		}
	}
}

func e2eTwilioSign(token, u string, form url.Values) string {
	names := make([]string, 0, len(form))
	for n := range form {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		u += n + form.Get(n)
	}
	mac := hmac.New(sha1.New, []byte(token))
	mac.Write([]byte(u))
	return base64.StdEncoding.EncodeToString(mac.Sum(nil))
}

func provGet(t *testing.T, u string) int {
	resp, err := http.Get(u)
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

func provChildPID(t *testing.T, parent int, cmdline string) int {
	t.Helper()
	var pid int
	testwait.Until(t, 60*time.Second, cmdline+" process", func() bool {
		var ok bool
		pid, ok = provFindChild(parent, cmdline)
		return ok
	})
	return pid
}

// provFindChild finds a child process of parent whose command line contains s.
func provFindChild(parent int, s string) (int, bool) {
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, st := range stats {
		data, err := os.ReadFile(st)
		if err != nil {
			continue
		}
		rest := string(data[strings.LastIndexByte(string(data), ')')+2:])
		f := strings.Fields(rest)
		if len(f) < 2 || f[1] != strconv.Itoa(parent) || f[0] == "Z" {
			continue
		}
		dir := filepath.Dir(st)
		cmd, _ := os.ReadFile(filepath.Join(dir, "cmdline"))
		if strings.Contains(strings.ReplaceAll(string(cmd), "\x00", " "), s) {
			pid, _ := strconv.Atoi(filepath.Base(dir))
			return pid, true
		}
	}
	return 0, false
}
