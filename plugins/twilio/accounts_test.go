package twilio_test

import (
	"context"
	"strings"
	"testing"

	"github.com/edge-voice/edge/plugins"
	"github.com/edge-voice/edge/plugins/twilio"
)

const (
	acct1 = "AC11111111111111111111111111111111"
	acct2 = "AC22222222222222222222222222222222"
)

func twoAccounts(t *testing.T) *twilio.Provider {
	t.Helper()
	p := twilio.New()
	if _, err := p.Configure(context.Background(), plugins.Settings{
		plugins.AccountTokensPrefix + acct1: tokNew + "," + tokOld, plugins.AccountTokensPrefix + acct2: "tok-acct2-000",
	}); err != nil {
		t.Fatal(err)
	}
	return p
}

// Each account's token verifies for its own account, rotation within an
// account included, and the webhook reports which; a token of one
// account over a body naming the other is refused.
func TestWebhookReportsTheAccountWhoseTokenSigned(t *testing.T) {
	p := twoAccounts(t)
	status := "https://edge.example.com/api/v1/twilio/status"
	for name, tc := range map[string]struct {
		token, named, url string
		status            int
		account           string
	}{
		"account 1's new token":            {tokNew, acct1, hookURL, 0, acct1},
		"account 1's old token":            {tokOld, acct1, hookURL, 0, acct1},
		"account 2's token":                {"tok-acct2-000", acct2, hookURL, 0, acct2},
		"AccountSid in another case":       {"tok-acct2-000", strings.ToLower(acct2), hookURL, 0, acct2},
		"account 2's token naming 1":       {"tok-acct2-000", acct1, hookURL, 403, ""},
		"account 1's token naming 2":       {tokNew, acct2, hookURL, 403, ""},
		"no AccountSid":                    {tokNew, "", hookURL, 403, ""},
		"callback of account 2":            {"tok-acct2-000", acct2, status, 204, acct2},
		"callback of 2 naming 1":           {"tok-acct2-000", acct1, status, 403, ""},
		"a token of neither":               {"tok-unknown", acct1, hookURL, 403, ""},
		"callback signed by neither token": {"tok-unknown", acct2, status, 403, ""},
	} {
		t.Run(name, func(t *testing.T) {
			pairs := []string{"CallSid", sid, "CallStatus", "completed"}
			if tc.named != "" {
				pairs = append(pairs, "AccountSid", tc.named)
			}
			req := request(tc.url, sign(tc.token, tc.url, pairs...), pairs...)
			if tc.url == status {
				req.Route = twilio.RouteStatus
			}
			res, err := p.Webhook(context.Background(), req)
			if err != nil {
				t.Fatal(err)
			}
			switch {
			case tc.status == 0 && (res.Allocate == nil || res.Account != tc.account):
				t.Errorf("want an allocation of %s, got %+v (answer %+v)", tc.account, res, res.Answer)
			case tc.status != 0 && (res.Answer == nil || res.Answer.Status != tc.status || res.Account != tc.account):
				t.Errorf("want %d from %q, got %+v (answer %+v)", tc.status, tc.account, res, res.Answer)
			case tc.status == 204 && (res.Ended == nil || res.Ended.CallID != sid):
				t.Errorf("the callback ends nothing: %+v", res)
			}
		})
	}
}

// With auth_tokens (one account) nothing changes: any token verifies, no
// account is reported, AccountSid is not compared.
func TestOneAccountReportsNone(t *testing.T) {
	p := twilio.New()
	if _, err := p.Configure(context.Background(), plugins.Settings{"auth_tokens": tokNew + "," + tokOld}); err != nil {
		t.Fatal(err)
	}
	for _, tok := range []string{tokNew, tokOld} {
		res, err := p.Webhook(context.Background(), request(hookURL, sign(tok, hookURL, call...), call...))
		if err != nil || res.Allocate == nil || res.Account != "" {
			t.Errorf("token %s: %+v, %v", tok, res, err)
		}
	}
}

// A Twilio account is named by its AccountSid; the refusal names the key
// and never a token.
func TestAccountsMustBeAccountSids(t *testing.T) {
	for _, label := range []string{"sales", "AC123", "CA11111111111111111111111111111111", "AC1111111111111111111111111111111g"} {
		_, err := twilio.New().ValidateSettings(context.Background(), plugins.Settings{plugins.AccountTokensPrefix + label: "secret-tok"})
		bad := plugins.InvalidSettings(err)
		if len(bad) != 1 || bad[0].Key != plugins.AccountTokensPrefix+label || strings.Contains(err.Error(), "secret-tok") {
			t.Errorf("%s: %v", label, err)
		}
	}
	if _, err := twilio.New().ValidateSettings(context.Background(), plugins.Settings{plugins.AccountTokensPrefix + strings.ToLower(acct1): "t"}); err != nil {
		t.Errorf("a lower-cased AccountSid (the environment's form): %v", err)
	}
}
