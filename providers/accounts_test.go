package providers_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha1"
	"encoding/base64"
	"fmt"
	"net/url"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/edge-voice/edge/plugins"
	"github.com/edge-voice/edge/providers"
)

// Two Twilio accounts of one edge, each with its own auth token.
const (
	account1, token1 = "AC11111111111111111111111111111111", "account-1-token-0123456789"
	account2, token2 = "AC22222222222222222222222222222222", "account-2-token-0123456789"
)

// signAs is Twilio's documented signature with token (as twilioSign).
func signAs(token, fullURL string, form url.Values) string {
	names := make([]string, 0, len(form))
	for n := range form {
		names = append(names, n)
	}
	sort.Strings(names)
	s := fullURL
	for _, n := range names {
		s += n + form.Get(n)
	}
	mac := hmac.New(sha1.New, []byte(token))
	mac.Write([]byte(s))
	return base64.StdEncoding.EncodeToString(mac.Sum(nil))
}

// asAccount posts a Twilio webhook as the account (AccountSid) signed
// with token, as Twilio signs it.
func asAccount(t *testing.T, e *env, token, account, path string, form url.Values) answer {
	t.Helper()
	form.Set("AccountSid", account)
	return e.do(t, "POST", path, form.Encode(), "X-Twilio-Signature", signAs(token, "https://edge.example.com"+path, form))
}

// accountsEnv runs the Twilio plugin process with the providers section
// pl (its settings as edge hands them over, PluginSettings), and two
// exclusive pods.
func accountsEnv(t *testing.T, pl providers.Plugin) *env {
	t.Helper()
	e := newEnv(t, spec("twilio", pl.PluginSettings()), spec("testprov", nil))
	cfg := *e.cfg.Load()
	cfg.Plugins = map[string]providers.Plugin{"twilio": pl}
	e.cfg.Store(&cfg)
	e.register(t, "gold", "voice-agent-0", "voice-agent-1")
	return e
}

func twoAccounts() providers.Plugin {
	return providers.Plugin{Accounts: map[string]providers.Account{
		account1: {AuthTokens: token1, Merchants: []string{"acme"}},
		account2: {AuthTokens: token2},
	}}
}

// Several Twilio auth tokens used to be one trust domain: a token of
// account 2 signed status callbacks that ended account 1's live calls
// (ended_by provider:completed), replays that repeated them, and
// allocations for any merchant. With the accounts configured as accounts,
// through the real plugin process: account 2's callbacks for account 1's
// calls are refused 403 and change nothing, its replay of one learns no
// media URL, it cannot sign a body naming account 1, and it allocates for
// no merchant bound to account 1; account 1's own callback still ends its
// call.
func TestAnotherAccountCannotEndOrTakeACall(t *testing.T) {
	e := accountsEnv(t, twoAccounts())
	ctx := context.Background()
	const allocate = "/api/v1/twilio/allocate?merchant_id=acme"
	const call = "CA000000000000000000000000000ac001"

	got := asAccount(t, e, token1, account1, allocate, url.Values{"CallSid": {call}})
	if got.status != 200 || !strings.Contains(got.body, "<Stream url=") {
		t.Fatalf("account 1's webhook: %+v", got)
	}
	if tl, err := e.alloc.Timeline(ctx, call); err != nil || tl.Account != account1 || tl.State != "live" {
		t.Fatalf("timeline = %+v, %v; want live, account %s", tl, err, account1)
	}

	before := e.snapshot(t)
	for name, try := range map[string]func() answer{
		"account 2's completed callback": func() answer {
			return asAccount(t, e, token2, account2, "/api/v1/twilio/status", url.Values{"CallSid": {call}, "CallStatus": {"completed"}})
		},
		"account 2's stream-stopped callback": func() answer {
			return asAccount(t, e, token2, account2, "/api/v1/twilio/status", url.Values{"CallSid": {call}, "StreamEvent": {"stream-stopped"}})
		},
		"account 2's token over a body naming account 1": func() answer {
			return asAccount(t, e, token2, account1, "/api/v1/twilio/status", url.Values{"CallSid": {call}, "CallStatus": {"completed"}})
		},
		// Without the merchant, which account 2 may not name (below).
		"account 2's replay of the call's webhook": func() answer {
			return asAccount(t, e, token2, account2, "/api/v1/twilio/allocate", url.Values{"CallSid": {call}})
		},
	} {
		if got := try(); got.status != 403 || strings.Contains(got.body, "wss://") {
			t.Errorf("%s: %+v, want 403 without a media URL", name, got)
		}
	}
	if diff := cmp.Diff(before, e.snapshot(t)); diff != "" {
		t.Fatalf("another account's requests changed Redis:\n%s", diff)
	}
	if tl, _ := e.alloc.Timeline(ctx, call); tl.State != "live" || tl.EndedBy != "" {
		t.Errorf("timeline after account 2's callbacks = %+v, want live and not ended", tl)
	}
	e.logs.waitFor(t, "WARN", "status callback refused: the call belongs to another account", "account="+account2)

	// Account 2 may not allocate for acme, which account 1 is bound to:
	// the provider's failure markup, no pod.
	other := "CA000000000000000000000000000ac002"
	got = asAccount(t, e, token2, account2, allocate, url.Values{"CallSid": {other}})
	if got.status != 200 || !strings.Contains(got.body, "<Hangup>") || strings.Contains(got.body, "<Stream") {
		t.Errorf("account 2 allocating for acme: %+v, want the hangup markup", got)
	}
	// Account 1 is bound to acme: another merchant is refused too.
	got = asAccount(t, e, token1, account1, "/api/v1/twilio/allocate?merchant_id=beta", url.Values{"CallSid": {other}})
	if got.status != 200 || !strings.Contains(got.body, "<Hangup>") {
		t.Errorf("account 1 allocating for beta: %+v, want the hangup markup", got)
	}
	if diff := cmp.Diff(before, e.snapshot(t)); diff != "" {
		t.Fatalf("refused allocations changed Redis:\n%s", diff)
	}
	// Account 2 allocates for merchants no account is bound to.
	if got := asAccount(t, e, token2, account2, "/api/v1/twilio/allocate?merchant_id=beta", url.Values{"CallSid": {other}}); got.status != 200 || !strings.Contains(got.body, "<Stream url=") {
		t.Errorf("account 2 allocating for beta: %+v", got)
	}

	// The call's own account ends it.
	if got := asAccount(t, e, token1, account1, "/api/v1/twilio/status", url.Values{"CallSid": {call}, "CallStatus": {"completed"}}); got.status != 204 {
		t.Fatalf("account 1's completed callback: %+v", got)
	}
	if tl, _ := e.alloc.Timeline(ctx, call); tl.State != "ended" || tl.EndedBy != "provider:completed" || tl.Account != account1 {
		t.Errorf("timeline after account 1's callback = %+v", tl)
	}
	for outcome, want := range map[string]float64{"other_account": 3, "merchant_not_allowed": 2, "rejected": 1, "ended": 1} {
		if n := metric(t, e, "edge_provider_webhooks_total", "provider", "twilio", "outcome", outcome); n != want {
			t.Errorf("edge_provider_webhooks_total{outcome=%q} = %v, want %v", outcome, n, want)
		}
	}
}

