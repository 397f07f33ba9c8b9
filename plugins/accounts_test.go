package plugins

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestCredentials(t *testing.T) {
	for name, tc := range map[string]struct {
		settings Settings
		want     []Credential
		key      string // the refused key, when refused
	}{
		"none":               {Settings{}, nil, ""},
		"one account":        {Settings{"auth_tokens": "new, old"}, []Credential{{Token: "new"}, {Token: "old"}}, ""},
		"several accounts":   {Settings{"auth_tokens.b": "b1", "auth_tokens.a": "a1,a0"}, []Credential{{"a", "a1"}, {"a", "a0"}, {"b", "b1"}}, ""},
		"both forms":         {Settings{"auth_tokens": "x", "auth_tokens.a": "a1"}, nil, "auth_tokens"},
		"empty account":      {Settings{"auth_tokens.a": " , "}, nil, "auth_tokens.a"},
		"bad label":          {Settings{"auth_tokens.a b": "a1"}, nil, "auth_tokens.a b"},
		"label too long":     {Settings{"auth_tokens." + strings.Repeat("a", 65): "a1"}, nil, "auth_tokens." + strings.Repeat("a", 65)},
		"a token in two":     {Settings{"auth_tokens.a": "shared-secret", "auth_tokens.b": "shared-secret"}, nil, "auth_tokens.b"},
		"other keys ignored": {Settings{"auth_tokens_x": "y", "greeting": "hi"}, nil, ""},
	} {
		t.Run(name, func(t *testing.T) {
			got, err := Credentials(tc.settings)
			if tc.key == "" {
				if err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(tc.want, got); diff != "" {
					t.Error(diff)
				}
				return
			}
			bad := InvalidSettings(err)
			if len(bad) != 1 || bad[0].Key != tc.key || !errors.Is(err, ErrInvalidSettings) {
				t.Fatalf("Credentials = %v, %v; want an InvalidSetting of %q", got, err, tc.key)
			}
			if strings.Contains(err.Error(), "shared-secret") {
				t.Errorf("the refusal shows a token: %v", err)
			}
		})
	}
}

// MatchAccount asks about every credential, and names the account of the
// one that matched.
func TestMatchAccount(t *testing.T) {
	creds := []Credential{{"a", "a1"}, {"b", "b1"}, {"b", "b0"}, {"c", "c1"}}
	var asked []string
	account, ok := MatchAccount(creds, func(tok string) bool { asked = append(asked, tok); return tok == "b0" })
	if account != "b" || !ok || len(asked) != len(creds) {
		t.Errorf("MatchAccount = %q, %v after asking %v; want b, every token asked", account, ok, asked)
	}
	if account, ok := MatchAccount(creds, func(string) bool { return false }); ok || account != "" {
		t.Errorf("no match = %q, %v", account, ok)
	}
}

// The account crosses the plugin boundary; a plugin built before it sends
// none, which reads as "".
func TestWebhookAccountCrossesTheWire(t *testing.T) {
	in := &WebhookResult{Answer: &Response{Status: 204}, Ended: &CallEnd{CallID: "c", Event: "completed"}, Account: "AC1"}
	if out := webhookResultFromPB(webhookResultToPB(in)); out.Account != "AC1" || out.Ended == nil {
		t.Errorf("account came back as %+v", out)
	}
	old := webhookResultToPB(&WebhookResult{Allocate: &AllocationRequest{CallID: "c"}})
	if out := webhookResultFromPB(old); out.Account != "" {
		t.Errorf("no account read as %q", out.Account)
	}
}
