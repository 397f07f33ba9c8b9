package main

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/edge-voice/edge/internal/edgetest"
	"github.com/edge-voice/edge/internal/testwait"
)

// Two Twilio accounts configured as accounts, through the binary, its
// built-in Twilio plugin process, a real redis-server and a fake agent.
// Account 2's signed "completed" callback for account 1's live call is
// refused 403, and the call stays what the outside sees: its media socket
// relays on past two lease renewals (which a call its provider ended no
// longer gets), its timeline says live, account 1's, not ended. Account 2
// gets no pod for acme, the merchant bound to account 1, and no media URL
// for account 1's call; account 1's own callback ends the call.
func TestAnotherTwilioAccountCannotEndALiveCallEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs edge processes")
	}
	const (
		acct1, tok1 = "AC11111111111111111111111111111111", "e2e-account-1-token"
		acct2, tok2 = "AC22222222222222222222222222222222", "e2e-account-2-token"
	)
	f := newE2E(t)
	ag := mediaAgent(t)
	r := f.start("edge-acct", f.config("edge.yaml", fmt.Sprintf(`
tiers: {gold: {type: exclusive, target: 2}}
default_chain: [gold]
leader: {identity: edge-acct}
allocator: {lease_ttl: 6s, renew_interval: 1s}
providers:
  webhook_base_url: https://edge.example.com
  plugins:
    twilio:
      accounts:
        %s: {auth_tokens: [%s], merchants: [acme]}
        %s: {auth_tokens: %s}
`, acct1, tok1, acct2, tok2)+podsYAML("gold", "pod-a", ag.Addr(), "pod-b", ag.Addr())))
	for _, pod := range []string{"pod-a", "pod-b"} {
		testwait.Until(t, 10*time.Second, pod+" registered", func() bool { return edgetest.Pod(t, r.admin, pod).Status == "available" })
	}
	post := func(token, account, path string, form url.Values) (int, string) {
		t.Helper()
		form.Set("AccountSid", account)
		req, _ := http.NewRequest(http.MethodPost, r.public+path, strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("X-Twilio-Signature", edgetest.TwilioSign(token, "https://edge.example.com"+path, form))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	const allocate = "/api/v1/twilio/allocate?merchant_id=acme"
	// The plugin process may still be starting: a call to probe it, ended
	// by its account so that its pod is free again.
	const probe = "CA0000000000000000000000000000ac00"
	testwait.Until(t, 30*time.Second, "the twilio plugin answering", func() bool {
		st, _ := post(tok1, acct1, allocate, url.Values{"CallSid": {probe}})
		return st == http.StatusOK
	})
	if st, b := post(tok1, acct1, "/api/v1/twilio/status", url.Values{"CallSid": {probe}, "CallStatus": {"completed"}}); st != http.StatusNoContent {
		t.Fatalf("probe call's callback: %d %s", st, b)
	}

	const sid = "CA0000000000000000000000000000ac01"
	status, body := post(tok1, acct1, allocate, url.Values{"CallSid": {sid}})
	m := statusStreamURL.FindStringSubmatch(body)
	if status != http.StatusOK || m == nil {
		t.Fatalf("account 1's webhook: %d %s", status, body)
	}
	c := mediaDial(t, mediaOn(r, m[1]))
	mediaStream(t, c, sid, 5)

	if st, b := post(tok2, acct2, "/api/v1/twilio/status", url.Values{"CallSid": {sid}, "CallStatus": {"completed"}}); st != http.StatusForbidden {
		t.Errorf("account 2's completed callback for account 1's call: %d %s, want 403", st, b)
	}
	if st, b := post(tok2, acct2, "/api/v1/twilio/allocate", url.Values{"CallSid": {sid}}); st != http.StatusForbidden || strings.Contains(b, "wss://") {
		t.Errorf("account 2's replay of account 1's call: %d %s, want 403 without a media URL", st, b)
	}
	// Two renewals: a call its provider ended would have lost its socket.
	time.Sleep(2500 * time.Millisecond)
	mediaStream(t, c, sid, 5)
	if call := mediaTimeline(t, r.admin, sid); call["state"] != "live" || call["ended_by"] != nil || call["account"] != acct1 {
		t.Errorf("timeline after account 2's callback = %v, want live, account 1's, not ended", call)
	}

	// acme is bound to account 1: account 2 gets the hangup, and no pod.
	st, b := post(tok2, acct2, allocate, url.Values{"CallSid": {"CA0000000000000000000000000000ac02"}})
	if st != http.StatusOK || !strings.Contains(b, "<Hangup>") || strings.Contains(b, "<Stream") {
		t.Errorf("account 2's webhook for acme: %d %s, want the hangup markup", st, b)
	}
	free := 0
	for _, pod := range []string{"pod-a", "pod-b"} {
		if edgetest.Pod(t, r.admin, pod).Status == "available" {
			free++
		}
	}
	if free != 1 {
		t.Errorf("%d pods available after account 2's refused webhook, want 1 (the other holds account 1's call)", free)
	}

	if st, b := post(tok1, acct1, "/api/v1/twilio/status", url.Values{"CallSid": {sid}, "CallStatus": {"completed"}}); st != http.StatusNoContent {
		t.Fatalf("account 1's completed callback: %d %s", st, b)
	}
	if call := mediaTimeline(t, r.admin, sid); call["ended_by"] != "provider:completed" {
		t.Errorf("timeline after account 1's callback = %v", call)
	}
}

// A Twilio account named by something else than its AccountSid passes
// the config's own checks (a label is a label) but not the plugin's:
// check-config starts the real plugin and names the account's key,
// never its token.
func TestCheckConfigNamesATwilioAccountThatIsNotAnAccountSid(t *testing.T) {
	useBuiltEdge(t)
	cfg := edgetest.WriteFile(t, "accounts.yaml", "providers:\n  plugins:\n    twilio:\n      accounts:\n        sales: {auth_tokens: [secret-sales-token]}\n")
	var out bytes.Buffer
	err := run(t.Context(), []string{"check-config", "--config", cfg}, nil, &out, &out)
	want := "providers.plugins.twilio.accounts.sales.auth_tokens: a Twilio account is named by its AccountSid"
	if err == nil || !strings.Contains(err.Error(), want) || strings.Contains(err.Error()+out.String(), "secret-sales-token") {
		t.Errorf("check-config = %v\n%s\nwant an error with %q and no token", err, out.String(), want)
	}
}