// The attack in numbers: account 1 places calls, account 2 replays each
// one's webhook and sends a signed "completed" callback for it. None
// ends, no replay learns a media URL.
func TestAnotherAccountsCallbacksEndNoCall(t *testing.T) {
	e := accountsEnv(t, twoAccounts())
	e.register(t, "basic", "voice-agent-shared")
	ctx := context.Background()
	const n = 20
	ended, replayURL := 0, 0
	for i := range n {
		call := fmt.Sprintf("CA000000000000000000000000000ad%03d", i)
		if got := asAccount(t, e, token1, account1, "/api/v1/twilio/allocate?merchant_id=acme", url.Values{"CallSid": {call}}); got.status != 200 {
			t.Fatalf("account 1's call %d: %+v", i, got)
		}
		if got := asAccount(t, e, token2, account2, "/api/v1/twilio/allocate", url.Values{"CallSid": {call}}); strings.Contains(got.body, "wss://") {
			replayURL++
		}
		asAccount(t, e, token2, account2, "/api/v1/twilio/status", url.Values{"CallSid": {call}, "CallStatus": {"completed"}})
		if tl, err := e.alloc.Timeline(ctx, call); err != nil || tl.State != "live" {
			ended++
		}
	}
	t.Logf("account 2's signed callbacks that ended account 1's calls: %d of %d", ended, n)
	t.Logf("account 2's replays of account 1's calls answered with the media URL: %d of %d", replayURL, n)
	if ended != 0 || replayURL != 0 {
		t.Errorf("account 2 ended %d and learned the media URL of %d of account 1's %d calls", ended, replayURL, n)
	}
}

