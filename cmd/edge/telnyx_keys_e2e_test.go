package main

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"filippo.io/edwards25519"

	"github.com/edge-voice/edge/internal/edgetest"
	"github.com/edge-voice/edge/internal/testwait"
)

// smallOrderKey is 32 zero bytes as a Telnyx public key (43 "A" and "="):
// the encoding of a point of order 4 that crypto/ed25519 decodes, under
// which signatures are forged with no private key (forgeTelnyx).
var smallOrderKey = base64.StdEncoding.EncodeToString(make([]byte, ed25519.PublicKeySize))

// forgeTelnyx signs a voice webhook of callSid at time at under
// smallOrderKey, as anyone can: the check [S]B = R + [k]A holds for
// R = [S]B whenever [k]A is the identity, which for a point A of order 4
// is a quarter of the random S tried. Each forgery is a new signature, so
// the replay check never sees one twice.
func forgeTelnyx(t *testing.T, callSid string, at time.Time) (ts, sig, body string) {
	t.Helper()
	key := make(ed25519.PublicKey, ed25519.PublicKeySize)
	ts = strconv.FormatInt(at.Unix(), 10)
	body = "AccountSid=acct&CallSid=" + callSid + "&From=%2B15550100&To=%2B15550199"
	for range 1000 {
		b := make([]byte, 64)
		if _, err := rand.Read(b); err != nil {
			t.Fatal(err)
		}
		s, err := edwards25519.NewScalar().SetUniformBytes(b)
		if err != nil {
			t.Fatal(err)
		}
		forged := append(new(edwards25519.Point).ScalarBaseMult(s).Bytes(), s.Bytes()...)
		if ed25519.Verify(key, []byte(ts+"|"+body), forged) {
			return ts, base64.StdEncoding.EncodeToString(forged), body
		}
	}
	t.Fatal("no forgery in 1000 tries")
	return "", "", ""
}

// postForged posts a webhook with the given Telnyx headers.
func postForged(t *testing.T, e *mediaReplica, ts, sig, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, e.public+"/api/v1/telnyx/allocate?merchant_id=m", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Telnyx-Timestamp", ts)
	req.Header.Set("Telnyx-Signature-Ed25519", sig)
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

// forgeriesAnswered sends n forged webhooks, each a fresh signature under
// smallOrderKey, and returns how many were answered with a media URL.
func forgeriesAnswered(t *testing.T, e *mediaReplica, n int) int {
	t.Helper()
	got := 0
	for i := range n {
		ts, sig, body := forgeTelnyx(t, fmt.Sprintf("v3:e2eForgedCall_%d_0123456789abcdef", i), time.Now())
		if _, ans := postForged(t, e, ts, sig, body); telnyxStreamURL.MatchString(ans) {
			got++
		}
	}
	return got
}

// A Telnyx public key of small order in auth_tokens fails check-config,
// naming its item and why, not its value; the real binary starts the
// telnyx plugin, which checks its keys.
func TestCheckConfigRefusesATelnyxKeyOfSmallOrder(t *testing.T) {
	good := base64.StdEncoding.EncodeToString(ed25519.NewKeyFromSeed([]byte("telnyx-check-account-key-seed-32")).Public().(ed25519.PublicKey))
	cfg := edgetest.WriteFile(t, "telnyx.yaml", "providers:\n  plugins:\n    telnyx: {auth_tokens: ["+good+", "+smallOrderKey+"]}\n")
	useBuiltEdge(t)
	var out bytes.Buffer
	err := run(t.Context(), []string{"check-config", "--config", cfg}, nil, &out, &out)
	want := "providers.plugins.telnyx.auth_tokens: item 2 is a point of small order"
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("check-config: %v, want %q", err, want)
	}
	if strings.Contains(err.Error(), "item 1") {
		t.Errorf("check-config blames the good key: %v", err)
	}
	if strings.Contains(err.Error()+out.String(), smallOrderKey) {
		t.Errorf("check-config printed the refused value:\n%v\n%s", err, out.String())
	}
}