// auth_tokens keeps its meaning: several tokens of one account, any of
// which may end a call another of them created (a rotation), and the
// calls carry no account.
func TestRotationTokensStayOneAccount(t *testing.T) {
	e := accountsEnv(t, providers.Plugin{AuthTokens: token1 + "," + token2})
	ctx := context.Background()
	const call = "CA000000000000000000000000000ae001"
	if got := asAccount(t, e, token1, account1, "/api/v1/twilio/allocate", url.Values{"CallSid": {call}}); got.status != 200 {
		t.Fatalf("webhook signed with the new token: %+v", got)
	}
	if got := asAccount(t, e, token2, account2, "/api/v1/twilio/allocate", url.Values{"CallSid": {call}}); got.status != 200 || !strings.Contains(got.body, "<Stream url=") {
		t.Errorf("its retry signed with the old token: %+v", got)
	}
	if got := asAccount(t, e, token2, account2, "/api/v1/twilio/status", url.Values{"CallSid": {call}, "CallStatus": {"completed"}}); got.status != 204 {
		t.Fatalf("callback signed with the old token: %+v", got)
	}
	if tl, _ := e.alloc.Timeline(ctx, call); tl.State != "ended" || tl.Account != "" {
		t.Errorf("timeline = %+v, want ended, no account", tl)
	}
}

// A call allocated before its provider had accounts (no account stored)
// is ended by the callback of any of them, as before.
func TestACallWithoutAnAccountIsEndedByAny(t *testing.T) {
	e := accountsEnv(t, twoAccounts())
	ctx := context.Background()
	const call = "CA000000000000000000000000000af001"
	if err := e.host.Reconfigure(spec("twilio", plugins.Settings{"auth_tokens": token1})); err != nil {
		t.Fatal(err)
	}
	cfg := *e.cfg.Load()
	cfg.Plugins = nil
	e.cfg.Store(&cfg)
	if got := asAccount(t, e, token1, account1, "/api/v1/twilio/allocate", url.Values{"CallSid": {call}}); got.status != 200 {
		t.Fatalf("single-account webhook: %+v", got)
	}
	pl := twoAccounts()
	if err := e.host.Reconfigure(spec("twilio", pl.PluginSettings())); err != nil {
		t.Fatal(err)
	}
	cfg.Plugins = map[string]providers.Plugin{"twilio": pl}
	e.cfg.Store(&cfg)
	if got := asAccount(t, e, token2, account2, "/api/v1/twilio/status", url.Values{"CallSid": {call}, "CallStatus": {"completed"}}); got.status != 204 {
		t.Fatalf("account 2's callback for a call without an account: %+v", got)
	}
	if tl, _ := e.alloc.Timeline(ctx, call); tl.State != "ended" || tl.EndedBy != "provider:completed" {
		t.Errorf("timeline = %+v", tl)
	}
}

// A plugin that reports no account (built before WebhookResult.Account)
// for a provider configured with accounts is refused: trusting it would
// make its accounts one again.
func TestAPluginThatReportsNoAccountIsRefused(t *testing.T) {
	e := accountsEnv(t, twoAccounts())
	cfg := *e.cfg.Load()
	cfg.Plugins["testprov"] = providers.Plugin{Path: "/testprov", Accounts: map[string]providers.Account{"one": {AuthTokens: "x"}}}
	e.cfg.Store(&cfg)
	before := e.snapshot(t)
	for _, body := range []string{"call=CA000000000000000000000000000b0001", "end=CA000000000000000000000000000b0001:completed"} {
		if got := e.do(t, "POST", "/api/v1/testprov/status", body); got.status != 403 || !strings.Contains(got.body, "unknown_account") {
			t.Errorf("%s: %+v, want 403 unknown_account", body, got)
		}
	}
	if diff := cmp.Diff(before, e.snapshot(t)); diff != "" {
		t.Errorf("refused webhooks changed Redis:\n%s", diff)
	}
	e.logs.waitFor(t, "ERROR", "plugin=testprov", "reported none of them")
}

// A reload's accounts are dry-run by the running plugin as any setting is:
// a Twilio account not named by its AccountSid is refused, naming the key
// and no token, and the plugin keeps its accounts.
func TestReloadedAccountsAreValidated(t *testing.T) {
	e := accountsEnv(t, twoAccounts())
	bad := providers.Plugin{Accounts: map[string]providers.Account{"sales": {AuthTokens: "secret-sales"}}}
	err := e.host.Reconfigure(spec("twilio", bad.PluginSettings()))
	if err == nil || !strings.Contains(err.Error(), "auth_tokens.sales: a Twilio account is named by its AccountSid") || strings.Contains(err.Error(), "secret-sales") {
		t.Fatalf("Reconfigure = %v", err)
	}
	const call = "CA000000000000000000000000000b1001"
	if got := asAccount(t, e, token1, account1, "/api/v1/twilio/allocate?merchant_id=acme", url.Values{"CallSid": {call}}); got.status != 200 || !strings.Contains(got.body, "<Stream url=") {
		t.Errorf("account 1 after the refused reload: %+v", got)
	}
	if got := asAccount(t, e, token2, account2, "/api/v1/twilio/status", url.Values{"CallSid": {call}, "CallStatus": {"completed"}}); got.status != 403 {
		t.Errorf("account 2's callback after the refused reload: %+v", got)
	}
}