// edge serving with a small-order Telnyx key does not serve Telnyx with
// it: the plugin refuses its settings at start, saying why, and forged
// webhooks (each a fresh signature that crypto/ed25519 accepts under that
// key) get no media URL and lease no pod.
func TestTelnyxKeyOfSmallOrderIsRefusedAtStart(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs edge processes")
	}
	f := newE2E(t)
	agent := mediaAgent(t)
	var pods []string // one per forgery, so that each could get a pod
	for i := range 9 {
		pods = append(pods, fmt.Sprintf("t-pod-%d", i), agent.Addr())
	}
	e := f.start("edge", f.config("edge.yaml", `
allocator: {lease_ttl: 15s, renew_interval: 5s, call_info_ttl: 1h}
tiers: {gold: {type: exclusive, target: 9}}
default_chain: [gold]
providers:
  plugins:
    telnyx:
      auth_tokens: [`+smallOrderKey+`]
`+podsYAML("gold", pods...)))
	const refused = "auth_tokens: item 1 is a point of small order"
	testwait.Until(t, 60*time.Second, "the telnyx plugin refusing its key, or edge ready", func() bool {
		return strings.Contains(e.Log(), refused) || provGet(t, e.admin+"/readyz") == 200
	})
	if n := forgeriesAnswered(t, e, 9); n > 0 {
		t.Errorf("%d of 9 forged webhooks got a media URL", n)
	}
	for i := range 9 {
		if p := edgetest.Pod(t, e.admin, fmt.Sprintf("t-pod-%d", i)); p.Lease != "" {
			t.Errorf("a forged webhook leased t-pod-%d to %q", i, p.Lease)
		}
	}
	if !strings.Contains(e.Log(), refused) {
		t.Errorf("the log does not say %q", refused)
	}
	if strings.Contains(e.Log(), smallOrderKey) {
		t.Error("the log holds the refused key's value")
	}
}

// A reload that adds a small-order key to Telnyx's auth_tokens is refused
// by the plugin's dry run, naming the item; the running plugin keeps its
// last good keys: the account's key still allocates, forgeries do not.
func TestTelnyxReloadRefusesAKeyOfSmallOrder(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs edge processes")
	}
	key := ed25519.NewKeyFromSeed([]byte("telnyx-reload-account-key-seed!!"))
	good := base64.StdEncoding.EncodeToString(key.Public().(ed25519.PublicKey))
	f := newE2E(t)
	agent := mediaAgent(t)
	cfg := func(tokens string) string {
		return `
reload: {interval: 20ms}
allocator: {lease_ttl: 15s, renew_interval: 5s, call_info_ttl: 1h}
tiers: {gold: {type: exclusive, target: 2}}
default_chain: [gold]
providers:
  plugins:
    telnyx:
      auth_tokens: [` + tokens + `]
` + podsYAML("gold", "t-pod-0", agent.Addr(), "t-pod-1", agent.Addr()) + "\n" + edgetest.APITokenYAML
	}
	path := f.config("edge.yaml", "")
	write := func(body string) {
		t.Helper()
		// Write then rename, as a ConfigMap update does.
		if err := os.WriteFile(path+".tmp", []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(path+".tmp", path); err != nil {
			t.Fatal(err)
		}
	}
	write(cfg(good))
	e := f.start("edge", path)
	if !e.WaitReady(30 * time.Second) {
		t.Fatal("edge not ready with its plugins after 30s")
	}
	body := "AccountSid=acct&CallSid=v3:e2eReloadCall_one_0123456789abcdef&From=%2B15550100&To=%2B15550199"
	if status, ans := telnyxWebhook(t, e, key, time.Now(), body); status != http.StatusOK || !telnyxStreamURL.MatchString(ans) {
		t.Fatalf("signed webhook before the reload: %d %s", status, ans)
	}

	write(cfg(good + ", " + smallOrderKey))
	const refused = "auth_tokens: item 2 is a point of small order"
	forged := 0
	testwait.Until(t, 60*time.Second, "the reload refused, or applied", func() bool {
		if strings.Contains(e.Log(), refused) {
			return true
		}
		forged = forgeriesAnswered(t, e, 1)
		return forged > 0
	})
	if forged > 0 {
		t.Fatal("after the reload a forged webhook got a media URL")
	}
	if n := forgeriesAnswered(t, e, 9); n > 0 {
		t.Errorf("after the refused reload %d of 9 forged webhooks got a media URL", n)
	}
	body = "AccountSid=acct&CallSid=v3:e2eReloadCall_two_0123456789abcdef&From=%2B15550100&To=%2B15550199"
	if status, ans := telnyxWebhook(t, e, key, time.Now(), body); status != http.StatusOK || !telnyxStreamURL.MatchString(ans) {
		t.Errorf("signed webhook after the refused reload: %d %s, want the last good key to verify", status, ans)
	}
	if m := provBody(t, e.admin+"/metrics"); !strings.Contains(m, `edge_plugin_settings_rejects_total{plugin="telnyx"} 1`) {
		t.Errorf("no settings reject counted")
	}
	if strings.Contains(e.Log(), smallOrderKey) {
		t.Error("the log holds the refused key's value")
	}
}
